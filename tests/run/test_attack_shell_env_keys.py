"""`eval "$(provision shell-env --undo)"` (and a second `shell-env` eval) read the names an earlier eval set from the
shell's _PROVISION_KEYS and _PROVISION_UNSET and wrote them, unquoted, into `unset NAME` and `export NAME=...` lines: a
value such as `X;id` or `$(id)` there (a variable inherited through `sudo -E`, a CI job's environment, a damaged shell
profile) became a command the eval ran. Only shell variable names are taken from them now; anything else is passed
over, and the lines are what they would be without it."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from launch import run_provision


def test_names_from_the_shells_variables_never_run_as_commands(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    hostile = {
        "_PROVISION_KEYS": f"FOO X;touch${{IFS}}{marker} $(touch${{IFS}}{marker})",
        "_PROVISION_UNSET": f"FOO X;touch${{IFS}}{marker} $(touch${{IFS}}{marker})",
        "_PROVISION_SAVED_X;touch": "1",
    }
    done = run_provision(
        "--home", str(tmp_path / "home"), "shell-env", "--undo", env={**os.environ, **hostile}, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert "touch" not in done.stdout and "unset FOO" in done.stdout, done.stdout
    subprocess.run(
        ["bash", "-c", done.stdout],
        env={**os.environ, **{k: v for k, v in hostile.items() if ";" not in k}},
        check=True,
        capture_output=True,
    )
    assert not marker.exists(), "the eval ran a command out of a variable's value"
