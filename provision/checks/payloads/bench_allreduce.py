"""All-reduce like nccl-tests' all_reduce_perf, in the environment under test: one process per GPU, sizes swept
(-b 8 -e 128M -f 2), eager and CUDA-graph captured, time per op, algbw and busbw = algbw * 2(n-1)/n, every size
checked for correctness. Then the EAGLE-3 verify pattern: 122 all-reduces of 42 KB against 2 of 2.5 MB (the same
bytes, coalesced), each captured in one CUDA graph, in milliseconds per forward pass. Prints one JSON line.

How it is timed, and why:
- eager: `iters` calls of dist.all_reduce between two CUDA events, as nccl-tests times ncclAllReduce. What torch adds
  on the CPU per call shows here, on purpose: it is what a framework's eager path costs.
- graph: the GPU is first held busy by a spin kernel longer than the graph's launch takes on the CPU (measured, then
  doubled), so that the launch is queued before the start event runs; the time is then the GPU's alone, as
  nccl-tests' -G amortizes its launches over many. What the launch costs the CPU is reported beside it
  (`launch_cpu_ms`): a serving loop that waits for each step pays it.
Each rank writes its result before any teardown, frees its graphs before the process group, and reports progress per
size with a bound derived from the size, so that the launcher tells a hang from slow work (_common.launch).

NCCL variables (NCCL_ALGO, NCCL_PROTO) come from the environment this runs in; NVLS is never enabled."""

from __future__ import annotations

import gc
import os
import statistics
import sys
import time

from _common import arguments, crash_reason, emit, init_group, launch, progress, write_rank
from _hangs import step_bound_s

FLOAT = 4
SPIN_MS = 2.0  # the least the GPU is held busy before a timed graph replay
SMALL, LARGE = (122, 42 * 1024), (2, int(2.5 * 2**20))  # the EAGLE-3 verify pass: 122 x 42 KB or 2 x 2.5 MB


def cycles_per_ms() -> float:
    """The GPU's clock as torch.cuda._sleep counts it, measured (no property reports it on every torch)."""
    import torch

    torch.cuda._sleep(1_000_000)  # warm-up
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    torch.cuda._sleep(10_000_000)
    end.record()
    end.synchronize()
    return 10_000_000 / max(start.elapsed_time(end), 1e-3)


def launch_cpu_ms(fn, repeats: int = 5) -> float:  # type: ignore[no-untyped-def]
    """The median CPU time of one call of fn (a graph replay: its launch), waiting for the GPU after each."""
    import torch

    samples = []
    for _ in range(repeats):
        begin = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - begin) * 1e3)
        torch.cuda.synchronize()
    return statistics.median(samples)


def timed_ms(fn, repeats: int, use_cuda: bool, spin_cycles: int = 0) -> float:  # type: ignore[no-untyped-def]
    """The median over `repeats` of one call of fn, in milliseconds (CUDA events on a GPU)."""
    import torch

    samples = []
    for _ in range(repeats):
        if use_cuda:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            if spin_cycles:
                torch.cuda._sleep(spin_cycles)
            start.record()
            fn()
            end.record()
            end.synchronize()
            samples.append(start.elapsed_time(end))
        else:
            begin = time.perf_counter()
            fn()
            samples.append((time.perf_counter() - begin) * 1e3)
    return statistics.median(samples)


def sweep_sizes(config: dict[str, object]) -> list[int]:
    sizes, size = [], int(config.get("min_bytes", 8))
    while size <= int(config.get("max_bytes", 128 * 2**20)):
        sizes.append(size)
        size *= int(config.get("factor", 2))
    return sizes


def capture(ops, iterations: int):  # type: ignore[no-untyped-def]
    """A CUDA graph of `iterations` rounds of ops(), captured on a side stream after a warm-up."""
    import torch

    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        ops()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=stream):
        for _ in range(iterations):
            ops()
    return graph


