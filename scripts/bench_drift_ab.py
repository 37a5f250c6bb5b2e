"""The warm drift check of one venv by two checkouts of provision, interleaved (A, B, A, B, ...), so that a loaded
machine's drift in speed falls on both alike: the median of each pair's ratio B/A says whether B is slower.

    python scripts/bench_drift_ab.py VENV --before OTHER_CHECKOUT [--pairs 15] [--accept PATH]... [--json OUT]

A is OTHER_CHECKOUT (say `git archive` of main before a change), B this checkout; with --accept, B also judges those
files of site-packages as accepted (their present content). Each run is a fresh process timing `drift.scan` alone,
its drift cache warm (filled once first); the venv is only read.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ONE_RUN = """
import hashlib, json, sys, time
from pathlib import Path
sys.path.insert(0, sys.argv[1])
from provision.envs import drift
venv, cache, accepted = Path(sys.argv[2]), Path(sys.argv[3]), sys.argv[4:]
kept = {}
if accepted:
    from provision.envs.records import KeptFile
    site = drift.site_packages(venv)
    kept = {p: KeptFile(path=p, sha256=hashlib.sha256((site / p).read_bytes()).hexdigest()) for p in accepted}
start = time.perf_counter()
found = drift.scan(venv, cache=cache, **({"kept": kept} if kept else {}))
print(json.dumps({"seconds": time.perf_counter() - start, "files": found.files, "status": found.status}))
"""


def run(root: Path, venv: Path, cache: Path, accepted: list[str]) -> dict[str, float]:
    done = subprocess.run(
        [sys.executable, "-c", ONE_RUN, str(root), str(venv), str(cache), *accepted],
        capture_output=True,
        text=True,
        check=True,
        cwd=root,
    )
    result: dict[str, float] = json.loads(done.stdout)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("venv", type=Path)
    parser.add_argument("--before", type=Path, required=True, help="The other checkout (A).")
    parser.add_argument("--pairs", type=int, default=15)
    parser.add_argument("--accept", action="append", default=[], metavar="PATH", help="Accepted in B's runs.")
    parser.add_argument("--json", type=Path, help="Write the figures here.")
    args = parser.parse_args()
    venv, before = args.venv.absolute(), args.before.absolute()
    with tempfile.TemporaryDirectory(prefix="bench-drift-ab-") as scratch:
        cache_a, cache_b = Path(scratch) / "a.json", Path(scratch) / "b.json"
        run(before, venv, cache_a, [])  # each fills its own cache once: every later run is warm
        run(ROOT, venv, cache_b, args.accept)
        a_times, b_times = [], []
        for _ in range(args.pairs):
            a_times.append(run(before, venv, cache_a, [])["seconds"])
            b_times.append(run(ROOT, venv, cache_b, args.accept)["seconds"])
    ratios = [b / a for a, b in zip(a_times, b_times, strict=True)]
    result = {
        "venv": str(venv),
        "before": str(before),
        "accepted": args.accept,
        "pairs": args.pairs,
        "a_median_s": round(statistics.median(a_times), 3),
        "b_median_s": round(statistics.median(b_times), 3),
        "a_min_s": round(min(a_times), 3),
        "b_min_s": round(min(b_times), 3),
        "ratio_median": round(statistics.median(ratios), 3),
        "ratio_quartiles": [round(q, 3) for q in statistics.quantiles(ratios, n=4)],
    }
    print(f"{venv}: warm drift scan, {args.pairs} interleaved pairs")
    print(f"  A {before}: median {result['a_median_s']:.3f} s, min {result['a_min_s']:.3f} s")
    print(
        f"  B {ROOT}{' with ' + ', '.join(args.accept) + ' accepted' if args.accept else ''}: "
        f"median {result['b_median_s']:.3f} s, min {result['b_min_s']:.3f} s"
    )
    print(f"  B/A per pair: median {result['ratio_median']:.3f}, quartiles {result['ratio_quartiles']}")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
