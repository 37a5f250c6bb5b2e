"""A profile whose [env] value or [baseline] command holds a NUL byte (TOML's "\\u0000"): no process can be given one,
and create found out only at its first check, after locking and installing (`internal error: ValueError: embedded
null byte`, exit 3); `baseline` the same. Now the profile is refused when read, before uv runs (exit 4, the key named)."""

from __future__ import annotations

from pathlib import Path

import pytest
import tiny
from launch import run_provision


@pytest.mark.parametrize(
    ("extra", "key"),
    [
        ('[env]\nFOO = "a\\u0000b"\n', "env.FOO"),
        ('[baseline]\ncommand = ["python", "-c", "print(1)\\u0000"]\npattern = "(1)"\n', "baseline"),
        ('[baseline]\ncommand = ["true"]\ncwd = "/tmp\\u0000x"\npattern = "(1)"\n', "baseline"),
    ],
)
def test_a_nul_byte_in_a_profile_is_refused_before_uv_runs(tmp_path: Path, extra: str, key: str) -> None:
    profiles = tmp_path / "profiles"
    profiles.mkdir()
    path = tiny.profile(profiles, "nul", extra=extra)
    done = run_provision(
        "create",
        "nul",
        "--python",
        tiny.PY,
        env={
            "PROVISION_PROFILES": str(profiles),
            "PROVISION_HOME": str(tmp_path / "home"),
            "PROVISION_INDEX_DEFAULT": "http://127.0.0.1:9/simple",
        },
    )
    assert done.returncode == 4 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.startswith(f"error: {path}: {key}") and "NUL byte" in done.stderr, done.stderr
    assert "locking" not in done.stderr and "\nhint: " in done.stderr


@pytest.mark.parametrize(
    ("spec", "key"),
    [
        ('{ path = "a\\u0000b" }', "packages.alpha.path"),
        ('{ git = "https://h/r\\u0000.git" }', "packages.alpha.git"),
        ('{ git = "https://h/r.git", rev = "v1\\u0000" }', "packages.alpha.rev"),
    ],
)
def test_a_nul_byte_in_a_package_source_is_refused_as_a_profile_error(
    tmp_path: Path, spec: str, key: str
) -> None:
    """`{ path = "a\\u0000b" }` ended lock and create in `internal error: ValueError: embedded null byte` (exit 3)."""
    profiles = tmp_path / "profiles"
    profiles.mkdir()
    path = tiny.profile(profiles, "nul", packages=f"alpha = {spec}")
    for args in (("lock", "nul", "-o", str(tmp_path / "o.toml")), ("create", "nul", "--python", tiny.PY)):
        done = run_provision(
            *args,
            env={
                "PROVISION_PROFILES": str(profiles),
                "PROVISION_HOME": str(tmp_path / "home"),
                "PROVISION_INDEX_DEFAULT": "http://127.0.0.1:9/simple",
            },
        )
        assert done.returncode == 4 and "Traceback" not in done.stderr, done.stderr
        assert done.stderr.startswith(f"error: {path}: {key}") and "NUL byte" in done.stderr, done.stderr
