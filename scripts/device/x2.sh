#!/usr/bin/env bash
# The 2-GPU machine (nvidia-h200-x2): NVML recorded and the pair named as nvidia-smi does, the checks at world size 2,
# and `bench allreduce` beside NVIDIA's nccl-tests built here against the same NCCL, in one call.
# Needs .carry/nccl-tests-2.19.6.tar.gz (NVIDIA's source, from the anchors) and .whl (see scripts/device/common.sh).
EVIDENCE=${EVIDENCE:-h200-x2}
. scripts/device/common.sh
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
install_flashinfer >/dev/null 2>&1
step 00-nvidia-smi-topo nvidia-smi topo -m
step 01-nvidia-smi-topo-p2p nvidia-smi topo -p2p n
step 02-probe $P probe
step 03-probe-json $P probe --json --record-nvml "$E/h200-x2.nvml.json"
step 04-probe-replayed env PROVISION_NVML_REPLAY="$E/h200-x2.nvml.json" $P probe --json
# nccl-tests against the NCCL of the environment under test (how-measured.md of the 2-GPU readings)
NCCLD=$(dirname "$(dirname "$(find $VENV -name 'libnccl.so.2' | head -1)")")
mkdir -p /tmp/nccl/lib; ln -sf $NCCLD/lib/libnccl.so.2 /tmp/nccl/lib/libnccl.so; ln -sfn $NCCLD/include /tmp/nccl/include
step 10-build-nccl-tests bash -c "cd /tmp && tar xzf $PWD/.carry/nccl-tests-2.19.6.tar.gz && cd nccl-tests && make -j32 MPI=0 NCCL_HOME=/tmp/nccl NVCC_GENCODE='-gencode=arch=compute_90,code=sm_90'"
NT=/tmp/nccl-tests/build
step 11-adopt $P adopt h200 $VENV --profile scripts/device/h200-image.toml
step 12-check $P check h200
step 20-bench-json $P bench allreduce h200 --nccl-tests $NT --json
step 21-bench $P bench allreduce h200 --nccl-tests $NT
step 22-pytest-gpu python3 -m pytest -q -p no:cacheprovider tests/check/test_gpu.py
step 23-bench-mixing-off env NCCL_GRAPH_MIXING_SUPPORT=0 $P bench allreduce h200 --nccl-tests $NT -b 32K -e 64K
step 24-bench-ring-tree $P bench allreduce h200 --nccl-tests $NT -e 64K --nccl-algo allreduce:ring --nccl-algo allreduce:tree
step 25-nvls-refused $P bench allreduce h200 --nccl-algo NVLS
step 30-envs $P envs --json
step 42-torch-nccl-variables bash -c "strings $SITE/torch/lib/libtorch_cuda.so | grep -o 'TORCH_NCCL_[A-Z_]*' | sort -u"
step 50-bench-probe python3 scripts/bench_probe.py --runs 11 --slow-runs 1 --json "$E/bench-probe.json"
step 51-probe-importtime python3 -X importtime -m provision probe --json
step 52-probe-cprofile python3 -m cProfile -s cumtime -m provision probe --json
DRIFT=scripts/bench_drift.py; [ -f $DRIFT ] || DRIFT=.carry/bench_drift.py
[ -f $DRIFT ] && step 60-bench-drift python3 $DRIFT $VENV --runs 5 --json "$E/bench-drift.json"
echo; cat "$E/steps.txt"; echo
tail -11 "$E/12-check.out"; cat "$E/21-bench.out" "$E/23-bench-mixing-off.out" "$E/50-bench-probe.out" "$E/60-bench-drift.out"
for f in "$E"/*.err; do [ -s "$f" ] && { echo "== $f"; tail -3 "$f"; }; done