def rank_main(rank: int, world: int, out_dir: str, config: dict[str, object]) -> None:
    result: dict[str, object] = {"rank": rank, "ok": False}
    graphs: list[object] = []
    dist = None
    try:
        import torch

        backend = str(config.get("backend", "nccl"))
        dist = init_group(rank, world, out_dir, backend)
        use_cuda = backend == "nccl"
        device = f"cuda:{rank}" if use_cuda else "cpu"
        iterations, repeats = int(config.get("iters", 20)), int(config.get("repeats", 5))
        factor = 2 * (world - 1) / world
        clock = cycles_per_ms() if use_cuda else 0.0
        expected = world * (world + 1) / 2
        rows = []
        for size in sweep_sizes(config):
            progress(
                out_dir, rank, f"size {size} B", step_bound_s(size, (iterations + 1) * (2 * repeats + 2) + 1)
            )
            count = max(1, size // FLOAT)
            buffer = torch.full((count,), float(rank + 1), dtype=torch.float32, device=device)
            dist.all_reduce(buffer)  # the correctness pass, also a warm-up
            wrong = int((buffer != expected).sum().item())

            def eager(buffer=buffer) -> None:  # type: ignore[no-untyped-def]
                for _ in range(iterations):
                    dist.all_reduce(buffer)

            eager()
            row = {
                "size": count * FLOAT,
                "count": count,
                "wrong": wrong,
                "eager_us": timed_ms(eager, repeats, use_cuda) * 1e3 / iterations,
            }
            if use_cuda:
                graph = capture(lambda b=buffer: dist.all_reduce(b), iterations)
                graphs.append(graph)
                graph.replay()
                launch = launch_cpu_ms(graph.replay)
                row["graph_us"] = (
                    timed_ms(graph.replay, repeats, True, spin(launch, clock)) * 1e3 / iterations
                )
                row["graph_launch_cpu_us"] = launch * 1e3 / iterations
            for kind in ("eager", "graph"):
                if f"{kind}_us" in row:
                    algbw = row["size"] / (row[f"{kind}_us"] * 1e-6) / 1e9
                    row[f"{kind}_algbw"], row[f"{kind}_busbw"] = algbw, algbw * factor
            rows.append(row)
        result["rows"] = rows
        if use_cuda:
            progress(
                out_dir,
                rank,
                "the 122 x 42 KB / 2 x 2.5 MB pattern",
                step_bound_s(LARGE[1], 40 * repeats * 4),
            )
            result["pattern"] = pattern(dist, device, repeats, graphs, clock)
        result["ok"] = not any(r["wrong"] for r in rows)
    except BaseException as exc:
        result["error"] = crash_reason(exc)
    write_rank(out_dir, rank, result)  # kept whatever the teardown does
    teardown(rank, out_dir, dist, graphs)


def teardown(rank: int, out_dir: str, dist, graphs: list[object]) -> None:  # type: ignore[no-untyped-def]
    """Free the graphs and wait for the GPU, then end the rank's process without tearing NCCL down. On the 2 x H200
    machine both destroy_process_group and an abort of the communicators outlasted a 10 s grace once graphs had
    captured collectives, even after the graphs were freed (docs/evidence/h200-x2-2026-11-30-a and -b, step 20),
    while a process's exit releases the same resources at once. Every collective has completed and every result is
    written before this, so there is nothing left for a graceful teardown to protect."""
    begin = time.perf_counter()
    try:
        import torch

        progress(out_dir, rank, "teardown: free the CUDA graphs", 30)
        graphs.clear()
        gc.collect()
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        record = {"clean": True, "how": "exit", "seconds": round(time.perf_counter() - begin, 3)}
    except BaseException as exc:
        record = {"clean": False, "step": "free graphs", "error": crash_reason(exc)}
    write_rank(out_dir, rank, record, ".teardown")
    if dist is not None and dist.is_initialized() and _spawned():
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)


def _spawned() -> bool:
    import multiprocessing

    return multiprocessing.parent_process() is not None


def spin(launch_ms: float, clock: float) -> int:
    """Cycles to hold the GPU busy: twice the measured launch time, at least SPIN_MS."""
    return int(max(SPIN_MS, 2 * launch_ms) * clock)


def pattern(dist, device: str, repeats: int, graphs: list[object], clock: float) -> dict[str, float]:  # type: ignore[no-untyped-def]
    """122 all-reduces of 42 KB against 2 of 2.5 MB, each one forward pass captured in a CUDA graph; the 122 are
    also timed on one buffer, which tells what distinct buffers cost."""
    import torch

    (n_small, small_bytes), (n_large, large_bytes) = SMALL, LARGE
    small = [torch.ones(small_bytes // FLOAT, device=device) for _ in range(n_small)]
    one = torch.ones(small_bytes // FLOAT, device=device)
    large = [torch.ones(large_bytes // FLOAT, device=device) for _ in range(n_large)]
    out = {}
    for name, buffers in (
        ("122x42KB_ms", small),
        ("2x2.5MB_ms", large),
        ("122x42KB_one_buffer_ms", [one] * n_small),
    ):
        graph = capture(lambda b=buffers: [dist.all_reduce(t) for t in b], 1)
        graphs.append(graph)
        graph.replay()
        launch = launch_cpu_ms(graph.replay)
        out[name] = timed_ms(graph.replay, repeats * 4, True, spin(launch, clock))
        out[name.replace("_ms", "_launch_cpu_ms")] = launch
    return out


def main() -> None:
    args = arguments()
    world = int(args.get("gpu_count") or 1)
    config = {
        k: args[k]
        for k in ("backend", "min_bytes", "max_bytes", "factor", "iters", "repeats", "start_bound_s")
        if k in args
    }
    results = launch(
        rank_main, world, config, float(args.get("rank_timeout", 1800)), float(args.get("grace", 10))
    )
    failed = [r for r in results if not r.get("ok")]
    teardown = [r.get("teardown", {"clean": None}) for r in results]
    if failed:
        first = failed[0]
        emit("fail", f"rank {first['rank']}: {first.get('error') or 'wrong results'}", ranks=results)
    emit(
        "pass",
        f"{world} rank(s), {len(results[0]['rows'])} sizes",
        world_size=world,
        rows=results[0]["rows"],
        pattern=results[0].get("pattern"),
        teardown=teardown,
        nccl_nvls_enable=os.environ.get("NCCL_NVLS_ENABLE"),
    )


if __name__ == "__main__":
    try:
        main()
    except SystemExit as done:
        # the verdict is printed: leave without the interpreter's teardown, which would destroy NCCL's communicators
        # (with one rank the group lives in this process) and can hang as the ranks' teardown does
        sys.stdout.flush()
        os._exit(done.code if isinstance(done.code, int) else 0)
    except BaseException as exc:
        emit("error", crash_reason(exc))
