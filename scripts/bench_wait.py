"""How late provision sees a child's end when it reads the child's lines as they come (uv installing in `create`):
Popen.wait(timeout), which polls, against provision.proc.wait (a pidfd), interleaved, in one run.

    python scripts/bench_wait.py [--pairs 15]

The child prints the time just before it ends; the figure is how long after that `proc.run` returns."""

from __future__ import annotations

import argparse
import statistics
import sys
import time

from provision import proc

CHILD = (
    "import sys, time; print('working', file=sys.stderr, flush=True); time.sleep(0.3); "
    "print(time.time(), flush=True)"
)


def late(polling: bool) -> float:
    original = proc.wait
    if polling:
        proc.wait = lambda child, timeout: child.wait(timeout=timeout)  # type: ignore[assignment]
    try:
        done = proc.run([sys.executable, "-S", "-c", CHILD], timeout=60, on_stderr_line=lambda _: None)
    finally:
        proc.wait = original  # type: ignore[assignment]
    return time.time() - float(done.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=15)
    pairs = parser.parse_args().pairs
    polled, woken = [], []
    for _ in range(pairs):
        polled.append(late(True))
        woken.append(late(False))
    print(
        f"Popen.wait(timeout): median {statistics.median(polled) * 1000:.1f} ms after the child's last line "
        f"(max {max(polled) * 1000:.1f}); proc.wait (pidfd): median {statistics.median(woken) * 1000:.1f} ms "
        f"(max {max(woken) * 1000:.1f}); {pairs} pairs, interleaved"
    )


if __name__ == "__main__":
    main()
