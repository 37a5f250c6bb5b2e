#!/usr/bin/env bash
# NVML that kills the process starting it, on the GPU machine: the tests' stand-in libnvidia-ml.so.1 compiled here
# with cc, its nvmlInit raising SIGSEGV, first on LD_LIBRARY_PATH. The first probe dies inside NVML (exit -11, Python's
# stacks printed where); every run after it starts NVML in a child first, says `crashed` with what to do and calls no
# NVML itself (probe, check's GPU checks ERROR, report's driver gate FAILs); then the real driver again: the run after
# the crash starts the real NVML in a child, which starts cleanly, and reads the GPU in process, the marks gone.
# Then a library whose nvmlInit answers and whose nvmlSystemGetDriverVersion raises SIGSEGV: the child reads NVML whole,
# so the run after it says `crashed` too; the real driver read whole in a forked child, then in process (state ok).
#   Run: bash scripts/device/r-crash.sh   (about 1 minute; cc for the stand-in; no wheel beyond common.sh's)
EVIDENCE=r-crash
. scripts/device/common.sh
export XDG_CACHE_HOME=/tmp/crash-cache; rm -rf /tmp/crash "$XDG_CACHE_HOME" "$PROVISION_HOME"; mkdir -p /tmp/crash
python3 -c "import sys; sys.path.insert(0, 'tests'); import standin_nvml; from pathlib import Path; standin_nvml.build(Path('/tmp/crash'))"
CRASH="env LD_LIBRARY_PATH=/tmp/crash/lib STANDIN_NVML_INIT=crash"
step 00-nvidia-smi nvidia-smi --query-gpu=name,driver_version --format=csv
step 01-real-probe-json $P probe --json
step 02-adopt $P adopt h100 $VENV --no-lock
step 10-crash-probe $CRASH $P probe --json
step 11-marks-after-crash ls -la $XDG_CACHE_HOME/provision/nvml
step 12-crashed-probe-json $CRASH $P probe --json
step 13-crashed-probe $CRASH $P probe
step 14-crashed-check $CRASH $P check h100 --only driver,torch-cuda
step 15-crashed-report $CRASH $P report --profile profiles/cu130.toml
step 16-marks-while-crashed ls -la $XDG_CACHE_HOME/provision/nvml
step 20-real-after-crash-json $P probe --json
step 21-marks-after-real ls -la $XDG_CACHE_HOME/provision/nvml
step 22-real-check $P check h100 --only driver,torch-cuda
# a library that starts cleanly and dies in its first reading (nvmlSystemGetDriverVersion): the child reads NVML whole
LATER="env LD_LIBRARY_PATH=/tmp/crash/lib STANDIN_NVML_INIT=0 STANDIN_NVML_LATER=crash"
step 30-later-crash-probe $LATER $P probe --json
step 31-later-crashed-probe-json $LATER $P probe --json
step 32-real-after-later-crash-json $P probe --json
step 33-marks-after-real ls -la $XDG_CACHE_HOME/provision/nvml
echo; cat "$E/steps.txt"; echo
for f in 01-real-probe-json 12-crashed-probe-json 20-real-after-crash-json 31-later-crashed-probe-json \
  32-real-after-later-crash-json; do
  echo "== $f"; python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(d['driver'], len(d['gpus']), 'GPUs')" "$E/$f.out" 2>&1 | head -c 1500
done
echo "== 10-crash-probe (stderr)"; head -c 1500 "$E/10-crash-probe.err"
for f in 11-marks-after-crash 13-crashed-probe 14-crashed-check 15-crashed-report 16-marks-while-crashed 21-marks-after-real 22-real-check 33-marks-after-real; do
  echo "== $f"; head -c 2000 "$E/$f.out"; head -c 400 "$E/$f.err"
done
