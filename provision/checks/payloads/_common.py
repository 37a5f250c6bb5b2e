"""Shared by the payloads (run by the environment's Python: stdlib and the environment's own packages only)."""

from __future__ import annotations

import json
import os
import sys
import traceback
from typing import Any

from _hangs import HANG_HINT, START_BOUND_S

# Multicast stays off in every payload process and every rank it starts, whatever the caller's environment says:
# a program that creates multicast objects can take a shared host's GPUs out of service.
os.environ.update(NCCL_NVLS_ENABLE="0", TORCH_SYMM_MEM_DISABLE_MULTICAST="1", NVSHMEM_DISABLE_NVLS="1")


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


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def launch(
    target: Any, world: int, config: dict[str, Any], timeout: float, grace: float = 10.0
) -> list[dict[str, Any]]:
    """Run target(rank, world, out_dir, config) in one process per rank (in this process for one rank) and
    return each rank's result (its JSON file). A rank that reports progress (`progress()`) and then does not finish
    that step within the step's own bound is a hang: every rank is killed and the verdict names the step. A rank
    whose result is written but whose teardown outlasts `grace` seconds is killed and its result kept. `timeout`
    bounds the whole run."""
    import shutil
    import tempfile

    out_dir = tempfile.mkdtemp(prefix="provision-ranks-")
    try:  # the ranks' files are read here and nowhere else: the folder goes with the verdict, whichever it is
        return _run_ranks(target, world, config, timeout, grace, out_dir)
    finally:
        shutil.rmtree(out_dir, ignore_errors=True)


def _run_ranks(
    target: Any, world: int, config: dict[str, Any], timeout: float, grace: float, out_dir: str
) -> list[dict[str, Any]]:
    import time

    if world == 1:
        target(0, 1, out_dir, config)
        return [read_rank(out_dir, 0)]
    import multiprocessing

    context = multiprocessing.get_context("spawn")
    parent = os.getpid()
    processes = [
        context.Process(target=_rank_entry, args=(parent, target, rank, world, out_dir, config))
        for rank in range(world)
    ]
    for process in processes:
        process.start()
    started = time.monotonic()
    finished_at: dict[int, float] = {}
    killed_in_teardown: list[int] = []
    while any(p.is_alive() for p in processes):
        time.sleep(0.1)
        now = time.monotonic()
        for rank in range(world):
            if rank not in finished_at and os.path.exists(os.path.join(out_dir, f"rank{rank}.json")):
                finished_at[rank] = now
        for rank, process in enumerate(processes):
            if process.is_alive() and rank in finished_at and now - finished_at[rank] > grace:
                process.kill()
                killed_in_teardown.append(rank)
        stalled = _stalled(out_dir, world, finished_at, started, config)
        if stalled or now - started > timeout:
            unfinished = [rank for rank in range(world) if rank not in finished_at]
            _kill_all(processes)
            if stalled:
                rank, step, waited = stalled
                emit(
                    "fail",
                    f"rank {rank} hung at {step} ({waited:.0f} s without finishing it); every rank was killed: "
                    f"{HANG_HINT}",
                    hung_rank=rank,
                    hung_step=step,
                )
            emit("fail", f"ranks {unfinished} hung for {timeout:g} s and were killed: {HANG_HINT}")
    results = [read_rank(out_dir, rank) for rank in range(world)]
    for rank in killed_in_teardown:
        last = _last_step(out_dir, rank)
        results[rank]["teardown"] = {
            "clean": False,
            "step": last,
            "note": f"teardown outlasted {grace:g} s (at {last}); the rank was killed",
        }
    return results


def _rank_entry(parent: int, target: Any, *args: Any) -> None:
    """A rank dies with the payload that launched it (which dies with provision): a kill -9 anywhere above leaves no
    rank holding a GPU. Linux's parent-death signal, set before the rank's work; a parent already gone ends it now."""
    import contextlib
    import ctypes
    import signal

    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL))  # PR_SET_PDEATHSIG
    if os.getppid() != parent:
        os._exit(1)
    target(*args)


