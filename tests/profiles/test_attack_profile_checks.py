"""A profile whose `[checks] required` holds a list or a table where a check id belongs (`required = [["imports",
"torch"]]`, one bracket too many): the id was looked up in a dict, and a list cannot be, so `provision profiles`, `lock`
and every command that loads profiles ended in `internal error: TypeError: unhashable type` (exit 3). Now it is the
profile error every other wrong type is: exit 4, one line naming the file and the key."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from launch import run_provision


@pytest.mark.parametrize("required", ['[["imports", "torch"]]', "[{}]", '[{ id = "imports" }]'])
def test_a_check_id_that_is_not_a_string_is_a_profile_error(tmp_path: Path, required: str) -> None:
    profile = tmp_path / "odd.toml"
    profile.write_text(
        f'schema = 1\nname = "odd"\ncuda = "13.0"\n[packages]\nalpha = "==1.0"\n[checks]\nrequired = {required}\n'
    )
    env = {**os.environ, "PROVISION_PROFILES": str(tmp_path)}
    for args in (("profiles",), ("lock", str(profile), "-o", str(tmp_path / "pylock.odd.toml"))):
        done = run_provision(*args, env=env, timeout=60)
        lines = done.stderr.strip().splitlines()
        assert (
            done.returncode == 4 and "internal error" not in done.stderr and "Traceback" not in done.stderr
        ), done.stderr
        assert str(profile) in done.stderr and "checks.required" in lines[0], done.stderr
    assert not (tmp_path / "pylock.odd.toml").exists()
