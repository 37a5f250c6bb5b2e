#!/usr/bin/env bash
# Prove every GPU path of provision on the lent GPU machine in one call; evidence goes to $OUT/evidence.tgz.
# Run from the repository root there, with .whl (carried wheels) and .carry/stale (make_stale_module.sh) carried.
EVIDENCE=evidence
. scripts/device/common.sh
step 00-nvidia-smi-q nvidia-smi -q
step 01-nvidia-smi-topo nvidia-smi topo -m
step 02-nvidia-smi-p2p nvidia-smi topo -p2p r
step 03-nvidia-smi-query nvidia-smi --query-gpu=index,name,uuid,pci.bus_id,compute_cap,driver_version,memory.total,pcie.link.gen.current,pcie.link.gen.max,pcie.link.width.current,pcie.link.width.max,persistence_mode,mig.mode.current --format=csv
step 04-nvcc nvcc --version
step 10-probe-json $P probe --json
step 11-probe-table $P probe
step 12-bench-probe python3 scripts/bench_probe.py --runs 9 --slow-runs 3 --json "$E/bench-probe.json"
step 20-install-flashinfer install_flashinfer
step 21-adopt $P adopt h200 $VENV --profile scripts/device/h200-image.toml
step 22-check-json $P check h200 --json
step 23-check-table $P check h200
step 24-check-target-sm120 $P check h200 --only flashinfer-jit --target-sm 12.0 --json
step 25-baseline $P baseline h200 --json
step 26-envs $P envs
step 30-adopt-wrong-arch $P adopt wrong-arch $VENV --profile scripts/device/wrong-arch.toml
step 31-planted-wrong-arch $P check wrong-arch --only flashinfer-jit
WS=$(ls -d $PROVISION_HOME/builds/h200-adopted-*)/.cache/flashinfer/0.6.9/90a/cached_ops/stale_cu12
mkdir -p "$WS" && cp .carry/stale/norm.so .carry/stale/libcudart.so.12 "$WS"/
step 32-planted-stale-workspace $P check h200 --only flashinfer-jit
rm -rf "$WS"
step 33-switch-rollback bash -c "$P switch wrong-arch && $P switch h200 && time $P rollback && time $P rollback"
BUILT=$(ls $PROVISION_HOME/builds/h200-adopted-*/.cache/flashinfer/0.6.9/*/cached_ops/norm/norm.so 2>/dev/null | tr '\n' ' ')
step 40-scan-torch-venv $P scan --json --require 9.0 --require 12.0 $SITE/torch
step 41-bench-scan python3 scripts/bench_scan.py $SITE/torch/lib/libtorch_cuda.so $SITE/torch/lib/libtorch_cuda_linalg.so $BUILT --venv $SITE/torch --json "$E/bench-scan.json"
step 42-scan-sm120-jit-output $P scan --require 12.0 --require 9.0 $BUILT
step 50-report-table $P report
step 51-report-json $P report --json
step 52-report-markdown $P report --markdown
echo; cat "$E/steps.txt"; echo
tail -5 "$E/23-check-table.out"; tail -3 "$E/31-planted-wrong-arch.out"; tail -3 "$E/32-planted-stale-workspace.out"
cat "$E/12-bench-probe.out" "$E/41-bench-scan.out"
