"""Torch symmetric memory across every GPU: one process per GPU, NCCL group, empty + rendezvous, every rank writes its
buffer and reads every peer's, then one_shot_all_reduce where torch has it. Multicast is reported from the handle only;
nothing here creates a multicast object (TORCH_SYMM_MEM_DISABLE_MULTICAST is kept as the caller set it)."""

from __future__ import annotations

import os
import sys

from _common import arguments, crash_reason, emit, init_group, launch, write_rank

ELEMENTS = 4096


def rank_main(rank: int, world: int, out_dir: str, config: dict[str, object]) -> None:
    result: dict[str, object] = {"rank": rank}
    try:
        import torch
        import torch.distributed._symmetric_memory as symm_mem

        dist = init_group(rank, world, out_dir, "nccl")
        group = dist.group.WORLD
        if hasattr(symm_mem, "enable_symm_mem_for_group"):
            symm_mem.enable_symm_mem_for_group(group.group_name)  # needed before torch 2.11
        buffer = symm_mem.empty(ELEMENTS, dtype=torch.float32, device=f"cuda:{rank}")
        handle = symm_mem.rendezvous(buffer, group.group_name)
        buffer.fill_(float(rank + 1))
        torch.cuda.synchronize()
        handle.barrier()
        wrong = []
        for peer in range(world):
            seen = handle.get_buffer(peer, (ELEMENTS,), torch.float32)
            if not torch.all(seen == float(peer + 1)).item():
                wrong.append(peer)
        handle.barrier()
        result["peer_reads_wrong"] = wrong
        result["multicast"] = int(getattr(handle, "multicast_ptr", 0) or 0) != 0
        one_shot = getattr(torch.ops.symm_mem, "one_shot_all_reduce", None)
        if one_shot is not None:
            reduced = one_shot(buffer, "sum", group.group_name)
            torch.cuda.synchronize()
            expected = world * (world + 1) / 2
            result["one_shot"] = bool(torch.all(reduced == expected).item())
        else:
            result["one_shot"] = None
        dist.destroy_process_group()
        result["ok"] = not wrong and result["one_shot"] is not False
    except BaseException as exc:
        result["ok"] = False
        result["error"] = crash_reason(exc)
    write_rank(out_dir, rank, result)


def explain(error: str) -> str:
    if "KeyError" in error:
        return f"an arch table has no entry for this SM ({error})"
    if "invalid device ordinal" in error or "peer" in error.lower():
        return f"no peer access between the GPUs (PCIe P2P disabled? ACS/IOMMU): {error}"
    if "multicast" in error.lower():
        return f"multicast is not available on this fabric: {error}"
    return error


def main() -> None:
    args = arguments()
    world = int(args.get("gpu_count") or 1)
    results = launch(rank_main, world, {}, float(args.get("rank_timeout", 240)))
    failed = [r for r in results if not r.get("ok")]
    multicast = any(r.get("multicast") for r in results)
    details = {
        "world_size": world,
        "ranks": results,
        "multicast": multicast,
        "multicast_disabled_by_env": os.environ.get("TORCH_SYMM_MEM_DISABLE_MULTICAST"),
    }
    if failed:
        first = failed[0]
        reason = explain(
            str(first.get("error") or f"peer reads wrong from ranks {first.get('peer_reads_wrong')}")
        )
        emit("fail", f"rank {first['rank']}: {reason}", **details)
    one_shot = results[0].get("one_shot")
    emit(
        "pass",
        f"world size {world}: rendezvous and peer reads on every rank; one_shot_all_reduce "
        + ("correct" if one_shot else "not in this torch")
        + f"; multicast {'available' if multicast else 'not available'}",
        **details,
    )


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    main()
