"""An adopted environment whose venv is gone (deleted, moved, a mount that is not there today). The drift scan read the
missing site-packages as an empty venv: `check --only drift` PASSed ("0 files of 0 distributions match"), `restore`
said "nothing differs from its lock", and `lock --env` replaced the environment's lock with one of no distribution at
all; with the venv back, that lock made every distribution in it extra (restore uninstalls extras). Now the scan says
the venv is gone: the drift check is an ERROR, restore and lock --env refuse (exit 7), and the lock stays as it was."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import tiny
from launch import run_provision


def test_a_venv_that_is_gone_is_never_judged_as_an_empty_one(index_server, tmp_path: Path) -> None:
    served = tiny.index(index_server)
    venv = tmp_path / "venv"
    subprocess.run(
        [sys.executable, "-m", "uv", "venv", "-q", "--python", sys.executable, str(venv)],
        check=True,
        capture_output=True,
    )
    subprocess.run(
        [
            sys.executable,
            "-m",
            "uv",
            "pip",
            "install",
            "-q",
            "--python",
            str(venv / "bin" / "python"),
            "--index-url",
            served.url,
            "alpha==1.0",
        ],
        check=True,
        capture_output=True,
    )
    home = tmp_path / "home"
    env = {**os.environ, "PROVISION_HOME": str(home), "PROVISION_INDEX_DEFAULT": served.url}
    done = run_provision("adopt", "x", str(venv), "--json", env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    lock = Path(json.loads(done.stdout)["lock"])
    locked = lock.read_text()
    assert 'name = "alpha"' in locked

    shutil.move(venv, tmp_path / "moved")  # gone for now
    done = run_provision("check", "x", "--only", "drift", "--json", env=env, timeout=60)
    (drift,) = json.loads(done.stdout)["checks"]
    assert done.returncode == 1 and drift["status"] == "error" and "site-packages" in drift["reason"], drift
    for args in (("restore", "x"), ("restore", "x", "--dry-run"), ("lock", "--env", "x")):
        done = run_provision(*args, env=env, timeout=60)
        lines = done.stderr.strip().splitlines()
        assert done.returncode == 7 and "Traceback" not in done.stderr, (args, done.stderr)
        assert lines[-2].startswith(f"error: {venv} has no site-packages"), (args, done.stderr)
    assert lock.read_text() == locked, "the lock of what the venv held is kept"

    shutil.move(tmp_path / "moved", venv)  # back: nothing of it is extra
    done = run_provision("restore", "x", "--dry-run", env=env, timeout=60)
    assert done.returncode == 0 and "nothing differs" in done.stdout, done.stdout + done.stderr


def test_a_baseline_never_runs_on_the_systems_python_when_the_venv_is_gone(
    index_server, tmp_path: Path
) -> None:
    """The baseline runs the profile's command with the venv's bin first on PATH: with the venv gone, `python` was the
    system's, and its figure was stored as the environment's (exit 0). Now the drift stamp's scan refuses first."""
    served = tiny.index(index_server)
    venv = tmp_path / "venv"
    subprocess.run(
        [sys.executable, "-m", "uv", "venv", "-q", "--python", sys.executable, str(venv)],
        check=True,
        capture_output=True,
    )
    subprocess.run(
        [
            sys.executable,
            "-m",
            "uv",
            "pip",
            "install",
            "-q",
            "--python",
            str(venv / "bin" / "python"),
            "--index-url",
            served.url,
            "alpha==1.0",
        ],
        check=True,
        capture_output=True,
    )
    profile = tiny.profile(
        tmp_path,
        extra='[baseline]\ncommand = ["python", "-c", "print(\'decode 5.0 tok/s\')"]\n'
        "pattern = 'decode ([\\d.]+) tok/s'\nunit = \"tok/s\"\n",
    )
    home = tmp_path / "home"
    env = {**os.environ, "PROVISION_HOME": str(home), "PROVISION_INDEX_DEFAULT": served.url}
    assert (
        run_provision(
            "adopt", "x", str(venv), "--profile", str(profile), "--no-lock", env=env, timeout=120
        ).returncode
        == 0
    )
    done = run_provision("check", "x", env=env, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    shutil.move(venv, tmp_path / "moved")
    done = run_provision("baseline", "x", env=env, timeout=120)
    assert done.returncode == 7 and f"{venv} has no site-packages" in done.stderr, done.stdout + done.stderr
    build = next((home / "builds").iterdir())
    assert json.loads((build / "env.json").read_text()).get("baselines") in (None, []), "nothing stored"