def progress(out_dir: str, rank: int, step: str, bound_s: float) -> None:
    """Say that this rank starts `step` and should finish it within `bound_s` seconds (the launcher's hang bound)."""
    import time

    path = os.path.join(out_dir, f"rank{rank}.progress")
    with open(path + ".tmp", "w") as handle:
        # the monotonic clock, one for every process of the host: the wall clock may be stepped (NTP, date -s) while
        # the step runs, and read as the rank waiting that much longer, or shorter
        json.dump({"step": step, "bound_s": bound_s, "at": time.monotonic()}, handle)
    os.replace(path + ".tmp", path)


def _stalled(
    out_dir: str, world: int, finished_at: dict[int, float], started: float, config: dict[str, Any]
) -> tuple[int, str, float] | None:
    import time

    for rank in range(world):
        if rank in finished_at:
            continue
        try:
            with open(os.path.join(out_dir, f"rank{rank}.progress")) as handle:
                step = json.load(handle)
        except (OSError, ValueError):
            step = None
        if step is None:
            waited = time.monotonic() - started
            if waited > float(config.get("start_bound_s", START_BOUND_S)):
                return rank, "start-up (process group and first communicator)", waited
            continue
        waited = time.monotonic() - float(step["at"])
        if waited > float(step["bound_s"]):
            return rank, str(step["step"]), waited
    return None


def _last_step(out_dir: str, rank: int) -> str:
    try:
        with open(os.path.join(out_dir, f"rank{rank}.progress")) as handle:
            return str(json.load(handle)["step"])
    except (OSError, ValueError, KeyError):
        return "unknown step"


def _kill_all(processes: list[Any]) -> None:
    for process in processes:
        if process.is_alive():
            process.kill()
    for process in processes:
        process.join(5)


def read_rank(out_dir: str, rank: int) -> dict[str, Any]:
    try:
        with open(os.path.join(out_dir, f"rank{rank}.json")) as handle:
            result: dict[str, Any] = json.load(handle)
    except (OSError, ValueError):
        return {"rank": rank, "ok": False, "error": "no result: the rank died"}
    try:
        with open(os.path.join(out_dir, f"rank{rank}.teardown.json")) as handle:
            result["teardown"] = json.load(handle)
    except (OSError, ValueError):
        pass
    return result


def write_rank(out_dir: str, rank: int, result: dict[str, Any], name: str = "") -> None:
    """Write a rank's result atomically (the launcher takes a rank as finished once the file exists)."""
    path = os.path.join(out_dir, f"rank{rank}{name}.json")
    with open(path + ".tmp", "w") as handle:
        json.dump(result, handle, default=str)
    os.replace(path + ".tmp", path)


def init_group(rank: int, world: int, out_dir: str, backend: str) -> Any:
    """Set the device (NCCL) and join the process group through rank 0's store on the loopback (`rendezvous`)."""
    import torch
    import torch.distributed as dist

    kwargs: dict[str, Any] = {}
    if backend == "nccl":
        torch.cuda.set_device(rank)
        kwargs["device_id"] = torch.device("cuda", rank)
    dist.init_process_group(
        backend, store=rendezvous(rank, world, out_dir), rank=rank, world_size=world, **kwargs
    )
    return dist


def rendezvous(rank: int, world: int, out_dir: str) -> Any:
    """Rank 0's TCPStore on the port the kernel gives it as it binds, its number written to `out_dir` for the other
    ranks, which join it. A port chosen ahead (bind 0, close, pass the number on) could be taken by another process
    before rank 0 bound it: rank 0 failed with EADDRINUSE and the others waited on whoever held it."""
    import time

    from torch.distributed import TCPStore

    path = os.path.join(out_dir, "rendezvous.port")
    if rank == 0:
        store = TCPStore("127.0.0.1", 0, world, True, wait_for_workers=False)
        with open(path + ".tmp", "w") as handle:
            handle.write(str(store.port))
        os.replace(path + ".tmp", path)
        return store
    deadline = time.monotonic() + START_BOUND_S  # the launcher's own start bound kills a rank sooner
    while not os.path.exists(path):
        if time.monotonic() > deadline:
            raise RuntimeError(f"rank 0 published no rendezvous port within {START_BOUND_S:g} s")
        time.sleep(0.05)
    with open(path) as handle:
        return TCPStore("127.0.0.1", int(handle.read()), world, False)
