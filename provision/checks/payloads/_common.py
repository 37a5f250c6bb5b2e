"""Shared by the payloads (run by the environment's Python: stdlib and the environment's own packages only)."""

from __future__ import annotations

import json
import sys
import traceback
from typing import Any


def arguments() -> dict[str, Any]:
    return json.loads(sys.argv[1]) if len(sys.argv) > 1 else {}


def emit(status: str, reason: str, **details: Any) -> None:
    """Print the verdict as the last line of stdout and exit 0: the runner reads that line."""
    sys.stdout.flush()
    print(json.dumps({"status": status, "reason": reason, "details": details}, default=str), flush=True)
    sys.exit(0)


def crash_reason(exc: BaseException) -> str:
    last = traceback.format_exception_only(type(exc), exc)[-1].strip()
    return last[:500]


def relative_error(out: Any, ref: Any) -> float:
    import torch

    out64, ref64 = out.double().cpu(), ref.double().cpu()
    if not torch.isfinite(out64).all():
        return float("inf")
    return float((out64 - ref64).norm() / ref64.norm().clamp_min(1e-30))


def covers(arch_list: list[str], major: int, minor: int) -> tuple[str, list[str]]:
    """('native', labels) when a cubin runs on major.minor (torch's own rule), ('ptx', labels) when only PTX does."""
    native, ptx = [], []
    for label in arch_list:
        kind, _, number = label.partition("_")
        digits = "".join(c for c in number if c.isdigit())
        if not digits:
            continue
        a_major, a_minor = int(digits[:-1]), int(digits[-1])
        exact_only = number.endswith("a")
        if kind == "sm" and a_major == major and (a_minor == minor if exact_only else a_minor <= minor):
            native.append(label)
        elif kind == "compute" and (a_major, a_minor) <= (major, minor):
            ptx.append(label)
    return ("native", native) if native else ("ptx", ptx) if ptx else ("none", [])


HANG_HINT = ("check peer-to-peer access between the GPUs (nvidia-smi topo -p2p r), PCIe ACS and the IOMMU "
             "(NVIDIA/nccl#606, #2079; nccl-tests#117); NCCL_P2P_DISABLE=1 tells whether P2P is the cause")


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def launch(target: Any, world: int, config: dict[str, Any], timeout: float) -> list[dict[str, Any]]:
    """Run target(rank, world, port, out_dir, config) in one process per rank (in this process for one rank);
    kill every rank still running after `timeout` seconds. Returns each rank's result (its JSON file)."""
    import os
    import tempfile
    import time

    out_dir = tempfile.mkdtemp(prefix="provision-ranks-")
    port = free_port()
    if world == 1:
        target(0, 1, port, out_dir, config)
    else:
        import multiprocessing

        context = multiprocessing.get_context("spawn")
        processes = [context.Process(target=target, args=(rank, world, port, out_dir, config)) for rank in range(world)]
        for process in processes:
            process.start()
        deadline = time.monotonic() + timeout
        for process in processes:
            process.join(max(0.0, deadline - time.monotonic()))
        stragglers = [rank for rank, p in enumerate(processes) if p.is_alive()]
        for process in processes:
            if process.is_alive():
                process.kill()
                process.join(5)
        if stragglers:
            emit("fail", f"ranks {stragglers} hung for {timeout:g} s and were killed: {HANG_HINT}")
    results = []
    for rank in range(world):
        try:
            with open(os.path.join(out_dir, f"rank{rank}.json")) as handle:
                results.append(json.load(handle))
        except OSError:
            results.append({"rank": rank, "ok": False, "error": "no result: the rank died"})
    return results


def write_rank(out_dir: str, rank: int, result: dict[str, Any]) -> None:
    import os

    with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as handle:
        json.dump(result, handle, default=str)


def init_group(rank: int, world: int, port: int, backend: str) -> Any:
    """Set the device (NCCL) and join the process group over TCP on the loopback."""
    import torch
    import torch.distributed as dist

    kwargs: dict[str, Any] = {}
    if backend == "nccl":
        torch.cuda.set_device(rank)
        kwargs["device_id"] = torch.device("cuda", rank)
    dist.init_process_group(backend, init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world, **kwargs)
    return dist
