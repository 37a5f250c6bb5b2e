"""What Python a venv has was read from whatever its interpreter printed: a venv whose sitecustomize.py greets on stdout
(a cluster's banner, a debug print) was adopted with `python = "welcome to the cluster\\n3.11"` in env.json (shown by
`envs`, written into its lock, handed to uv as a Python version), and an executable that prints no version at all was
registered as Python "hello". Now the version is asked without the site hooks (`-S`) and must be one: X.Y, else one
line naming the interpreter and what it printed (exit 7), nothing registered."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from launch import run_provision

PY = f"{sys.version_info[0]}.{sys.version_info[1]}"


def test_the_python_version_is_read_past_a_banner_and_must_be_one(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    subprocess.run(
        [sys.executable, "-m", "uv", "venv", "-q", "--python", sys.executable, str(venv)],
        check=True,
        capture_output=True,
    )
    site = next(venv.glob("lib/python3*/site-packages"))
    (site / "sitecustomize.py").write_text('print("welcome to the cluster")\n')
    home = tmp_path / "home"
    done = run_provision("--home", str(home), "adopt", "x", str(venv), "--no-lock", "--json", timeout=60)
    assert done.returncode == 0, done.stderr
    listed = json.loads(run_provision("--home", str(home), "envs", "--json", timeout=60).stdout)
    assert [e["python"] for e in listed["environments"]] == [PY], listed

    fake = tmp_path / "fake"
    (fake / "bin").mkdir(parents=True)
    (fake / "bin" / "python").write_text("#!/bin/sh\necho hello\n")
    (fake / "bin" / "python").chmod(0o755)
    done = run_provision("--home", str(home), "adopt", "y", str(fake), "--no-lock", timeout=60)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 7 and len(lines) == 2 and "Traceback" not in done.stderr, done.stderr
    assert lines[0] == f"error: {fake / 'bin' / 'python'} printed no Python version (it printed 'hello')", (
        lines[0]
    )
    assert not (home / "envs" / "y").exists()


def test_torchs_cuda_is_read_past_a_banner(tmp_path: Path) -> None:
    """A torch the venv imports from outside its own site-packages (a .pth naming another folder, a venv that sees
    the system's packages) is asked for its CUDA by importing it: the banner came back as part of the CUDA release."""
    venv = tmp_path / "venv"
    subprocess.run(
        [sys.executable, "-m", "uv", "venv", "-q", "--python", sys.executable, str(venv)],
        check=True,
        capture_output=True,
    )
    site = next(venv.glob("lib/python3*/site-packages"))
    (site / "sitecustomize.py").write_text('print("welcome to the cluster")\n')
    elsewhere = tmp_path / "shared" / "torch"
    elsewhere.mkdir(parents=True)
    (elsewhere / "__init__.py").write_text("from torch import version\n")
    (elsewhere / "version.py").write_text("cuda = '12.8'\n")
    (site / "shared.pth").write_text(f"{elsewhere.parent}\n")
    home = tmp_path / "home"
    assert (
        run_provision("--home", str(home), "adopt", "x", str(venv), "--no-lock", timeout=60).returncode == 0
    )
    listed = json.loads(run_provision("--home", str(home), "envs", "--json", timeout=60).stdout)
    assert [e["cuda"] for e in listed["environments"]] == ["12.8"], listed
