"""`shell-env` in a real bash: repeated evals do not pile up PATH, and both ways out (the provision_deactivate
function, `eval "$(provision shell-env --undo)"`) put back what the shell had."""

from __future__ import annotations

import subprocess
from pathlib import Path

import launch
import tiny


def bash(tool: tiny.Tool, script: str) -> list[str]:
    env = launch.environment(
        tool.env(
            {
                "PATH": f"{Path(launch.BINARY).parent}:/usr/bin:/bin",
                "CUDA_HOME": "/opt/before",
                "VIRTUAL_ENV": None,
            }
        )
    )
    done = subprocess.run(
        ["bash", "--norc", "-c", script], capture_output=True, text=True, timeout=120, env=env
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


def test_evals_do_not_pile_up_and_can_be_undone(tmp_path: Path, index_server, provision_bin: str) -> None:
    tool = tiny.make_tool(tmp_path, provision_bin, tiny.index(index_server))
    tool.create("tiny", "--no-checks")
    tool.create("tiny", "--name", "other", "--no-checks")
    show = 'echo "$PATH|${VIRTUAL_ENV-unset}|${CUDA_HOME-unset}"'
    lines = bash(
        tool,
        f"""{show}
eval "$(provision shell-env tiny)"; {show}
eval "$(provision shell-env tiny)"; eval "$(provision shell-env other)"; {show}
provision_deactivate; {show}; type provision_deactivate >/dev/null 2>&1 && echo defined || echo gone
eval "$(provision shell-env tiny)"; eval "$(provision shell-env --undo)"; {show}
eval "$(provision shell-env --undo)"; {show}""",
    )
    before, first, third, deactivated, function, undone, twice = lines
    path, venv, _ = first.split("|")
    assert venv.endswith("/venv") and path == f"{venv}/bin:{before.split('|')[0]}"
    path, venv, _ = third.split("|")
    assert path.count("/venv/bin") == 1 and path == f"{venv}/bin:{before.split('|')[0]}" and "other-" in venv
    assert deactivated == before and function == "gone"
    assert undone == before and twice == before  # --undo with nothing evaluated changes nothing
    assert before.endswith("|unset|/opt/before")
