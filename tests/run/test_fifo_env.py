"""A pipe where provision, Python or uv reads a file of an environment or of the home (a .dist-info file, pyvenv.cfg,
a start-up .pth, env.json, state.json, the lock env.json names, the lock files): every command answers at once (a
finding, a check ERROR, or one error line naming the file), never waits on it. Each run has its own short timeout, so
a regression fails here rather than hanging the suite."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
import tiny
from launch import run_provision

pytestmark = pytest.mark.timeout(300)
QUICK = 30  # seconds any one command may take here: a hang is a failure, not a stuck suite


def run(tool: tiny.Tool, *args: str) -> subprocess.CompletedProcess[str]:
    try:
        return run_provision(*args, env=tool.env(), timeout=QUICK)
    except subprocess.TimeoutExpired:
        pytest.fail(f"provision {' '.join(args)} waited on a pipe for {QUICK} s")


def swap_for_pipe(path: Path) -> None:
    if path.exists():
        path.unlink()
    path.parent.mkdir(parents=True, exist_ok=True)
    os.mkfifo(path)


def site_of(tool: tiny.Tool) -> Path:
    return next((tool.home / "envs" / "tiny" / "venv").resolve().glob("lib/python3*/site-packages"))


IN_VENV = [
    "alpha-1.0.dist-info/METADATA",
    "alpha-1.0.dist-info/RECORD",
    "alpha-1.0.dist-info/WHEEL",
    "alpha-1.0.dist-info/direct_url.json",
    "beta-1.0.egg-info/PKG-INFO",
    "_virtualenv.pth",
    "../../../pyvenv.cfg",
]
WHOLE = ("alpha-1.0.dist-info/METADATA", "../../../pyvenv.cfg")


def test_a_pipe_in_a_dist_info_or_the_venv_never_blocks(
    index_server, provision_bin: str, tmp_path: Path
) -> None:
    tool = tiny.tool_with_env(tmp_path, provision_bin, tiny.index(index_server))
    site = site_of(tool)
    build = (tool.home / "envs" / "tiny").resolve()
    for relative in IN_VENV:
        target = Path(os.path.normpath(site / relative))
        saved = target.read_bytes() if target.is_file() else None
        swap_for_pipe(target)
        shown = target.relative_to(build)
        drift = run(tool, "check", "tiny", "--only", "drift", "--json")
        assert drift.returncode == 0 and "Traceback" not in drift.stderr, (shown, drift.stderr)
        if "dist-info" in relative and not relative.endswith(("WHEEL", "direct_url.json")):
            finding = json.loads(drift.stdout)["checks"][0]
            assert finding["status"] == "warn" and "alpha-1.0.dist-info" in finding["reason"], (
                shown,
                finding,
            )
        checks = run(tool, "check", "tiny", "--json")
        imports = next(r for r in json.loads(checks.stdout)["checks"] if r["id"] == "imports")
        assert checks.returncode == 1 and imports["status"] == "error" and str(target) in imports["reason"], (
            shown,
            imports,
        )
        # every command on two of them; the drift check, the checks and the plan on all
        whole = relative in WHOLE
        for args in (["restore", "tiny", "--dry-run"], ["restore", "tiny"])[: 2 if whole else 1]:
            refused = run(tool, *args)
            assert refused.returncode == 7 and str(target) in refused.stderr, (shown, args, refused.stderr)
            assert len(refused.stderr.strip().splitlines()) == 2
        if whole:
            report = run(tool, "report", "--env", "tiny", "--json")
            assert report.returncode in (0, 1) and "Traceback" not in report.stderr, (shown, report.stderr)
        assert not target.is_file() and target.exists()  # the pipe is left as it was: nothing was changed
        target.unlink()
        if saved is not None:
            target.write_bytes(saved)
    assert run(tool, "check", "tiny").returncode == 0


def test_a_pipe_for_a_file_of_the_home_never_blocks(index_server, provision_bin: str, tmp_path: Path) -> None:
    tool = tiny.tool_with_env(tmp_path, provision_bin, tiny.index(index_server))
    build = (tool.home / "envs" / "tiny").resolve()
    env_json = build / "env.json"
    record = env_json.read_bytes()
    swap_for_pipe(env_json)
    for args in (["envs"], ["check", "tiny"], ["restore", "tiny"]):
        done = run(tool, *args)
        assert done.returncode == 7 and str(env_json) in done.stderr and "Traceback" not in done.stderr, (
            args,
            done.stderr,
        )
    done = run(tool, "gc")  # nothing to clean: the build is still named
    assert done.returncode == 0 and build.is_dir() and "Traceback" not in done.stderr, done.stderr
    env_json.unlink()
    env_json.write_bytes(record)

    lock_of_record = build / ".env.json.lock"
    swap_for_pipe(lock_of_record)
    done = run(tool, "check", "tiny")
    assert done.returncode == 7 and str(lock_of_record) in done.stderr, done.stderr
    lock_of_record.unlink()

    state = tool.home / "state.json"
    swap_for_pipe(state)
    done = run(tool, "switch", "tiny")
    assert done.returncode == 7 and str(state) in done.stderr, done.stderr
    state.unlink()

    home_lock = tool.home / ".lock"
    swap_for_pipe(home_lock)
    done = run(tool, "switch", "tiny")
    assert done.returncode == 7 and str(home_lock) in done.stderr, done.stderr
    home_lock.unlink()

    named = json.loads(record)["lock"]
    (tmp_path / "lock.fifo").unlink(missing_ok=True)
    os.mkfifo(tmp_path / "lock.fifo")
    env_json.write_text(json.dumps({**json.loads(record), "lock": str(tmp_path / "lock.fifo")}))
    alpha = next(site_of(tool).glob("alpha/__init__.py"))
    alpha.write_text("changed = True\n")  # something to restore, so that restore reads the lock
    done = run(tool, "restore", "tiny")
    assert done.returncode != 0 and "Traceback" not in done.stderr, done.stderr
    env_json.write_text(json.dumps({**json.loads(record), "lock": named}))
    assert run(tool, "restore", "tiny").returncode == 0


def test_the_lock_files_are_never_made_through_a_link(
    index_server, provision_bin: str, tmp_path: Path
) -> None:
    tool = tiny.tool_with_env(tmp_path, provision_bin, tiny.index(index_server))
    build = (tool.home / "envs" / "tiny").resolve()
    outside = tmp_path / "outside"
    outside.mkdir()
    for link, args in (
        (build / ".env.json.lock", ["check", "tiny"]),
        (tool.home / ".lock", ["switch", "tiny"]),
    ):
        link.unlink(missing_ok=True)
        link.symlink_to(outside / link.name)
        done = run(tool, *args)
        assert done.returncode == 7 and str(link) in done.stderr and "Traceback" not in done.stderr, (
            done.stderr
        )
        assert not (outside / link.name).exists()
        link.unlink()
