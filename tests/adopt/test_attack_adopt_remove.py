"""`provision adopt X VENV` and `provision remove X` at once. adopt registers X under HOME's lock, then matches what the
venv holds to wheels on the index (seconds to minutes, the lock released) and writes X's lock into its build folder. A
remove in between takes the name and deletes the build; adopt then made that build folder again (its atomic write
makes the folder it writes in), wrote its lock and an env.json into it and said `adopted` (exit 0) of an environment
that no longer existed: a folder in builds/ that no name leads to. Now the lock is written under HOME's lock, only
while X still leads to that build: adopt says X was removed meanwhile (exit 7) and builds/ holds nothing of it."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import tiny
from launch import popen_provision, run_provision


def test_remove_while_adopt_matches_leaves_no_build_behind(index_server, tmp_path: Path) -> None:
    served = tiny.index(index_server)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "uv", "venv", "-q", str(venv)], check=True, capture_output=True)
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
    served.requests.clear()
    home = tmp_path / "home"
    env = {
        **os.environ,
        "PROVISION_HOME": str(home),
        "PROVISION_INDEX_DEFAULT": served.url,
        "PROVISION_HTTP_TIMEOUT": "30",
    }
    served.hold = threading.Event()
    adopting = popen_provision("adopt", "x", str(venv), env=env)
    try:
        deadline = time.time() + 60
        while not served.requests and time.time() < deadline and adopting.poll() is None:
            time.sleep(0.05)
        assert served.requests, "adopt never asked the index"
        removed = run_provision("remove", "x", env=env, timeout=60)
        assert removed.returncode == 0, removed.stderr
    finally:
        served.hold.set()
    _, err = adopting.communicate(timeout=120)
    lines = err.strip().splitlines()
    assert adopting.returncode == 7 and "Traceback" not in err and "internal error" not in err, err
    assert lines[-2] == "error: x was removed while its lock was being made; nothing was written", err
    assert list((home / "builds").iterdir()) == [], list((home / "builds").iterdir())
    assert (venv / "bin" / "python").exists(), "the adopted venv itself is never touched"
    assert run_provision("envs", "--json", env=env).returncode == 0
