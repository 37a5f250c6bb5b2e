"""`--python X.Y` finds what uv finds, and what pyenv installed without making it active (its shim exits 127, which
stops uv's own search); `create --lock` makes the venv with the lock's Python unless told otherwise."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import tiny

from provision.envs.interpreters import find_python
from provision.errors import EnvError
from provision.stacks import uvtool

VERSION = f"{sys.version_info[0]}.{sys.version_info[1]}"
FULL = ".".join(map(str, sys.version_info[:3]))


def pyenv_root(tmp_path: Path) -> Path:
    """A pyenv root as `pyenv install` leaves it, with version FULL installed but not active: its shim says so and
    exits 127, as pyenv's do (the one part not made for real: pyenv itself is not a dependency)."""
    root = tmp_path / "pyenv"
    (root / "shims").mkdir(parents=True)
    (root / "versions" / FULL / "bin").mkdir(parents=True)
    (root / "versions" / "miniconda3-latest" / "bin").mkdir(parents=True)  # not a release: never chosen first
    os.symlink(Path(sys._base_executable).resolve(), root / "versions" / FULL / "bin" / f"python{VERSION}")
    for name in ("python", "python3", f"python{VERSION}"):
        shim = root / "shims" / name
        shim.write_text(f"#!/bin/sh\necho 'pyenv: {name}: command not found' >&2\nexit 127\n")
        shim.chmod(0o755)
    return root


def test_a_pyenv_version_that_is_not_active_is_found(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = pyenv_root(tmp_path)
    monkeypatch.chdir(tmp_path)  # uv would take a .venv of the folder it runs in
    monkeypatch.setenv("PATH", str(root / "shims"))
    monkeypatch.setenv("PYENV_ROOT", str(root))
    # no uv-managed interpreter either
    monkeypatch.setenv("UV_PYTHON_INSTALL_DIR", str(tmp_path / "uv-pythons"))
    alone = subprocess.run(
        [uvtool.binary(), "python", "find", VERSION, "--no-project"],
        capture_output=True,
        text=True,
        timeout=60,
        env=uvtool.environment(),
    )
    assert alone.returncode != 0  # uv's search stops at the inactive shim: what users met as "not found"
    path, version = find_python(VERSION)
    assert version == VERSION and path == root / "versions" / FULL / "bin" / f"python{VERSION}"
    with pytest.raises(EnvError, match=r"Python 3\.99 was not found.*pyenv") as raised:
        find_python("3.99")
    assert "pyenv install 3.99" in raised.value.hint


def test_what_uv_finds_comes_first(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYENV_ROOT", str(pyenv_root(tmp_path)))
    found = subprocess.run(
        [uvtool.binary(), "python", "find", VERSION, "--no-project"],
        capture_output=True,
        text=True,
        timeout=60,
        env=uvtool.environment(),
    )
    if found.returncode != 0:
        pytest.skip(f"uv finds no Python {VERSION} on this PATH")
    assert find_python(VERSION)[0] == Path(found.stdout.strip())


def test_create_with_a_lock_uses_the_locks_python(tmp_path: Path, index_server, provision_bin: str) -> None:
    """The profile asks for a Python this machine lacks; the lock was made for this one: create takes the lock's."""
    tool = tiny.make_tool(tmp_path, provision_bin, tiny.index(index_server))
    tiny.profile(tool.profiles, "far", extra="")
    text = (tool.profiles / "far.toml").read_text().replace('cuda = "13.0"', 'cuda = "13.0"\npython = "3.99"')
    (tool.profiles / "far.toml").write_text(text)
    lock = tmp_path / "pylock.far.toml"
    tool("lock", "far", "--python", VERSION, "-o", str(lock))
    done = tool("create", "far", "--lock", str(lock), "--no-checks", "--json")
    assert json.loads(done.stdout)["passed"]
    assert tool.envs()["far"]["python"] == VERSION
    refused = tool(
        "create", "far", "--name", "far2", "--lock", str(lock), "--python", "3.99", "--no-checks", check=False
    )
    # an explicit --python still wins
    assert refused.returncode == 7 and "Python 3.99 was not found" in refused.stderr
