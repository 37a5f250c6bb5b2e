export EVIDENCE=h200-x2-2026-11-30-d
. scripts/device/common.sh
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
install_flashinfer >/dev/null 2>&1
step 01-bench-drift timeout 80 python3 scripts/bench_drift.py $VENV --runs 3 --drop-caches --json "$E/bench-drift.json"
step 10-report timeout 20 $P report
step 11-report-json timeout 20 $P report --json
step 12-adopt timeout 30 $P adopt h200 $VENV --profile scripts/device/arch-list.toml
step 13-shell-env $P shell-env h200
step 14-check timeout 120 $P check h200 --json
step 15-check-only timeout 40 $P check h200 --only symmetric-memory --json
step 16-report-env timeout 30 $P report --env h200 --json
step 17-report-env-table timeout 30 $P report --env h200 --profile cu130-stable
LARGEST=$(find $SITE -name '*.so*' -type f -printf '%s %p\n' | sort -rn | head -5 | cut -d' ' -f2)
step 20-scan-whole-process bash -c "for f in $(echo $LARGEST); do ls -l \$f; for i in 1 2 3; do /usr/bin/time -f '%e s wall %U user %S sys' $P scan --json \$f > /dev/null; done; done"
cat "$E/steps.txt"; cat "$E/01-bench-drift.out"; tail -25 "$E/17-report-env-table.out"; cat "$E/20-scan-whole-process.err" | tail -22
