#!/usr/bin/env bash
# Issue 14 on a GPU machine (nvidia-h200 or nvidia-h200-x2): the shipped profiles judged on SM90 ({arch_list} filled
# from the probe, so no FAIL for an SM120 setting), {arch_list} filled at adopt and at check time for FlashInfer's JIT,
# the environment's feature gates following what its checks saw (multicast is off here, as it must stay), and the
# "last smoke checks" line showing the last full run after a later --only run. Needs .whl (scripts/device/common.sh).
EVIDENCE=${EVIDENCE:-h200-report-truths}
. scripts/device/common.sh
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
install_flashinfer >/dev/null 2>&1
step 01-report $P report
step 02-report-json $P report --json
step 03-adopt $P adopt h200 $VENV --profile scripts/device/arch-list.toml
step 04-shell-env $P shell-env h200
step 05-check $P check h200 --json
step 06-check-only $P check h200 --only symmetric-memory --json
step 07-report-env $P report --env h200 --json
step 08-report-env-table $P report --env h200 --profile cu130-stable
