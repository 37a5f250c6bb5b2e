"""Run on the GPU machine (marked `gpu`; skipped elsewhere): the all-reduce bench at world size 2 or more, CUDA graphs
captured, finishes, keeps its results and tears every rank down cleanly. `scripts/device/x2.sh` runs this file."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.gpu


def gpu_count() -> int:
    try:
        import pynvml

        pynvml.nvmlInit()
        return int(pynvml.nvmlDeviceGetCount())
    except Exception:
        return 0


def test_bench_allreduce_tears_down_cleanly_with_graphs_captured(tmp_path: Path) -> None:
    if gpu_count() < 2:
        pytest.skip("needs two or more NVIDIA GPUs")
    pytest.importorskip("torch")
    provision = [sys.executable, "-m", "provision"]
    home = ["--home", str(tmp_path / "home")]
    subprocess.run(
        [*provision, "adopt", "here", sys.prefix, "--no-lock", *home],
        check=True,
        capture_output=True,
        timeout=120,
    )
    done = subprocess.run(
        [*provision, "bench", "allreduce", "here", "-e", "1M", "--json", *home],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    (run,) = json.loads(done.stdout)["runs"]
    assert run["world_size"] == gpu_count() and all(
        row["wrong"] == 0 and row["graph_us"] > 0 for row in run["rows"]
    )
    assert run["pattern"]["122x42KB_ms"] > 0
    assert [t["clean"] for t in run["teardown"]] == [True] * run["world_size"], run["teardown"]
