"""Why torch's all-reduce in a CUDA graph costs more than nccl-tests': node counts of the captured graph, the time
with a short and a long spin before the start event (launch latency hidden or not), the CPU time of one replay, and
where the teardown hangs. Two ranks, spawned; NCCL_NVLS_ENABLE=0. Prints one JSON line per rank."""

import json
import os
import sys
import time

os.environ.update(NCCL_NVLS_ENABLE="0", TORCH_SYMM_MEM_DISABLE_MULTICAST="1", NVSHMEM_DISABLE_NVLS="1")


def timed(fn, spin, repeats=10):
    import torch
    out = []
    for _ in range(repeats):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        if spin:
            torch.cuda._sleep(spin)
        s.record(); fn(); e.record(); e.synchronize()
        out.append(s.elapsed_time(e))
    out.sort()
    return out[len(out) // 2]


def rank_main(rank, world, port, mode):
    try:
        measure(rank, world, port, mode)
    except BaseException as exc:
        print(json.dumps({"rank": rank, "error": repr(exc)[:300]}), flush=True)
        os._exit(1)


def measure(rank, world, port, mode):
    import torch
    import torch.distributed as dist
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world,
                            device_id=torch.device("cuda", rank))
    res = {"rank": rank, "mode": mode, "torch": torch.__version__}
    buf = torch.ones(8192, device="cuda")
    for n in (20, 122):
        bufs = [torch.ones(10752, device="cuda") for _ in range(n)]
        s = torch.cuda.Stream(); s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for b in bufs:
                dist.all_reduce(b)
        torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g, stream=s):
            for b in bufs:
                dist.all_reduce(b)
        g.replay(); torch.cuda.synchronize()
        c0 = time.perf_counter(); g.replay(); c1 = time.perf_counter(); torch.cuda.synchronize()
        res[f"{n}_replay_cpu_us"] = (c1 - c0) * 1e6
        for spin in (0, 4_000_000, 40_000_000):
            res[f"{n}_spin{spin}_per_op_us"] = timed(g.replay, spin) * 1e3 / n
        def five():
            for _ in range(5):
                g.replay()
        res[f"{n}_x5_spin40M_per_op_us"] = timed(five, 40_000_000) * 1e3 / (5 * n)
        del g
    torch.cuda.synchronize()
    t = time.perf_counter()
    if mode == "abort" and hasattr(dist.distributed_c10d, "_abort_process_group"):
        dist.distributed_c10d._abort_process_group()
        res["teardown"] = "abort"
    else:
        dist.destroy_process_group()
        res["teardown"] = "destroy"
    res["teardown_s"] = time.perf_counter() - t
    print(json.dumps(res), flush=True)
    os._exit(0)


if __name__ == "__main__":
    import multiprocessing as mp
    import socket
    mode = sys.argv[1] if len(sys.argv) > 1 else "destroy"
    with socket.socket() as so:
        so.bind(("127.0.0.1", 0)); port = so.getsockname()[1]
    ctx = mp.get_context("spawn")
    ps = [ctx.Process(target=rank_main, args=(r, 2, port, mode)) for r in range(2)]
    for p in ps: p.start()
    deadline = time.monotonic() + 60
    for p in ps: p.join(max(0.0, deadline - time.monotonic()))
    for p in ps:
        if p.is_alive():
            print(json.dumps({"killed": p.pid, "mode": mode}), flush=True); p.kill()
