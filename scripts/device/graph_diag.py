"""Why torch's all-reduce in a CUDA graph costs more than nccl-tests': for graphs of 20 and 122 all-reduces of 42 KB,
the CPU time of one replay (its launch) and the GPU time per op with no spin, a 2 ms and a 20 ms spin before the start
event (launch latency timed or hidden), and five replays back to back; then how long the teardown takes (`destroy` or
`abort`). Two ranks, spawned; multicast off. Prints one JSON line per rank.

    python scripts/device/graph_diag.py destroy|abort
"""

from __future__ import annotations

import json
import os
import socket
import statistics
import sys
import time
from typing import Any

os.environ.update(NCCL_NVLS_ENABLE="0", TORCH_SYMM_MEM_DISABLE_MULTICAST="1", NVSHMEM_DISABLE_NVLS="1")
SPINS = (0, 4_000_000, 40_000_000)


def timed_ms(fn: Any, spin: int, repeats: int = 10) -> float:
    import torch

    samples = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        if spin:
            torch.cuda._sleep(spin)
        start.record()
        fn()
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end))
    return statistics.median(samples)


def measure(rank: int, world: int, port: int, mode: str) -> dict[str, Any]:
    import torch
    import torch.distributed as dist

    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world,
                            device_id=torch.device("cuda", rank))
    result: dict[str, Any] = {"rank": rank, "mode": mode, "torch": torch.__version__}
    for ops in (20, 122):
        buffers = [torch.ones(10752, device="cuda") for _ in range(ops)]
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for buffer in buffers:
                dist.all_reduce(buffer)
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, stream=side):
            for buffer in buffers:
                dist.all_reduce(buffer)
        graph.replay()
        torch.cuda.synchronize()
        begin = time.perf_counter()
        graph.replay()
        result[f"{ops}_replay_cpu_us"] = (time.perf_counter() - begin) * 1e6
        torch.cuda.synchronize()
        for spin in SPINS:
            result[f"{ops}_spin{spin}_per_op_us"] = timed_ms(graph.replay, spin) * 1e3 / ops

        def five(graph: Any = graph) -> None:
            for _ in range(5):
                graph.replay()

        result[f"{ops}_x5_spin{SPINS[-1]}_per_op_us"] = timed_ms(five, SPINS[-1]) * 1e3 / (5 * ops)
        del graph
    torch.cuda.synchronize()
    begin = time.perf_counter()
    abort = getattr(dist.distributed_c10d, "_abort_process_group", None)
    if mode == "abort" and abort is not None:
        abort()
        result["teardown"] = "abort"
    else:
        dist.destroy_process_group()
        result["teardown"] = "destroy"
    result["teardown_s"] = time.perf_counter() - begin
    return result


def rank_main(rank: int, world: int, port: int, mode: str) -> None:
    try:
        print(json.dumps(measure(rank, world, port, mode)), flush=True)
    except BaseException as exc:
        print(json.dumps({"rank": rank, "error": repr(exc)[:300]}), flush=True)
    os._exit(0)


def main() -> None:
    import multiprocessing

    mode = sys.argv[1] if len(sys.argv) > 1 else "destroy"
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    context = multiprocessing.get_context("spawn")
    processes = [context.Process(target=rank_main, args=(rank, 2, port, mode)) for rank in range(2)]
    for process in processes:
        process.start()
    deadline = time.monotonic() + 60
    for process in processes:
        process.join(max(0.0, deadline - time.monotonic()))
    for process in processes:
        if process.is_alive():
            print(json.dumps({"killed": process.pid, "mode": mode}), flush=True)
            process.kill()


if __name__ == "__main__":
    main()
