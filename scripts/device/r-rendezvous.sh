#!/usr/bin/env bash
# The ranks meet through rank 0's store on the port the kernel gives it (no port chosen ahead, which another process
# could take first): the NCCL payloads (nccl-allreduce, symmetric-memory, bench allreduce) still join their process
# group with device_id on one H100/H200, and with every port free_port would choose taken by a listener.
#   Run: bash scripts/device/r-rendezvous.sh   (wheels in .whl/: tomlkit, pyelftools, packaging, nvidia_ml_py)
EVIDENCE=r-rendezvous
. scripts/device/common.sh
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
step 01-adopt $P adopt gpu $VENV --no-lock
step 02-check $P check gpu --only driver,torch-cuda,symmetric-memory,nccl-allreduce --json
step 03-bench-json $P bench allreduce gpu -e 1M --json
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
step 04-ranks-2-gloo $VENV/bin/python "$E/ranks.py"
echo; cat "$E/steps.txt"; echo
head -c 2500 "$E/02-check.out"; echo; head -c 1200 "$E/03-bench-json.out"; echo; tail -c 600 "$E/04-ranks-2-gloo.out"
