"""CPU time per test (user + system of the test process and of every process it started and waited for), as a pytest
plugin, and the per-file sums of one or two such logs side by side.

    PYTHONPATH=scripts TESTCPU=after.jsonl python -m pytest -p testcpu -n 0 tests/test_x.py
    python scripts/testcpu.py after.jsonl                 # seconds of CPU per test file, largest first
    python scripts/testcpu.py before.jsonl after.jsonl    # the same for two runs, with the difference

A test's figure includes the fixtures it set up first (a session fixture is charged to the test that made it); run
with -n 0 so that one process holds the whole figure, and with PROVISION_TEST_EXEC=1: the commands the fork server
(tests/forkserver.py) runs count as the test process's children only when it ends."""

from __future__ import annotations

import json
import os
import resource
import sys
import time
from collections import defaultdict
from collections.abc import Iterator

import pytest


def _cpu() -> tuple[float, float]:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, children.ru_utime + children.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    before, started = _cpu(), time.monotonic()
    yield
    after = _cpu()
    with open(os.environ.get("TESTCPU", "testcpu.jsonl"), "a") as log:
        log.write(
            json.dumps(
                {
                    "id": item.nodeid,
                    "self": after[0] - before[0],
                    "child": after[1] - before[1],
                    "wall": time.monotonic() - started,
                }
            )
            + "\n"
        )


def per_file(path: str) -> dict[str, float]:
    files: dict[str, float] = defaultdict(float)
    with open(path) as log:
        for line in log:
            row = json.loads(line)
            files[row["id"].split("::")[0]] += row["self"] + row["child"]
    return files


def main(paths: list[str]) -> None:
    runs = [per_file(p) for p in paths]
    names = sorted(set().union(*runs), key=lambda n: -max(r.get(n, 0.0) for r in runs))
    for name in names:
        figures = [r.get(name) for r in runs]
        shown = "  ".join(f"{f:8.1f}" if f is not None else f"{'-':>8}" for f in figures)
        change = f"  {figures[1] - figures[0]:+8.1f}" if len(runs) == 2 and None not in figures else ""  # type: ignore[operator]
        print(f"{shown}{change}  {name}")
    print("  ".join(f"{sum(r.values()):8.1f}" for r in runs) + "  total")


if __name__ == "__main__":
    main(sys.argv[1:])
