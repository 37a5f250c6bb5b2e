"""SIGTERM and SIGHUP (timeout(1), systemd stopping a unit, Ansible's async timeout, a terminal closed) end every
command as Ctrl-C does: a create's build removed and the active environment untouched, a lock's work folder and the uv
started ahead gone, exit 130. They killed provision where it stood, as kill -9 does, leaving the build for gc. A stop
signal ignored (nohup) stays ignored. Real provision, real uv, a real index on 127.0.0.1 held while the signal lands."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
from pathlib import Path

import launch
import pytest
import stacks
import tiny
from launch import interrupt

PY = sys.executable
STOPS = [signal.SIGTERM, signal.SIGHUP]


@pytest.fixture
def stack(index_server):
    return {"cu130": stacks.cu130(index_server), "cu128": stacks.cu128(index_server)}


def create(tool: tiny.Tool, stack, profile: str, **popen: object) -> subprocess.Popen[str]:
    # a cache of its own, so that uv must download from the held index while the signal lands
    argv = launch.argv(("create", profile, "--python", PY, *stacks.index_args(stack[profile])))
    env = launch.environment(tool.env({"UV_CACHE_DIR": str(tool.home.parent / "uv-cache-fresh")}))
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, **popen)


@pytest.mark.parametrize("stop", STOPS, ids=lambda s: s.name)
def test_a_stop_signal_during_create_removes_the_build(
    tmp_path: Path, provision_bin: str, stack, stop: signal.Signals
) -> None:
    tool = tiny.Tool(provision_bin, tmp_path / "home")
    tool("create", "cu128", "--python", PY, *stacks.index_args(stack["cu128"]), check=True)
    index = stack["cu130"]["default"]
    held = index.hold = threading.Event()
    earlier = len(index.requests)
    process = create(tool, stack, "cu130")
    err = interrupt(process, held, lambda: len(tool.builds()) >= 2 and len(index.requests) > earlier, stop)
    assert process.returncode == 130 and "interrupted" in err and "Traceback" not in err, err
    assert len(tool.builds()) == 1 and tool.envs()["cu128"]["active"], tool.builds()


@pytest.mark.parametrize("stop", STOPS, ids=lambda s: s.name)
def test_a_stop_signal_during_a_lock_leaves_no_work_folder(
    tool: tiny.Tool, tmp_path: Path, stop: signal.Signals
) -> None:
    temp = tmp_path / "tmp"
    temp.mkdir()
    output = tmp_path / "pylock.tiny.toml"
    env = {"TMPDIR": str(temp), "UV_CACHE_DIR": str(tmp_path / "fresh-cache")}
    tool("lock", "tiny", "-o", str(output), env=env, check=True)  # a record: made again, its uv starts ahead
    before = output.read_bytes()
    held = tool.served.hold = threading.Event()
    earlier = len(tool.served.requests)
    process = tool.popen("lock", "tiny", "-o", str(output), env=env)
    err = interrupt(process, held, lambda: len(tool.served.requests) > earlier, stop)
    tool.served.hold = None
    assert process.returncode == 130 and "interrupted" in err, err
    assert not list(temp.glob("provision-lock-*")) and output.read_bytes() == before


def test_a_stop_signal_ignored_stays_ignored(tmp_path: Path, provision_bin: str, stack) -> None:
    """nohup's promise: a SIGHUP or SIGTERM the caller ignores is never taken as Ctrl-C."""
    tool = tiny.Tool(provision_bin, tmp_path / "home")
    index = stack["cu128"]["default"]
    held = index.hold = threading.Event()

    def ignoring() -> None:
        signal.signal(signal.SIGHUP, signal.SIG_IGN)

    process = create(tool, stack, "cu128", preexec_fn=ignoring)
    err = interrupt(process, held, lambda: len(index.requests) > 0, signal.SIGHUP)
    assert process.returncode == 0, err
    assert tool.envs()["cu128"]["active"]
