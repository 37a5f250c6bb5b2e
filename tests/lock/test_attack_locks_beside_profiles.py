"""A lock kept beside the profiles (`provision lock cu130 -o profiles/pylock.cu130.toml`; PROVISION_PROFILES=. with
the locks in the same folder): every `*.toml` there was read as a profile, so `provision profiles`, `report` and every
command looking a profile up by name failed on the lock (exit 4, `lock-version: unknown key`). A file named as PEP 751
names locks (pylock.toml, pylock.NAME.toml) is never a profile: passed over, the profiles beside it found."""

from __future__ import annotations

import json
import os
from pathlib import Path

import tiny
from launch import run_provision

LOCK = (
    'lock-version = "1.0"\ncreated-by = "provision"\n[[packages]]\nname = "alpha"\nversion = "1.0"\n'
    '[packages.archive]\nurl = "http://127.0.0.1:9/alpha-1.0.tar.gz"\nhashes = { sha256 = "'
    + "0" * 64
    + '" }\n'
)


def test_locks_in_a_profiles_folder_are_passed_over(tmp_path: Path) -> None:
    tiny.profile(tmp_path)
    for name in ("pylock.toml", "pylock.tiny.toml", "pylock.other.toml"):
        (tmp_path / name).write_text(LOCK)
    env = {**os.environ, "PROVISION_PROFILES": str(tmp_path)}
    done = run_provision("profiles", "--json", env=env, timeout=60)
    assert done.returncode == 0, done.stderr
    listed = json.loads(done.stdout)
    assert (
        str(tmp_path / "tiny.toml") in [p["path"] for p in listed["profiles"]] and listed["skipped"] == []
    ), listed
    assert not any("pylock" in p["path"] for p in listed["profiles"])
    done = run_provision("report", "--json", env=env, timeout=120)
    assert done.returncode in (0, 1) and "lock-version" not in done.stderr, done.stderr
    done = run_provision("lock", "pylock", "-o", str(tmp_path / "out" / "pylock.x.toml"), env=env, timeout=60)
    assert done.returncode == 4 and "no profile named 'pylock'" in done.stderr, done.stderr
