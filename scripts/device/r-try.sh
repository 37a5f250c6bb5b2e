#!/usr/bin/env bash
# `provision try` and `provision trials` on one GPU with the built-in baseline (bf16 GEMM TFLOP/s) of the adopted torch
# venv: a baseline of 3 runs, then trials with real settings that move its figure (no caching allocator: a cudaMalloc
# and a synchronizing cudaFree around every GEMM; CUDA_LAUNCH_BLOCKING=1), one that fails for real (no GPU visible:
# the payload exits 2), a recipe that does not apply (no SGLang in this venv), the recipes listed, and the ledger as
# a table, JSON and Markdown. Each trial puts the venv back and runs the baseline once more within its noise.
#   Run: bash scripts/device/r-try.sh     (no wheels beyond common.sh's)
EVIDENCE=r-try
. scripts/device/common.sh
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
step 01-adopt $P adopt gpu $VENV --no-lock
step 02-baseline $P baseline gpu --runs 3 --json
step 03-try-no-caching $P try gpu no-caching-allocator --env PYTORCH_NO_CUDA_MEMORY_CACHING=1 --runs 3 --json
step 04-try-launch-blocking $P try gpu launch-blocking --env CUDA_LAUNCH_BLOCKING=1 --runs 3
step 05-try-no-gpu $P try gpu no-gpu --env CUDA_VISIBLE_DEVICES=99 --runs 3 --json
step 06-try-recipe $P try gpu --recipe cuda-graph-max-bs --json
step 07-list-recipes $P try --list-recipes gpu
step 08-trials $P trials gpu
step 09-trials-json $P trials --json
step 10-trials-markdown $P trials --markdown
step 11-drift $P check gpu --only drift
echo; cat "$E/steps.txt"; echo
head -c 1500 "$E/03-try-no-caching.out"; echo; cat "$E/04-try-launch-blocking.out"
head -c 1500 "$E/05-try-no-gpu.out"; echo; head -c 600 "$E/06-try-recipe.out"; echo
cat "$E/07-list-recipes.out" "$E/08-trials.out" "$E/10-trials-markdown.out" "$E/11-drift.out"
tail -n 5 "$E/03-try-no-caching.err"
