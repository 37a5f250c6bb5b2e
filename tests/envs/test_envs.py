"""Environments with the real uv: create cu128 and cu130 side by side, switch, roll back, run, and every fault:
kill -9 mid-create, a hash mismatch, two creates at once, rollback with no history or a removed environment."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import stacks
from launch import interrupt
from tiny import Tool

PY = sys.executable


@pytest.fixture
def tool(tmp_path: Path, provision_bin: str) -> Tool:
    return Tool(provision_bin, tmp_path / "home")


@pytest.fixture
def stack(index_server):
    return {"cu130": stacks.cu130(index_server), "cu128": stacks.cu128(index_server)}


def create(
    tool: Tool, stack, profile: str, *extra: str, check: bool = True
) -> subprocess.CompletedProcess[str]:
    return tool("create", profile, "--python", PY, *stacks.index_args(stack[profile]), *extra, check=check)


def torch_in(tool: Tool, name: str) -> str:
    code = "import torch, importlib.metadata as m; print(torch.__version__)"
    return tool("run", name, "--", "python", "-c", code).stdout.strip()


def test_cu128_and_cu130_side_by_side_switch_and_rollback(tool: Tool, stack) -> None:
    create(tool, stack, "cu128")
    create(tool, stack, "cu130")
    envs = tool.envs()
    assert envs["cu130"]["active"] and not envs["cu128"]["active"]
    assert envs["cu130"]["cuda"] == "13.0" and envs["cu128"]["cuda"] == "12.8"
    assert envs["cu130"]["check_status"] == "pass"
    assert torch_in(tool, "cu128") == "2.9.1+cu128" and torch_in(tool, "cu130") == "2.16.0.dev20261126+cu130"
    rolled = json.loads(tool("rollback", "--json").stdout)
    assert rolled == {"schema_version": 1, "previous": "cu130", "active": "cu128", "skipped": []}
    # the stable path follows: HOME/active/venv/bin/python is cu128's now
    stable = tool.home / "active" / "venv" / "bin" / "python"
    out = subprocess.run(
        [stable, "-c", "import torch; print(torch.__version__)"], capture_output=True, text=True
    )
    assert out.stdout.strip() == "2.9.1+cu128"
    run_active = tool("run", "--", "python", "-c", "import torch; print(torch.__version__)").stdout.strip()
    assert run_active == "2.9.1+cu128"
    tool("switch", "cu130")
    assert tool.envs()["cu130"]["active"]


def test_the_profiles_own_toolkit_is_laid_out_as_a_cuda_home(tool: Tool, stack) -> None:
    create(tool, stack, "cu130")
    cuda_home = tool("run", "cu130", "--", "sh", "-c", 'printf "%s" "$CUDA_HOME"').stdout
    home = Path(cuda_home)
    assert home.name == "cuda" and (home / "bin" / "nvcc").exists() and (home / "include" / "cuda.h").exists()
    assert os.readlink(home / "lib64" / "libcudart.so").endswith("nvidia/cu13/lib/libcudart.so.13")
    soname = subprocess.run(
        ["readelf", "-d", str(home / "lib64/stubs/libcuda.so")], capture_output=True, text=True
    ).stdout
    assert "libcuda.so.1" in soname
    # its nvcc comes first on PATH in run and shell-env (issue 36, item 7): `which nvcc` found the system's 12.8
    system = tool.home.parent / "system-bin"
    system.mkdir()
    (system / "nvcc").write_text("#!/bin/sh\necho system nvcc 12.8\n")
    (system / "nvcc").chmod(0o755)
    path = {"PATH": f"{system}{os.pathsep}{os.environ['PATH']}"}
    # NVIDIA's wheel carries the mode; the test's wheel does not
    (home / "bin" / "nvcc").resolve().chmod(0o755)
    found = tool("run", "cu130", "--", "sh", "-c", "command -v nvcc", env=path).stdout.strip()
    assert found == str(home / "bin" / "nvcc"), found
    exports = tool("shell-env", "cu130", env=path).stdout
    evaluated = subprocess.run(
        ["bash", "-c", exports + "\ncommand -v nvcc; command -v python"],
        capture_output=True,
        text=True,
        env={**os.environ, **path},
    ).stdout.split()
    assert evaluated[0] == str(home / "bin" / "nvcc") and evaluated[1].endswith("/venv/bin/python"), evaluated


def test_run_adds_nothing_and_keeps_exit_code_and_profile_env(tool: Tool, stack) -> None:
    # {arch_list} is filled from the GPUs at create: the recorded H200 gives 9.0a
    h200 = {"PROVISION_NVML_REPLAY": str(Path(__file__).parent.parent / "data" / "h200.nvml.json")}
    tool("create", "cu130", "--python", PY, "--no-checks", *stacks.index_args(stack["cu130"]), env=h200)
    done = tool(
        "run", "cu130", "--", "sh", "-c", 'printf "%s" "$FLASHINFER_CUDA_ARCH_LIST"; exit 7', check=False
    )
    assert done.returncode == 7 and done.stdout == "9.0a"
    exports = tool("shell-env", "cu130").stdout
    evaluated = subprocess.run(
        ["bash", "-c", exports + '\nprintf "%s|%s" "$VIRTUAL_ENV" "$FLASHINFER_WORKSPACE_BASE"'],
        capture_output=True,
        text=True,
    ).stdout
    venv, workspace = evaluated.split("|")
    assert venv.endswith("/venv") and Path(venv).parent == Path(workspace)


def test_kill_9_during_create_leaves_the_active_env_working(tool: Tool, stack) -> None:
    create(tool, stack, "cu128")
    stack["cu130"]["default"].delay = 1.0  # slow enough to be caught mid-install
    process = create_in_background(tool, stack)
    deadline = time.time() + 60
    while time.time() < deadline and len(tool.builds()) < 2:
        time.sleep(0.05)
    assert len(tool.builds()) == 2, "the second build never started"
    process.send_signal(signal.SIGKILL)
    process.wait()
    assert torch_in(tool, "cu128") == "2.9.1+cu128" and tool.envs()["cu128"]["active"]
    stack["cu130"]["default"].delay = 0
    create(tool, stack, "cu130")  # the next create cleans the leftover and succeeds
    assert len(tool.builds()) == 2 and tool.envs()["cu130"]["active"]


def create_in_background(tool: Tool, stack) -> subprocess.Popen[str]:
    # a cache of its own, so that uv must download from the slow index while the test interrupts it
    cache = tool.home.parent / "uv-cache-fresh"
    return tool.popen(
        "create",
        "cu130",
        "--python",
        PY,
        *stacks.index_args(stack["cu130"]),
        env={"UV_CACHE_DIR": str(cache)},
    )


def test_ctrl_c_during_create_removes_the_build(tool: Tool, stack) -> None:
    create(tool, stack, "cu128")
    index = stack["cu130"]["default"]
    # the index answers only when the test says so: caught mid-create, however
    held = index.hold = threading.Event()
    earlier = len(index.requests)  # loaded the machine (a 1 s delay let it finish first)
    process = create_in_background(tool, stack)
    err = interrupt(process, held, started=lambda: len(tool.builds()) >= 2 and len(index.requests) > earlier)
    assert process.returncode == 130 and "interrupted" in err, err
    assert len(tool.builds()) == 1 and tool.envs()["cu128"]["active"], tool.builds()


def test_hash_mismatch_is_refused_and_nothing_is_installed(tool: Tool, stack) -> None:
    create(tool, stack, "cu128")
    ninja = next((stack["cu130"]["default"].root / "ninja").glob("*.whl"))
    stack["cu130"]["default"].wrong_hash.add(ninja.name)
    done = create(tool, stack, "cu130", check=False)
    assert done.returncode != 0 and "hash" in done.stderr.lower()
    listed = tool.envs()
    assert set(listed) == {"cu128"} and listed["cu128"]["active"] and len(tool.builds()) == 1


def test_two_creates_at_once_serialize(tool: Tool, stack) -> None:
    first = tool.popen("create", "cu130", "--python", PY, *stacks.index_args(stack["cu130"]))
    second = tool.popen("create", "cu128", "--python", PY, *stacks.index_args(stack["cu128"]))
    results = [p.communicate(timeout=300) for p in (first, second)]
    assert first.returncode == 0 and second.returncode == 0, results
    envs = tool.envs()
    assert set(envs) == {"cu128", "cu130"} and sum(e["active"] for e in envs.values()) == 1
    assert len(tool.builds()) == 2


def test_rollback_without_history_and_past_a_removed_env(tool: Tool, stack) -> None:
    done = tool("rollback", check=False)
    assert done.returncode == 7 and "nothing to roll back to" in done.stderr
    create(tool, stack, "cu128")
    create(tool, stack, "cu130", "--name", "middle")
    create(tool, stack, "cu130")
    assert tool("remove", "cu130", check=False).returncode == 7  # the active one is refused
    tool("switch", "cu128")
    tool("switch", "cu130")
    tool("remove", "middle")
    tool("switch", "cu128")
    tool("switch", "cu130")
    rolled = json.loads(tool("rollback", "--json").stdout)
    assert rolled["active"] == "cu128"
    tool("remove", "cu130")
    rolled = tool("rollback", check=False)
    assert rolled.returncode == 7 and "removed since: cu130, middle" in rolled.stderr


def test_recreate_keeps_the_old_build_until_the_new_one_passes(tool: Tool, stack, tmp_path: Path) -> None:
    create(tool, stack, "cu130")
    before = tool.envs()["cu130"]["path"]
    broken = stack["cu130"]["default"]
    broken.add(
        "ninja", "1.13.1", tag=stacks.PY3, files={"ninja/__init__.py": b"raise ImportError('broken build')\n"}
    )
    profile = tmp_path / "cu130-broken.toml"
    profile.write_text(
        (Path(__file__).parent.parent.parent / "profiles/cu130.toml")
        .read_text()
        .replace("ninja = {}", 'ninja = "==1.13.1"')
    )
    failed = tool(
        "create", str(profile), "--python", PY, "--replace", *stacks.index_args(stack["cu130"]), check=False
    )
    assert failed.returncode == 1 and "broken build" in failed.stdout
    listed = tool.envs()
    assert listed["cu130"]["path"] == before and listed["cu130"]["active"]


def test_adopt_a_venv_and_remove_leaves_its_files(tool: Tool, stack, tmp_path: Path) -> None:
    venv = tmp_path / "old-cu128"
    # ensurepip: 7 s of CPU, nothing asked of pip
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", venv], check=True)
    adopted = json.loads(tool("adopt", "mine", str(venv), "--profile", "cu128", "--no-lock", "--json").stdout)
    assert adopted["adopted"] == "mine" and adopted["venv"] == str(venv)
    envs = tool.envs()
    assert envs["mine"]["adopted"] and envs["mine"]["cuda"] == "12.8"
    create(tool, stack, "cu130")
    tool("switch", "mine")
    assert tool("run", "--", "python", "-c", "import sys; print(sys.prefix)").stdout.strip() == str(venv)
    tool("rollback")
    assert json.loads(tool("remove", "mine", "--json").stdout)["removed"] == "mine"
    assert (venv / "bin" / "python").exists()


def test_adopt_reads_torchs_cuda_without_importing_it(tool: Tool, tmp_path: Path) -> None:
    """adopt names the CUDA release the venv's torch is built for from torch/version.py (what torch.version.cuda
    returns) and never imports torch (seconds of CPU, and every CUDA library loaded, on a GPU venv): this one raises."""
    venv = tmp_path / "gpu"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", venv], check=True)
    torch = next(venv.glob("lib/python3*/site-packages")) / "torch"
    torch.mkdir()
    (torch / "__init__.py").write_text("raise ImportError('adopt imported torch')\n")
    (torch / "version.py").write_text(
        "from typing import Optional\n\n__version__ = '2.9.1+cu128'\ndebug = False\n"
        "cuda: Optional[str] = '12.8'\nhip: Optional[str] = None\n"
    )
    tool("adopt", "gpu", str(venv), "--no-lock")
    assert tool.envs()["gpu"]["cuda"] == "12.8"


def test_missing_python_and_a_stale_lock_are_clear_errors(tool: Tool, stack, tmp_path: Path) -> None:
    done = tool("create", "cu130", "--python", "3.99", check=False)
    assert done.returncode == 7 and "Python 3.99 was not found" in done.stderr and "hint:" in done.stderr
    lockfile = tmp_path / "pylock.toml"
    locked = tool(
        "lock", "cu130", "--python", stacks.PYTHON, "-o", str(lockfile), *stacks.index_args(stack["cu130"])
    )
    assert locked.returncode == 0
    changed = tmp_path / "cu130.toml"
    changed.write_text(
        (Path(__file__).parent.parent.parent / "profiles/cu130.toml").read_text() + "\n# edited\n"
    )
    refused = tool("create", str(changed), "--python", PY, "--lock", str(lockfile), check=False)
    assert refused.returncode == 7 and "locked from another version of profile" in refused.stderr
    reused = tool(
        "create", "cu130", "--python", PY, "--lock", str(lockfile), *stacks.index_args(stack["cu130"])
    )
    assert reused.returncode == 0


def test_gc_removes_leftovers(tool: Tool, stack) -> None:
    create(tool, stack, "cu128")
    leftover = tool.home / "builds" / "cu130-20260101T000000Z-dead00"
    (leftover / "venv").mkdir(parents=True)
    (leftover / ".building").write_text("999999999")
    removed = json.loads(tool("gc", "--json").stdout)["removed"]
    assert removed == ["builds/cu130-20260101T000000Z-dead00"] and not leftover.exists()


@pytest.mark.network
def test_real_cuda_runtime_packages_from_the_public_registry(tool: Tool, tmp_path: Path) -> None:
    """cu128 with nvidia-cuda-runtime-cu12, cu130 with nvidia-cuda-runtime 13.x: a few MB each, uv's default index."""
    profiles = {
        "rt128": ('cuda = "12.8"', 'nvidia-cuda-runtime-cu12 = "==12.8.*"', "nvidia-cuda-runtime-cu12"),
        "rt130": ('cuda = "13.0"', 'nvidia-cuda-runtime = "==13.0.*"', "nvidia-cuda-runtime"),
    }
    for name, (cuda, requirement, dist) in profiles.items():
        path = tmp_path / f"{name}.toml"
        path.write_text(
            f'schema = 1\nname = "{name}"\n{cuda}\n[packages]\n{requirement}\n[checks]\nrequired = ["imports", "driver"]\n'
        )
        tool("create", str(path), "--python", PY)
        code = f"import importlib.metadata as m; print(m.version('{dist}'))"
        version = tool("run", name, "--", "python", "-c", code).stdout.strip()
        assert version.startswith(cuda.split('"')[1])
    assert tool.envs()["rt130"]["active"]
    tool("rollback")
    assert tool.envs()["rt128"]["active"]


def test_a_malformed_lock_is_one_line_and_changes_nothing(tool: Tool, stack, tmp_path: Path) -> None:
    create(tool, stack, "cu128")
    bad = tmp_path / "pylock.toml"
    bad.write_text("lock-version = \n")
    done = tool("create", "cu130", "--python", PY, "--lock", str(bad), check=False)
    lines = done.stderr.strip().splitlines()
    assert (
        done.returncode == 2
        and lines[-2].startswith("error: ")
        and str(bad) in lines[-2]
        and "PEP 751" in lines[-2]
    )
    assert "Traceback" not in done.stderr
    listed = tool.envs()
    assert set(listed) == {"cu128"} and listed["cu128"]["active"] and len(tool.builds()) == 1
