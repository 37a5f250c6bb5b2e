#!/usr/bin/env bash
# Issue 16: the drift check's speed on the image's adopted venv (several GB), cold and warm, beside pip check and
# uv pip check; then drift finding a patched file and a dropped .pth in a hard-linked copy (the venv is never touched).
EVIDENCE=drift
. scripts/device/common.sh
step 01-bench-drift python3 scripts/bench_drift.py $VENV --runs 7 --drop-caches --json "$E/bench-drift.json"
COPY=/tmp/drift-copy/.venv; rm -rf /tmp/drift-copy; mkdir -p /tmp/drift-copy
step 02-copy cp -a $VENV $COPY
step 03-adopt-copy $P adopt copy $COPY
step 04-drift-clean $P check copy --only drift --json
step 05-plant bash -c "echo 'X = 1' >> $COPY/lib/python3.12/site-packages/torch/version.py && echo 'import os' > $COPY/lib/python3.12/site-packages/zz-experiment.pth"
step 06-drift-planted $P check copy --only drift
step 07-drift-planted-json $P check copy --only drift --json
echo; cat "$E/steps.txt"; echo
cat "$E/01-bench-drift.out" "$E/06-drift-planted.out"
