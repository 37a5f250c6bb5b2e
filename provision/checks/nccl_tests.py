"""NVIDIA's nccl-tests `all_reduce_perf`, run beside provision's own all-reduce bench with the same sizes, graph mode
and NCCL variables, so each figure has its anchor from the same machine in the same call."""

from __future__ import annotations

import dataclasses
import os
import shutil
import time
from pathlib import Path
from typing import Any

from provision import proc
from provision.checks.payloads._hangs import ALLOWANCE_S, HANG_HINT, START_BOUND_S, step_bound_s
from provision.errors import EnvError, InputError
from provision.records.allreduce_runs import KINDS, AllreduceRow, AnchorRow, NcclTestsFigures

BINARY = "all_reduce_perf"
WARMUP_ITERS = 5
PATTERNS = {"122x42KB_ms": (122, 43008), "2x2.5MB_ms": (2, 2621440)}  # ops per forward pass, bytes per op


def find(path: Path | None) -> Path | None:
    """The all_reduce_perf to run: PATH given (a file, or a folder holding it, e.g. nccl-tests' build/), else the one
    on PATH, else None."""
    if path is None:
        found = shutil.which(BINARY)
        return Path(found) if found else None
    candidate = path / BINARY if path.is_dir() else path
    if not (candidate.is_file() and os.access(candidate, os.X_OK)):
        raise InputError(
            f"{path}: no executable {BINARY} there",
            "build NVIDIA's nccl-tests (make MPI=0 NCCL_HOME=...) and give --nccl-tests nccl-tests/build",
        )
    return candidate


def nccl_library_dir(venv: Path) -> Path | None:
    """The folder of the environment's own libnccl.so.2 (nvidia-nccl-cu12/cu13 wheels), so both sides use one NCCL."""
    for lib in sorted(venv.glob("lib/python3*/site-packages/nvidia/**/libnccl.so.2")):
        return lib.parent
    return None


def parse(text: str) -> tuple[str | None, list[AnchorRow]]:
    """(the NCCL version nccl-tests loaded, its rows) from all_reduce_perf's output."""
    version = None
    rows = []
    for line in text.splitlines():
        code = (line.split("nccl-library=")[1:] or [""])[0][:12].split()[:1]
        if code and code[0].isdigit():
            number = int(code[0])
            version = f"{number // 10000}.{number // 100 % 100}.{number % 100}"
        fields = line.split()
        if len(fields) == 13 and fields[0].isdigit():
            try:  # a line of another build's output, or garbage, that happens to have 13 fields: not a row
                rows.append(
                    AnchorRow(
                        size=int(fields[0]),
                        out_of_place_us=float(fields[5]),
                        time_us=float(fields[9]),
                        algbw=float(fields[10]),
                        busbw=float(fields[11]),
                        wrong=int(fields[12]),
                    )
                )
            except ValueError:
                continue
    return version, rows


class Hung(EnvError):
    """all_reduce_perf printed no row within the bound of the size it was on: it was killed (its process group)."""

    def __init__(self, *, size: int, waited_s: float) -> None:
        super().__init__(
            f"all_reduce_perf hung at size {size} B after {waited_s:.0f} s and was killed", HANG_HINT
        )
        self.size, self.waited_s = size, waited_s


def sizes(min_bytes: int, max_bytes: int, factor: int) -> list[int]:
    """The sizes all_reduce_perf -b -e -f prints a row for, in order."""
    found, size = [], min_bytes
    while size <= max_bytes:
        found.append(size)
        size *= factor
    return found


