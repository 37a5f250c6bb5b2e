#!/usr/bin/env bash
# Issue 23, item 5, on the one-H200 machine: start-up A/B in ONE run, so that a host that differs from call to call
# (import click was 53.5 ms in startup4, 64 ms in the seventh stop's startup2 run) cannot pass for a change.
# A = BEFORE (default 951b8d4, the seventh stop's first commit: `git archive` of the device copy's .git), B = this
# checkout; both as `python -m provision` from their folder, in provision's own venv as startup2.sh builds it.
#   Run: bash scripts/device/startup-ab.sh [BEFORE]   (from the repository root; `.whl` carried)
EVIDENCE=startup-ab
. scripts/device/common.sh
BEFORE=${1:-951b8d4}
python3 -m venv --without-pip /tmp/pv
PV=/tmp/pv/bin/python
printf '%s\n' /tmp/site "$SITE" > "$($PV -c 'import sysconfig; print(sysconfig.get_path("purelib"))')/provision-paths.pth"
python3 -m compileall -q /tmp/site $SITE/click $SITE/rich $SITE/requests $SITE/urllib3 $SITE/markdown_it $SITE/pygments >/dev/null
rm -rf /tmp/before && mkdir -p /tmp/before && git archive "$BEFORE" | tar -x -C /tmp/before
unset PYTHONPATH
step 01-before-commit bash -c "git log --oneline -1 $BEFORE; ls /tmp/before/provision/envs | head -40"
step 02-ab $PV scripts/bench_startup.py --runs 21 --before /tmp/before --replay tests/data/h200.nvml.json --json /tmp/$EVIDENCE/ab.json
step 03-fsync $PV -c "
import os, time, tempfile, statistics
d = tempfile.mkdtemp(dir='/tmp'); t = []
for i in range(21):
    p = os.path.join(d, 'f'); s = time.perf_counter(); fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_TRUNC); os.write(fd, b'x'); os.fsync(fd); os.close(fd); t.append(time.perf_counter() - s)
print(f'fsync of a 1-byte file in /tmp: median {statistics.median(t) * 1000:.2f} ms')"
echo; cat "$E/steps.txt"; echo; cat "$E/02-ab.out" "$E/03-fsync.out"
