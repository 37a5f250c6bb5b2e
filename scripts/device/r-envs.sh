#!/usr/bin/env bash
# Issue 23, the environment commands on the one rendering path (one H200, no index reachable): the image's venv copied
# as hard links and adopted without a lock, then each command's document, lines and exit code as `cli/main.py` renders
# the Shown its view builds: envs (table, --json), a planted sitecustomize.py and an edited torch file found and put
# aside or refused by restore (--dry-run exits 1 naming what it cannot put back without a lock), accept of a file,
# shell-env's text, run's exit codes (the child's own, 127, 126), remove and gc documents; last, a restore whose
# checks run on the GPU (sitecustomize.py set aside, torch's edit named as not restorable without a lock, the check
# table from the CheckResult records, exit 1 from the Shown).
#   Run: bash scripts/device/r-envs.sh   (from the repository root there, with .whl carried as common.sh needs)
EVIDENCE=r-envs
. scripts/device/common.sh
COPY=/tmp/r-envs-copy/.venv; CSITE=$COPY/lib/python3.12/site-packages
rm -rf /tmp/r-envs-copy "$PROVISION_HOME"; mkdir -p /tmp/r-envs-copy
step 01-copy bash -c "cp -al $VENV $COPY || { rm -rf $COPY; cp -a $VENV $COPY; }"
step 02-adopt-json $P adopt copy $COPY --no-lock --json
step 03-envs $P envs
step 04-envs-json $P envs --json
# every change replaces a file (a new inode): the image's venv, which shares the copy's inodes, stays as it was
step 05-plant bash -c "cp $CSITE/torch/version.py /tmp/r-envs-copy/version.py && echo '# edited' >> /tmp/r-envs-copy/version.py && mv /tmp/r-envs-copy/version.py $CSITE/torch/version.py && echo 'import sys' > $CSITE/sitecustomize.py && echo '# mine' > $CSITE/zz_team_patch.py"
step 06-restore-dry-run $P restore copy --dry-run
step 07-restore-dry-run-json $P restore copy --dry-run --json
step 08-accept $P accept copy zz_team_patch.py
step 09-accept-json $P accept copy --drop zz_team_patch.py --json
step 10-shell-env $P shell-env copy
step 11-run-exit-3 $P run copy -- python -c 'import sys, torch; print(torch.__version__, torch.version.cuda); sys.exit(3)'
step 12-run-127 $P run copy -- no-such-command-here
step 13-run-126 $P run copy -- "$CSITE/torch/version.py"
step 14-gc-json $P gc --json
step 15-restore-checks $P restore copy
step 16-remove-json $P remove copy --force --json
step 17-image-untouched bash -c "ls $SITE/sitecustomize.py $SITE/zz_team_patch.py 2>&1; grep -c '^# edited' $SITE/torch/version.py"
echo; cat "$E/steps.txt"; echo
for f in 03-envs 06-restore-dry-run 08-accept 10-shell-env 11-run-exit-3 12-run-127 13-run-126 15-restore-checks 16-remove-json; do
  echo "== $f"; head -c 3000 "$E/$f.out"; head -c 1500 "$E/$f.err"
done
