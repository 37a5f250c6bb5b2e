"""All-reduce like nccl-tests' all_reduce_perf, in the environment under test: one process per GPU, sizes swept
(-b 8 -e 128M -f 2), eager and CUDA-graph captured, time per op, algbw and busbw = algbw * 2(n-1)/n, every size
checked for correctness. Then the EAGLE-3 verify pattern: 122 all-reduces of 42 KB against 2 of 2.5 MB (the same
bytes, coalesced), each captured in one CUDA graph, in milliseconds per forward pass. Prints one JSON line.

NCCL variables (NCCL_ALGO, NCCL_PROTO) come from the environment this runs in; NVLS is never enabled."""

from __future__ import annotations

import statistics
import time

from _common import arguments, crash_reason, emit, init_group, launch, write_rank

FLOAT = 4


def timed_ms(fn, repeats: int, use_cuda: bool) -> float:  # type: ignore[no-untyped-def]
    """The median over `repeats` of one call of fn, in milliseconds (CUDA events on a GPU)."""
    import torch

    samples = []
    for _ in range(repeats):
        if use_cuda:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
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


def rank_main(rank: int, world: int, port: int, out_dir: str, config: dict[str, object]) -> None:
    result: dict[str, object] = {"rank": rank, "ok": False}
    try:
        import torch

        backend = str(config.get("backend", "nccl"))
        dist = init_group(rank, world, port, backend)
        use_cuda = backend == "nccl"
        device = f"cuda:{rank}" if use_cuda else "cpu"
        iterations, repeats = int(config.get("iters", 20)), int(config.get("repeats", 5))
        factor = 2 * (world - 1) / world
        expected = world * (world + 1) / 2
        rows = []
        for size in sweep_sizes(config):
            count = max(1, size // FLOAT)
            buffer = torch.full((count,), float(rank + 1), dtype=torch.float32, device=device)
            dist.all_reduce(buffer)  # the correctness pass, also a warm-up
            wrong = int((buffer != expected).sum().item())

            def eager(buffer=buffer) -> None:  # type: ignore[no-untyped-def]
                for _ in range(iterations):
                    dist.all_reduce(buffer)

            eager()
            row = {"size": count * FLOAT, "count": count, "wrong": wrong,
                   "eager_us": timed_ms(eager, repeats, use_cuda) * 1e3 / iterations}
            if use_cuda:
                graph = capture(lambda b=buffer: dist.all_reduce(b), iterations)
                graph.replay()
                row["graph_us"] = timed_ms(graph.replay, repeats, True) * 1e3 / iterations
            for kind in ("eager", "graph"):
                if f"{kind}_us" in row:
                    algbw = row["size"] / (row[f"{kind}_us"] * 1e-6) / 1e9
                    row[f"{kind}_algbw"], row[f"{kind}_busbw"] = algbw, algbw * factor
            rows.append(row)
        result["rows"] = rows
        if use_cuda:
            result["pattern"] = pattern(dist, device, repeats)
        dist.destroy_process_group()
        result["ok"] = not any(r["wrong"] for r in rows)
    except BaseException as exc:
        result["error"] = crash_reason(exc)
    write_rank(out_dir, rank, result)


def pattern(dist, device: str, repeats: int) -> dict[str, float]:  # type: ignore[no-untyped-def]
    """122 all-reduces of 42 KB against 2 of 2.5 MB, each one forward pass captured in a CUDA graph."""
    import torch

    small = [torch.ones(42 * 1024 // FLOAT, device=device) for _ in range(122)]
    large = [torch.ones(int(2.5 * 2**20) // FLOAT, device=device) for _ in range(2)]
    out = {}
    for name, buffers in (("122x42KB_ms", small), ("2x2.5MB_ms", large)):
        graph = capture(lambda b=buffers: [dist.all_reduce(t) for t in b], 1)
        graph.replay()
        out[name] = timed_ms(graph.replay, repeats * 4, True)
    return out


def main() -> None:
    args = arguments()
    world = int(args.get("gpu_count") or 1)
    config = {k: args[k] for k in ("backend", "min_bytes", "max_bytes", "factor", "iters", "repeats") if k in args}
    results = launch(rank_main, world, config, float(args.get("rank_timeout", 600)))
    failed = [r for r in results if not r.get("ok")]
    if failed:
        first = failed[0]
        emit("fail", f"rank {first['rank']}: {first.get('error') or 'wrong results'}", ranks=results)
    emit("pass", f"{world} rank(s), {len(results[0]['rows'])} sizes", world_size=world, rows=results[0]["rows"],
         pattern=results[0].get("pattern"))


if __name__ == "__main__":
    try:
        main()
    except SystemExit:
        raise
    except BaseException as exc:
        emit("error", crash_reason(exc))
