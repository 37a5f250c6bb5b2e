#!/usr/bin/env bash
# Second GPU call: all-reduce on NCCL (world size 1 on one GPU), the nccl-allreduce check, a scan of the whole venv
# against cuobjdump on its largest libraries, and where the whole-process time of probe and rollback goes.
EVIDENCE=evidence2
. scripts/device/common.sh
install_flashinfer >/dev/null 2>&1
step 01-adopt $P adopt h200 $VENV --profile scripts/device/h200-image.toml
step 02-check-nccl-allreduce $P check h200 --only nccl-allreduce,symmetric-memory
step 03-bench-allreduce $P bench allreduce h200
step 04-bench-allreduce-json $P bench allreduce h200 -e 64M --nccl-algo allreduce:ring --nccl-algo allreduce:tree --json
step 05-bench-nvls-refused $P bench allreduce h200 --nccl-algo NVLS
step 06-baseline $P baseline h200
step 07-adopt-second $P adopt second $VENV --profile scripts/device/h200-image.toml
step 08-baseline-second $P baseline second
step 09-compare $P compare h200 second
step 10-envs $P envs
step 20-python-startup bash -c 'for i in 1 2 3 4 5; do /usr/bin/time -f "%e s python3 -c pass" python3 -c pass; done; for i in 1 2 3; do /usr/bin/time -f "%e s python3 -S -c pass" python3 -S -c pass; done; for i in 1 2 3; do /usr/bin/time -f "%e s python3 -I -c pass" python3 -I -c pass; done'
step 21-rollback-times bash -c "for i in 1 2 3 4 5; do /usr/bin/time -f '%e s rollback' $P rollback; done"
step 22-rollback-importtime python3 -X importtime -m provision rollback
step 23-probe-importtime python3 -X importtime -m provision probe --json
step 24-bench-probe python3 scripts/bench_probe.py --runs 9 --slow-runs 1 --json "$E/bench-probe.json"
step 30-scan-site-packages $P scan --json --require 9.0 --require 12.0 $SITE
step 31-bench-scan python3 scripts/bench_scan.py $SITE/torch/lib/libtorch_cuda.so $SITE/nvidia/cu13/lib/libcublasLt.so.13 $SITE/nvidia/cu13/lib/libcusparse.so.12 --venv $SITE --json "$E/bench-scan.json"
step 32-scan-process-libtorch bash -c "for i in 1 2 3 4 5; do /usr/bin/time -f '%e s provision scan --json libtorch_cuda.so' $P scan --json $SITE/torch/lib/libtorch_cuda.so > /dev/null; done"
echo; cat "$E/steps.txt"; echo
cat "$E/02-check-nccl-allreduce.out" | tail -8; head -40 "$E/03-bench-allreduce.out"; cat "$E/09-compare.out" "$E/20-python-startup.err" "$E/21-rollback-times.err" "$E/24-bench-probe.out" "$E/31-bench-scan.out" "$E/32-scan-process-libtorch.err"
