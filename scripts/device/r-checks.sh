#!/usr/bin/env bash
# Issue 23, typed results (one H200): real payload answers read into CheckResult / VariantRun records and shown from
# them; env.json written from the records reads back and is rewritten key for key; exit codes come from the Shown.
#   Run: bash scripts/device/r-checks.sh   (nccl-tests beside the bench when .carry/nccl-tests-2.19.6.tar.gz is there)
EVIDENCE=r-checks
. scripts/device/common.sh
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
step 00-install-flashinfer install_flashinfer
step 01-adopt $P adopt h200 $VENV --no-lock
step 02-check-json $P check h200 --json  # a full run: what baseline needs before it runs
step 03-check-table $P check h200 --only driver,torch-cuda,cuda-libs,symmetric-memory,nccl-allreduce
NT=""
if [ -f .carry/nccl-tests-2.19.6.tar.gz ]; then
  NCCLD=$(dirname "$(dirname "$(find $VENV -name 'libnccl.so.2' | head -1)")")
  mkdir -p /tmp/nccl/lib; ln -sf $NCCLD/lib/libnccl.so.2 /tmp/nccl/lib/libnccl.so; ln -sfn $NCCLD/include /tmp/nccl/include
  step 05-build-nccl-tests bash -c "cd /tmp && tar xzf $PWD/.carry/nccl-tests-2.19.6.tar.gz && cd nccl-tests && make -j16 MPI=0 NCCL_HOME=/tmp/nccl NVCC_GENCODE='-gencode=arch=compute_90,code=sm_90'"
  NT="--nccl-tests /tmp/nccl-tests/build"
fi
step 06-bench-json $P bench allreduce h200 -e 4M $NT --json
step 07-bench-table $P bench allreduce h200 -e 1M --nccl-algo allreduce:ring --nccl-algo allreduce:tree $NT
step 08-baseline $P baseline h200 --runs 2 --json
step 09-compare $P compare h200 h200 --json
step 10-compare-table $P compare h200 h200
# every stored run typed and written back key for key: read env.json, write it through the records, compare
step 11-roundtrip python3 -c "
import json, pathlib
from provision.envs import home, records
build = home.Home(home.resolve(None)).build_of('h200')
before = json.loads((build / 'env.json').read_text())
record = records.read(build)
after = record.to_dict()
print('checks', [(r.id, r.status) for r in record.check_results], 'baselines', len(record.baselines),
      'allreduce runs', [len(a.runs) for a in record.allreduce], 'rows', [len(v.rows) for a in record.allreduce for v in a.runs])
print('identical' if after == before else 'DIFFERENT')
raise SystemExit(0 if after == before else 1)"
echo; cat "$E/steps.txt"; echo; tail -n 20 "$E/03-check-table.out" "$E/07-bench-table.out" "$E/10-compare-table.out" "$E/11-roundtrip.out" "$E/11-roundtrip.err"
