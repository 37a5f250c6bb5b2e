import socket, sys
sys.path.insert(0, "/work/main/provision/checks/payloads")
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
