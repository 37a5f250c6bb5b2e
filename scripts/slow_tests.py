"""Write tests/slow_tests.txt: the tests that took 0.8 s or more (setup, call and teardown together) in a pytest run
with --durations=0, by file and function. tests/conftest.py marks them `slow`, so that `pytest -m "not slow and not
network"` is the quick tier for the inner loop. Regenerate after adding slow tests:

    .venv/bin/python -m pytest -q --durations=0 -p no:cacheprovider > /tmp/durations.log; python scripts/slow_tests.py /tmp/durations.log
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

THRESHOLD = 0.8  # seconds a test may take and stay in the quick tier
ROW = re.compile(r"^([\d.]+)s (?:setup|call|teardown)\s+(\S+)")


def main(log: Path) -> None:
    seconds: dict[str, float] = {}
    for line in log.read_text().splitlines():
        found = ROW.match(line)
        if found:
            # every parameter of a slow test is slow enough to leave out
            test = found.group(2).split("[", 1)[0]
            seconds[test] = max(seconds.get(test, 0.0), 0.0) + float(found.group(1))
    slow = sorted(test for test, spent in seconds.items() if spent >= THRESHOLD)
    out = Path(__file__).resolve().parent.parent / "tests" / "slow_tests.txt"
    out.write_text(
        f"# written by scripts/slow_tests.py: tests of {THRESHOLD} s or more, marked slow by tests/conftest.py\n"
        + "".join(f"{test}\n" for test in slow)
    )
    print(f"{len(slow)} of {len(seconds)} tests at {THRESHOLD} s or more: {out}")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
