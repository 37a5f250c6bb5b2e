#!/usr/bin/env bash
# The built-in baseline on the H200 after baseline.py reads NVML once (the GPU test and the machine stamp share one
# reading through machine.probe.gpu_reading): adopt the image's venv, the driver check, baseline --json twice, compare.
#   Run: bash scripts/device/baseline-once.sh   (from the repository root, .whl carried)
EVIDENCE=baseline-once
. scripts/device/common.sh
export NCCL_NVLS_ENABLE=0
step 01-adopt $P adopt h200 $VENV --no-lock
step 02-check-driver $P check h200 --only driver,torch-cuda --json
step 03-baseline $P baseline h200 --json
step 04-baseline-table $P baseline h200
step 05-compare $P compare h200 h200 --json
echo; cat "$E/steps.txt"; echo; head -c 1500 "$E/03-baseline.out"; echo; cat "$E/04-baseline-table.out" "$E/04-baseline-table.err" | tail -n 8
