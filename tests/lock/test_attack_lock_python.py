"""`create PROFILE --lock LOCK` makes the venv with the Python the lock says it was resolved for ([tool.provision]
python, "3.12"). That value was taken as it stood and handed to find_python, where a path is an interpreter to run:
a lock saying python = "/some/script" had provision run that script (to ask its version) before anything else was
checked, the lock's binding to the profile included. Only a version X.Y (X.Y.Z) is read from a lock now; anything
else is a lock provision did not write: exit 2 naming the lock and the key, nothing run."""

from __future__ import annotations

import os
from pathlib import Path

import tiny
from launch import run_provision
from locks import sealed


def test_a_lock_naming_a_program_as_its_python_never_runs_it(tmp_path: Path) -> None:
    tiny.profile(tmp_path)
    marker = tmp_path / "ran"
    script = tmp_path / "not-python"
    script.write_text(f"#!/bin/sh\ntouch {marker}\necho 3.12\n")
    script.chmod(0o755)
    doc = {
        "lock-version": "1.0",
        "created-by": "provision",
        "packages": [
            {
                "name": "alpha",
                "version": "1.0",
                "archive": {"url": "http://127.0.0.1:9/alpha-1.0.tar.gz", "hashes": {"sha256": "0" * 64}},
            }
        ],
        "tool": {"provision": {"profile": "tiny", "profile_hash": "0" * 64, "python": str(script)}},
    }
    lock = tmp_path / "pylock.tiny.toml"
    lock.write_text(sealed(doc))
    env = {**os.environ, "PROVISION_HOME": str(tmp_path / "home"), "PROVISION_PROFILES": str(tmp_path)}
    done = run_provision("create", "tiny", "--lock", str(lock), env=env, timeout=60)
    lines = done.stderr.strip().splitlines()
    assert not marker.exists(), "provision ran the program the lock named as its python"
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert lines[-2].startswith(f"error: {lock}: [tool.provision] python "), done.stderr
