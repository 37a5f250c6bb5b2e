"""Lock files a damaged or hostile home holds as links: HOME/.lock and BUILD/.env.json.lock are opened without following
a link, so no command makes (or writes its pid into) a file wherever the link leads; one error naming it, exit 7."""

from __future__ import annotations

from pathlib import Path

import tiny

TOOL_WITH_ENV = True  # conftest's `tool`: a home with profile tiny served on 127.0.0.1, environment tiny made


COMMANDS = [
    ("check", "tiny", "--only", "drift"),
    ("switch", "tiny"),
    ("restore", "tiny", "--no-checks"),
    ("gc",),
]


def test_home_lock_as_a_link_out_is_never_followed(tool: tiny.Tool, tmp_path: Path) -> None:
    """Each command in turn on one build, HOME/.lock made a link out anew before each (none of them changes the build:
    a build per command made four environments to refuse the same link)."""
    outside = tmp_path / "outside" / "made-by-provision"
    outside.parent.mkdir()
    for command in COMMANDS:
        (tool.home / ".lock").unlink(missing_ok=True)
        (tool.home / ".lock").symlink_to(outside)
        done = tool(*command, check=False)
        assert not outside.exists(), f"{command[0]} made a file through HOME/.lock"
        if command[0] != "check":  # check takes HOME's lock only to store its results
            assert done.returncode == 7 and "Traceback" not in done.stderr, (command, done.stderr)
            assert f"{tool.home / '.lock'} is not a file provision wrote" in done.stderr, (
                command,
                done.stderr,
            )
            assert "\nhint: remove it" in done.stderr, (command, done.stderr)


def test_env_json_lock_as_a_link_out_is_never_followed(tool: tiny.Tool, tmp_path: Path) -> None:
    (build,) = (tool.home / "builds").iterdir()
    outside = tmp_path / "outside-file"
    (build / ".env.json.lock").unlink(missing_ok=True)
    (build / ".env.json.lock").symlink_to(outside)
    done = tool("check", "tiny", "--only", "drift", check=False)
    assert not outside.exists(), "check made a file through BUILD/.env.json.lock"
    assert done.returncode == 7 and "Traceback" not in done.stderr, done.stderr
    assert f"{build / '.env.json.lock'} is not a file provision wrote" in done.stderr


def test_switches_and_rollbacks_at_once_leave_one_consistent_home(tmp_path: Path) -> None:
    """Twelve switch and rollback processes at once (a second copy of provision, many times over): each takes HOME's
    lock, so every one that says it switched is in the history, the active pointer names an environment whose venv
    is there and is the history's last name, state.json reads, and no staged file is left behind."""
    import json
    import os
    import subprocess
    import sys

    from launch import argv, environment

    home = tmp_path / "home"
    for name in ("a", "b"):
        venv = tmp_path / f"venv-{name}"
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
        adopted = subprocess.run(
            argv(("adopt", name, venv, "--no-lock", "--home", home)),
            capture_output=True,
            text=True,
            timeout=120,
            env=environment(),
        )
        assert adopted.returncode == 0, adopted.stderr
    commands = [("switch", "a"), ("switch", "b"), ("rollback",)] * 4
    running = [
        subprocess.Popen(
            argv((*c, "--home", home)),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=environment(),
        )
        for c in commands
    ]
    outcomes = [(p.wait(timeout=120), p.stdout.read() + p.stderr.read()) for p in running]  # type: ignore[union-attr]
    for code, said in outcomes:  # a rollback may find nothing to roll back to yet: exit 7, one clear line
        assert code == 0 or (code == 7 and "nothing to roll back to" in said), said
        assert "Traceback" not in said, said
    switched = sum(1 for code, _ in outcomes if code == 0)
    state = json.loads((home / "state.json").read_text())
    assert os.readlink(home / "active") == os.path.join("envs", state["history"][-1]), state
    assert (home / "active" / "venv" / "bin" / "python").exists()
    assert len(state["history"]) >= switched, (switched, state)
    assert sorted(p.name for p in home.iterdir()) == [
        ".lock",
        "active",
        "builds",
        "envs",
        "locks",
        "state.json",
    ]