def run(
    binary: Path,
    *,
    world: int,
    min_bytes: int,
    max_bytes: int,
    factor: int,
    iters: int,
    graph_launches: int,
    env: dict[str, str],
    start_s: float = START_BOUND_S,
    allowance_s: float = ALLOWANCE_S,
) -> tuple[str | None, list[AnchorRow]]:
    """One all_reduce_perf run on `world` GPUs of this process (-g), float sum, checked; graph_launches > 0 is -G.
    Its rows are read as they come; one that does not come within its size's bound (the bench's own formula) is a
    hang: the run is killed and Hung names the size. Start-up (communicators, and the warm-up of every size that
    nccl-tests does before its first row) has START_BOUND_S on top."""
    argv = [
        str(binary),
        "-b",
        str(min_bytes),
        "-e",
        str(max_bytes),
        "-f",
        str(factor),
        "-g",
        str(world),
        "-n",
        str(iters),
        "-w",
        str(WARMUP_ITERS),
        "-c",
        "1",
    ]
    if graph_launches:
        argv += ["-G", str(graph_launches)]
    expected = sizes(min_bytes, max_bytes, factor)
    # out-of-place and in-place: a sync op, the timed ones, the check
    ops = 2 * (iters * max(graph_launches, 1) + 2)
    warm_up = sum(step_bound_s(size, WARMUP_ITERS, 0.0) for size in sizes(min_bytes, max_bytes, 2))
    seen, last_row = 0, time.monotonic()

    def on_line(line: str) -> float | None:
        nonlocal seen, last_row
        if not parse(line)[1]:
            return None
        seen, last_row = seen + 1, time.monotonic()
        # after the last row: its summary lines and the exit
        return step_bound_s(expected[seen], ops, allowance_s) if seen < len(expected) else allowance_s

    done = proc.run_watched(
        argv,
        env=env,
        on_line=on_line,
        first_bound_s=start_s + warm_up + step_bound_s(expected[0], ops, allowance_s),
    )
    version, rows = parse(done.stdout)
    if done.timed_out and len(rows) < len(expected):
        raise Hung(size=expected[len(rows)], waited_s=time.monotonic() - last_row)
    # a run that hung after its last row keeps its rows
    if (done.returncode != 0 and not done.timed_out) or not rows:
        raise EnvError(
            f"nccl-tests failed (exit {done.returncode}): {done.tail(3)}", f"run it by hand: {' '.join(argv)}"
        )
    return version, rows


def compare(
    binary: Path,
    *,
    world: int,
    min_bytes: int,
    max_bytes: int,
    factor: int,
    iters: int,
    env: dict[str, str],
    start_s: float = START_BOUND_S,
    allowance_s: float = ALLOWANCE_S,
) -> NcclTestsFigures:
    """nccl-tests' figures for the sweep (eager and -G iters) and for the verify-pass pattern (-G ops per pass)."""

    def sweep(low: int, high: int, launches: int) -> tuple[str | None, list[AnchorRow]]:
        return run(
            binary,
            world=world,
            min_bytes=low,
            max_bytes=high,
            factor=factor,
            iters=iters,
            graph_launches=launches,
            env=env,
            start_s=start_s,
            allowance_s=allowance_s,
        )

    version, eager = sweep(min_bytes, max_bytes, 0)
    _, graph = sweep(min_bytes, max_bytes, iters)
    pattern = {}
    for name, (ops, size) in PATTERNS.items():
        _, (row, *_) = sweep(size, size, ops)
        pattern[name] = row.time_us * ops / 1e3
    return NcclTestsFigures(path=str(binary), nccl_library=version, eager=eager, graph=graph, pattern=pattern)


def join(rows: list[AllreduceRow], anchor: NcclTestsFigures) -> list[AllreduceRow]:
    """Provision's rows with nccl-tests' time beside them for every size both measured: the ratio, and what
    torch.distributed adds per op (provision's time less nccl-tests')."""
    by_size = {"eager": {r.size: r for r in anchor.eager}, "graph": {r.size: r for r in anchor.graph}}
    joined = []
    for row in rows:
        beside: dict[str, Any] = {}
        for kind in KINDS:
            other, mine = by_size[kind].get(row.size), row.side(kind)
            if other is None or mine is None:
                continue
            beside[f"nccl_tests_{kind}_us"] = other.time_us
            beside[f"nccl_tests_{kind}_busbw"] = other.busbw
            beside[f"{kind}_ratio"] = mine.us / other.time_us if other.time_us else float("nan")
            beside[f"torch_overhead_{kind}_us"] = mine.us - other.time_us
        joined.append(dataclasses.replace(row, **beside))
    return joined
