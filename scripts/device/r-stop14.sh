#!/usr/bin/env bash
# The fourteenth stop's GPU paths on a real GPU: the ranks of the NCCL payloads meet through rank 0's store on the port
# the kernel gives it (nccl-allreduce, symmetric-memory, bench allreduce; 2 gloo ranks with a taken port beside them);
# probe where os.fork fails on a machine whose driver answers (a driver not asked, never "no driver"); probe, adopt,
# check and report on the real driver with this stop's code.
#   Run: bash scripts/device/r-stop14.sh   (about 3 minutes; wheels in .whl/: common.sh's)
EVIDENCE=r-stop14
. scripts/device/common.sh
export XDG_CACHE_HOME=/tmp/stop14-cache NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
rm -rf "$XDG_CACHE_HOME" "$PROVISION_HOME"
step 00-nvidia-smi nvidia-smi --query-gpu=name,driver_version,compute_cap --format=csv
step 01-probe-json $P probe --json
step 02-probe-fork-refused python3 -c "
import errno, os, runpy, sys
def refused():
    raise OSError(errno.EAGAIN, os.strerror(errno.EAGAIN))
os.fork = refused
sys.argv = ['provision', 'probe', '--json']
runpy.run_module('provision', run_name='__main__', alter_sys=True)"
step 03-adopt $P adopt gpu $VENV --no-lock
step 04-check $P check gpu --only driver,torch-cuda,symmetric-memory,nccl-allreduce --json
step 05-bench-json $P bench allreduce gpu -e 1M --json
cat > "$E/ranks.py" <<PY
import socket, sys
sys.path.insert(0, "$PWD/provision/checks/payloads")
import _common
from _common import emit, init_group, launch, write_rank
taken = socket.socket(); taken.bind(("127.0.0.1", 0)); taken.listen()
_common.free_port = lambda: taken.getsockname()[1]
def target(rank, world, out_dir, config):
    import torch
    dist = init_group(rank, world, out_dir, "gloo")
    value = torch.tensor([float(rank + 1)]); dist.all_reduce(value); dist.destroy_process_group()
    write_rank(out_dir, rank, {"rank": rank, "sum": value.item()})
if __name__ == "__main__":
    emit("pass", "met", ranks=launch(target, 2, {"start_bound_s": 60}, 240.0))
PY
step 06-ranks-2-gloo $VENV/bin/python "$E/ranks.py"
step 07-report $P report --json
step 08-exit-codes bash -c "$P check nope; echo rc=\$?; $P probe --json > /dev/null; echo rc=\$?"
echo; cat "$E/steps.txt"; echo
drivers 01-probe-json 02-probe-fork-refused
head -c 2500 "$E/04-check.out"; echo; head -c 1200 "$E/05-bench-json.out"; echo; tail -c 600 "$E/06-ranks-2-gloo.out"
