#!/usr/bin/env bash
# The thirteenth stop's changes on a real GPU: every command now ends without the interpreter's last garbage
# collection (cli/main.py _quick_exit) and probe loads wheelfacts without dataclasses; nothing else of that stop runs on
# a GPU (lock's reads are network and CPU). probe, check and report on the real driver, probe's own timing, then the
# NVML crash guard's whole run again (r-crash.sh), whose marks wheelfacts' folder code keeps.
#   Run: bash scripts/device/r-stop13.sh   (about 2 minutes; no wheel beyond common.sh's)
EVIDENCE=r-stop13
. scripts/device/common.sh
export XDG_CACHE_HOME=/tmp/stop13-cache; rm -rf "$XDG_CACHE_HOME" "$PROVISION_HOME"
step 00-nvidia-smi nvidia-smi --query-gpu=name,driver_version,compute_cap --format=csv
step 01-probe-json $P probe --json
step 02-probe $P probe
step 03-bench-probe python3 scripts/bench_probe.py --runs 9 --slow-runs 3 --json "$E/bench-probe.json"
step 04-adopt $P adopt h100 $VENV --no-lock
step 05-check $P check h100 --only driver,torch-cuda --json
step 06-report $P report --json
step 07-exit-codes bash -c "$P check nope; echo rc=\$?; $P probe --json > /dev/null; echo rc=\$?"
echo; cat "$E/steps.txt"
