#!/usr/bin/env bash
# Issue 21 on the H200 machine, where no index is reachable: the image's venv (/opt/torch/.venv, 7.2 GB) copied as hard
# links (cp -al: seconds, and the image's venv is never written: every change below replaces a file, never edits one in
# place) and adopted. Shows what adopt prints when its lookup finds no index (and whether uv's cache there holds any of
# the wheels), then that drift and restore stay correct without one: a patched torch/version.py, a dropped .pth and
# sitecustomize.py found; restore --dry-run and restore both exit 1 naming what they cannot put back, set the start-up
# files aside, and leave torch as it is. Run from the repository root there, with .whl (carried wheels) carried.
EVIDENCE=adopt
. scripts/device/common.sh
export PROVISION_HTTP_TIMEOUT=10
COPY=/tmp/adopt-copy/.venv; CSITE=$COPY/lib/python3.12/site-packages
rm -rf /tmp/adopt-copy; mkdir -p /tmp/adopt-copy
step 00-uv bash -c 'command -v uv; uv --version; d=$(uv cache dir); echo "cache: $d"; ls "$d" 2>&1; du -sh "$d" 2>&1; ls $(dirname $(command -v python3))/../lib/python3.12/site-packages | grep -c dist-info'
step 01-copy bash -c "cp -al $VENV $COPY || { rm -rf $COPY; cp -a $VENV $COPY; }"  # a full copy where /tmp is another file system
step 02-adopt $P adopt copy $COPY
step 03-lock-env-json $P lock --env copy --json
step 04-envs $P envs
step 05-drift-clean $P check copy --only drift --strict --json
# every change replaces a file (a new inode): the image's venv, which shares the copy's inodes, stays as it was
step 06-plant bash -c "cp $CSITE/torch/version.py /tmp/adopt-copy/version.py && echo 'X = 1' >> /tmp/adopt-copy/version.py && mv /tmp/adopt-copy/version.py $CSITE/torch/version.py && echo 'import os' > $CSITE/zz-experiment.pth && echo 'import sys' > $CSITE/sitecustomize.py"
step 07-image-untouched bash -c "grep -c '^X = 1' $SITE/torch/version.py; ls $SITE/zz-experiment.pth $SITE/sitecustomize.py 2>&1"
step 08-drift-planted $P check copy --only drift
step 09-drift-planted-strict $P check copy --only drift --strict --json
step 10-restore-dry-run $P restore copy --dry-run
step 11-restore-dry-run-json $P restore copy --dry-run --json
step 12-restore $P restore copy --no-checks
step 13-drift-after $P check copy --only drift --json
step 14-set-aside bash -c "ls -R $PROVISION_HOME/builds/copy-adopted-*/set-aside; tail -1 $CSITE/torch/version.py"
echo; cat "$E/steps.txt"; echo
for f in 02-adopt 08-drift-planted 10-restore-dry-run 12-restore; do echo "== $f"; head -c 6000 "$E/$f.out"; head -c 2000 "$E/$f.err"; done
