"""NCCL all-reduce across every GPU, checked exactly at several sizes, with the peer-access matrix that torch sees
(torch.cuda.can_device_access_peer) for comparison with the probe's NVML topology. One process per GPU."""

from __future__ import annotations

from _common import arguments, crash_reason, emit, init_group, launch, write_rank

# bytes: tiny, the EAGLE-3 verify message, coalesced, large
SIZES = (
    8,
    42 * 1024,
    int(2.5 * 2**20),
    64 * 2**20,
)


def rank_main(rank: int, world: int, out_dir: str, config: dict[str, object]) -> None:
    result: dict[str, object] = {"rank": rank, "ok": False}
    try:
        import torch

        backend = str(config.get("backend", "nccl"))
        dist = init_group(rank, world, out_dir, backend)
        device = f"cuda:{rank}" if backend == "nccl" else "cpu"
        wrong = {}
        expected = world * (world + 1) / 2
        for size in SIZES:
            count = max(1, size // 4)
            buffer = torch.full((count,), float(rank + 1), dtype=torch.float32, device=device)
            dist.all_reduce(buffer)
            bad = int((buffer != expected).sum().item())
            if bad:
                wrong[size] = bad
        if rank == 0 and backend == "nccl":
            count = torch.cuda.device_count()
            result["peer_access"] = [
                [i == j or torch.cuda.can_device_access_peer(i, j) for j in range(count)]
                for i in range(count)
            ]
        dist.destroy_process_group()
        result.update(ok=not wrong, wrong=wrong)
    except BaseException as exc:
        result["error"] = crash_reason(exc)
    write_rank(out_dir, rank, result)


def main() -> None:
    args = arguments()
    world = int(args.get("gpu_count") or 1)
    backend = args.get("backend", "nccl")
    results = launch(rank_main, world, {"backend": backend}, float(args.get("rank_timeout", 240)))
    failed = [r for r in results if not r.get("ok")]
    matrix = results[0].get("peer_access")
    details = {
        "world_size": world,
        "backend": backend,
        "peer_access": matrix,
        "sizes": list(SIZES),
        "ranks": results,
    }
    if failed:
        first = failed[0]
        reason = first.get("error") or f"wrong elements at sizes {first.get('wrong')}"
        emit("fail", f"rank {first['rank']}: {reason}", **details)
    no_peer = [(i, j) for i, row in enumerate(matrix or []) for j, ok in enumerate(row) if not ok]
    if no_peer:
        emit(
            "warn",
            f"all-reduce correct on {world} ranks, but no peer access for {no_peer[:6]}: NCCL goes through host memory",
            **details,
        )
    emit(
        "pass",
        f"all-reduce exact on {world} rank(s) at {', '.join(str(s) for s in SIZES)} bytes"
        + (f"; peer access between all {len(matrix)} GPUs" if matrix and len(matrix) > 1 else ""),
        **details,
    )


if __name__ == "__main__":
    main()
