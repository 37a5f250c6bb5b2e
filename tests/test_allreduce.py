"""Several ranks, for real where this machine allows: the launcher, the all-reduce sweep and its formulas with gloo on
CPUs (torch's CPU build lies on this machine's disk), NVLS refused, a hanging rank killed with a verdict."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from provision.checks import allreduce, payload_dir
from provision.errors import UsageError
from provision.stacks import uvtool

CPU_TORCH = sorted(Path("/opt/wheels").glob(f"torch-*+cpu-cp{sys.version_info[0]}{sys.version_info[1]}-*.whl"))


@pytest.mark.parametrize(("text", "size"), [("8", 8), ("42K", 43008), ("2.5M", 2621440), ("128M", 134217728), ("1G", 2**30)])
def test_sizes(text: str, size: int) -> None:
    assert allreduce.parse_size(text) == size


def test_variants_and_nvls_is_refused() -> None:
    assert allreduce.variants((), ()) == [{}]
    assert allreduce.variants(("allreduce:ring", "allreduce:tree"), ("Simple",)) == [
        {"NCCL_ALGO": "allreduce:ring", "NCCL_PROTO": "Simple"}, {"NCCL_ALGO": "allreduce:tree", "NCCL_PROTO": "Simple"}]
    for algo in ("NVLS", "allreduce:nvlstree", "^ring,NVLS"):
        with pytest.raises(UsageError, match="never enables"):
            allreduce.variants((algo,), ())


def test_a_hanging_rank_is_killed_with_a_verdict(tmp_path: Path) -> None:
    script = tmp_path / "hang.py"
    script.write_text(
        "import sys, time\n"
        f"sys.path.insert(0, {str(payload_dir())!r})\n"
        "from _common import launch, write_rank\n"
        "def target(rank, world, port, out_dir, config):\n"
        "    if rank == 1:\n"
        "        time.sleep(600)\n"
        "    write_rank(out_dir, rank, {'rank': rank, 'ok': True})\n"
        "if __name__ == '__main__':\n"
        "    launch(target, 3, {}, 3.0)\n"
        "    print('not reached')\n"
    )
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60)
    verdict = json.loads(done.stdout.strip().splitlines()[-1])
    assert verdict["status"] == "fail" and "ranks [1] hung for 3 s and were killed" in verdict["reason"]
    assert "ACS" in verdict["reason"] and "not reached" not in done.stdout


@pytest.fixture(scope="module")
def cpu_torch_env(tmp_path_factory) -> Path:
    if not CPU_TORCH:
        pytest.skip("no CPU build of torch on this machine's disk")
    venv = tmp_path_factory.mktemp("cpu-torch") / "venv"
    uvtool.run(["venv", str(venv), "--python", sys.executable, "--quiet"])
    uvtool.run(["pip", "install", "--python", str(venv / "bin/python"), "--quiet", str(CPU_TORCH[-1])])
    return venv


@pytest.mark.slow
def test_gloo_sweep_on_cpus_and_stored_with_the_environment(cpu_torch_env: Path, tmp_path: Path, provision_bin: str) -> None:
    home = ["--home", str(tmp_path / "home")]
    subprocess.run([provision_bin, "adopt", "cpu", str(cpu_torch_env), *home], check=True, capture_output=True)
    done = subprocess.run([provision_bin, "bench", "allreduce", "cpu", "--backend", "gloo", "--ranks", "3", "-e", "64K",
                           "--iters", "4", "--json", *home], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    record = json.loads(done.stdout)
    (run,) = record["runs"]
    rows = run["rows"]
    assert [r["size"] for r in rows] == [8 * 2**i for i in range(14)]
    assert all(r["wrong"] == 0 for r in rows)
    for row in rows:  # nccl-tests' formulas: algbw = bytes / time, busbw = algbw * 2(n-1)/n
        assert row["eager_algbw"] == pytest.approx(row["size"] / (row["eager_us"] * 1e-6) / 1e9)
        assert row["eager_busbw"] == pytest.approx(row["eager_algbw"] * 2 * 2 / 3)
    envs = json.loads(subprocess.run([provision_bin, "envs", "--json", *home], capture_output=True, text=True).stdout)
    meta = json.loads((Path(envs["environments"][0]["path"]) / "env.json").read_text())
    assert meta["allreduce"][-1]["world_size"] == 3
    table = subprocess.run([provision_bin, "bench", "allreduce", "cpu", "--backend", "gloo", "--ranks", "2", "-e", "16",
                            *home], capture_output=True, text=True, timeout=600)
    assert "busbw" in table.stdout and "#wrong" in table.stdout
