#!/usr/bin/env bash
# The payload launcher removes its ranks' folder with the verdict (ninth stop): on one H200, the symmetric-memory and
# nccl-allreduce checks and a bench run in the torch venv, with TMPDIR a fresh folder that must be empty after each.
#   Run: bash scripts/device/r-ranks.sh
EVIDENCE=r-ranks
. scripts/device/common.sh
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export TMPDIR=/tmp/ranks-tmp; rm -rf "$TMPDIR"; mkdir -p "$TMPDIR"
step 01-adopt $P adopt h200 $VENV --no-lock
step 02-check $P check h200 --only driver,torch-cuda,symmetric-memory,nccl-allreduce
step 03-tmp-after-check bash -c 'ls -A "$TMPDIR"; test -z "$(ls -A "$TMPDIR")"'
step 04-bench-json $P bench allreduce h200 -e 1M --json
step 05-tmp-after-bench bash -c 'ls -A "$TMPDIR"; test -z "$(ls -A "$TMPDIR")"'
echo; cat "$E/steps.txt"; echo; tail -n 15 "$E/02-check.out" "$E/03-tmp-after-check.out" "$E/05-tmp-after-bench.out"
