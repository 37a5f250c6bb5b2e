"""`remove` takes HOME's lock only to drop the name and set the build aside; the files are deleted after it is
released, so a switch or rollback during the removal of a large environment does not wait for it."""

from __future__ import annotations

import fcntl
import signal
import subprocess
import time
from pathlib import Path

import tiny
from launch import run_provision


def fill(folder: Path, files: int) -> None:
    """Many small files: what makes a real 7 GB environment slow to delete is its file count."""
    for top in range(files // 500):
        sub = folder / f"pkg{top}"
        sub.mkdir(parents=True)
        for i in range(500):
            (sub / f"m{i}.py").write_bytes(b"x")


def held_aside(home: Path, aside: Path, remover: subprocess.Popen[str]) -> None:
    """Stop `remover` (SIGSTOP) once it deletes the set-aside build with HOME's lock released: a deletion as slow as
    the test needs, without timing it."""
    deadline = time.monotonic() + 120
    with open(home / ".lock", "a+") as lock:
        while time.monotonic() < deadline and remover.poll() is None:
            if aside.exists():
                try:
                    fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except OSError:
                    continue
                fcntl.flock(lock, fcntl.LOCK_UN)
                remover.send_signal(signal.SIGSTOP)
                return
            time.sleep(0.001)
    remover.kill()
    raise AssertionError(
        f"remove never deleted {aside.name} with HOME's lock released (exit {remover.poll()})"
    )


def test_switch_and_rollback_during_a_large_remove_do_not_wait(
    tmp_path: Path, index_server, provision_bin: str
) -> None:
    tool = tiny.make_tool(tmp_path, provision_bin, tiny.index(index_server))
    for name in ("big", "other", "third"):
        tool.create("tiny", "--name", name, "--no-checks")
    big = tool.home / "builds" / next(b for b in tool.builds() if b.startswith("big-"))
    fill(big / "venv" / "junk", 3_000)
    remover = tool.popen("remove", "big")
    aside = big.with_name(f".removing-{big.name}")
    held_aside(tool.home, aside, remover)
    try:
        switched = run_provision("switch", "other", timeout=60, env=tool.env())
        rolled = run_provision("rollback", timeout=60, env=tool.env())
        assert aside.exists()  # still being deleted: the switch and the rollback did not wait for it
    finally:
        remover.send_signal(signal.SIGCONT)
    _, err = remover.communicate(timeout=300)
    assert remover.returncode == 0, err
    assert switched.returncode == 0 and rolled.returncode == 0, switched.stderr + rolled.stderr
    assert "active: third (was other)" in rolled.stderr
    assert not aside.exists() and not big.exists() and set(tool.envs()) == {"other", "third"}
    assert "deleting big's files" in err and "removed big" in err


def test_a_killed_remove_leaves_its_aside_folder_to_gc(
    tmp_path: Path, index_server, provision_bin: str
) -> None:
    tool = tiny.make_tool(tmp_path, provision_bin, tiny.index(index_server))
    tool.create("tiny", "--name", "big", "--no-checks")
    tool.create("tiny", "--name", "other", "--no-checks")
    big = tool.home / "builds" / next(b for b in tool.builds() if b.startswith("big-"))
    fill(big / "venv" / "junk", 3_000)
    remover = tool.popen("remove", "big")
    aside = big.with_name(f".removing-{big.name}")
    held_aside(tool.home, aside, remover)
    remover.kill()
    remover.wait(timeout=60)
    assert aside.exists()
    assert set(tool.envs()) == {"other"}
    done = tool("gc")
    assert not aside.exists() and f"builds/{aside.name}" in done.stderr
