"""NVIDIA's nccl-tests `all_reduce_perf`, run beside provision's own all-reduce bench with the same sizes, graph mode
and NCCL variables, so each figure has its anchor from the same machine in the same call."""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from provision import proc
from provision.errors import EnvError, UsageError

BINARY = "all_reduce_perf"
PATTERNS = {"122x42KB_ms": (122, 43008), "2x2.5MB_ms": (2, 2621440)}  # ops per forward pass, bytes per op


@dataclass(frozen=True, kw_only=True)
class Row:
    size: int
    time_us: float  # in-place, as provision's all_reduce is
    algbw: float
    busbw: float
    wrong: int
    out_of_place_us: float


def find(path: Path | None) -> Path | None:
    """The all_reduce_perf to run: PATH given (a file, or a folder holding it, e.g. nccl-tests' build/), else the one
    on PATH, else None."""
    if path is None:
        found = shutil.which(BINARY)
        return Path(found) if found else None
    candidate = path / BINARY if path.is_dir() else path
    if not (candidate.is_file() and os.access(candidate, os.X_OK)):
        raise UsageError(f"{path}: no executable {BINARY} there",
                         "build NVIDIA's nccl-tests (make MPI=0 NCCL_HOME=...) and give --nccl-tests nccl-tests/build")
    return candidate


def nccl_library_dir(venv: Path) -> Path | None:
    """The folder of the environment's own libnccl.so.2 (nvidia-nccl-cu12/cu13 wheels), so both sides use one NCCL."""
    for lib in sorted(venv.glob("lib/python3*/site-packages/nvidia/**/libnccl.so.2")):
        return lib.parent
    return None


def parse(text: str) -> tuple[str | None, list[Row]]:
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
                rows.append(Row(size=int(fields[0]), out_of_place_us=float(fields[5]), time_us=float(fields[9]),
                                algbw=float(fields[10]), busbw=float(fields[11]), wrong=int(fields[12])))
            except ValueError:
                continue
    return version, rows


def run(binary: Path, *, world: int, min_bytes: int, max_bytes: int, factor: int, iters: int, graph_launches: int,
        env: dict[str, str]) -> tuple[str | None, list[Row]]:
    """One all_reduce_perf run on `world` GPUs of this process (-g), float sum, checked; graph_launches > 0 is -G."""
    argv = [str(binary), "-b", str(min_bytes), "-e", str(max_bytes), "-f", str(factor), "-g", str(world),
            "-n", str(iters), "-w", "5", "-c", "1"]
    if graph_launches:
        argv += ["-G", str(graph_launches)]
    done = proc.run(argv, timeout=600, env=env)
    version, rows = parse(done.stdout)
    if done.returncode != 0 or not rows:
        raise EnvError(f"nccl-tests failed (exit {done.returncode}): {done.tail(3)}", f"run it by hand: {' '.join(argv)}")
    return version, rows


def compare(binary: Path, *, world: int, min_bytes: int, max_bytes: int, factor: int, iters: int,
            env: dict[str, str]) -> dict[str, object]:
    """nccl-tests' figures for the sweep (eager and -G iters) and for the verify-pass pattern (-G ops per pass)."""
    def sweep(low: int, high: int, launches: int) -> tuple[str | None, list[Row]]:
        return run(binary, world=world, min_bytes=low, max_bytes=high, factor=factor, iters=iters,
                   graph_launches=launches, env=env)

    version, eager = sweep(min_bytes, max_bytes, 0)
    _, graph = sweep(min_bytes, max_bytes, iters)
    pattern = {}
    for name, (ops, size) in PATTERNS.items():
        _, (row, *_) = sweep(size, size, ops)
        pattern[name] = row.time_us * ops / 1e3
    return {"path": str(binary), "nccl_library": version, "eager": [vars(r) for r in eager],
            "graph": [vars(r) for r in graph], "pattern": pattern}


def join(rows: list[dict[str, float]], anchor: dict[str, object]) -> None:
    """Put nccl-tests' time beside provision's for every size both measured: the ratio, and what torch.distributed
    adds per op (provision's time less nccl-tests')."""
    for kind in ("eager", "graph"):
        by_size = {r["size"]: r for r in anchor[kind]}  # type: ignore[attr-defined]
        for row in rows:
            other = by_size.get(row["size"])
            if other is None or f"{kind}_us" not in row:
                continue
            row[f"nccl_tests_{kind}_us"] = other["time_us"]
            row[f"nccl_tests_{kind}_busbw"] = other["busbw"]
            row[f"{kind}_ratio"] = row[f"{kind}_us"] / other["time_us"] if other["time_us"] else float("nan")
            row[f"torch_overhead_{kind}_us"] = row[f"{kind}_us"] - other["time_us"]
