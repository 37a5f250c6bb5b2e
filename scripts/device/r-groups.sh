#!/usr/bin/env bash
# The tenth stop's adversary round on one H200: each check payload, bench and baseline command now leads a process
# group of its own, killed whole at its timeout; PROVISION_CHECK_TIMEOUT is checked before anything runs; a baseline's
# output is held to its last 8 M characters. Real GPU payloads in the torch venv: they still pass, a timed-out
# multi-rank check leaves no rank behind, and nothing of provision's is running after each step.
#   Run: bash scripts/device/r-groups.sh
EVIDENCE=r-groups
. scripts/device/common.sh
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
left() { ps -eo pid,pgid,sid,etimes,args | grep -E 'provision|payloads|torch' | grep -vE 'grep|ps -eo|r-groups' || true; }
step 01-adopt $P adopt h200 $VENV --no-lock
step 02-check $P check h200 --only driver,torch-cuda,symmetric-memory,nccl-allreduce
step 03-left-after-check bash -c "$(declare -f left); left"
step 04-bench-json $P bench allreduce h200 -e 1M --json
step 05-baseline-json $P baseline h200 --json
step 06-check-timeout-abc env PROVISION_CHECK_TIMEOUT=abc $P check h200 --only driver
step 07-check-timeout-1s env PROVISION_CHECK_TIMEOUT=1 $P check h200 --only symmetric-memory,nccl-allreduce --json
step 08-left-after-timeouts bash -c "sleep 2; $(declare -f left); left"
step 09-nvidia-smi-apps nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv
echo; cat "$E/steps.txt"; echo
tail -n 12 "$E/02-check.out"; echo; cat "$E/03-left-after-check.out"
head -c 600 "$E/04-bench-json.out"; echo; head -c 800 "$E/05-baseline-json.out"; echo
cat "$E/06-check-timeout-abc.err"; head -c 1500 "$E/07-check-timeout-1s.out"; echo
cat "$E/08-left-after-timeouts.out" "$E/09-nvidia-smi-apps.out"
