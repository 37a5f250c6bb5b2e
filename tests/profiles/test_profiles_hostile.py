"""Profiles as an adversary writes them: [env] keys that are not shell names, unknown placeholders, a pipe, a folder,
a link loop or an unreadable file named *.toml, TOML nested 100,000 deep: each one error line and exit 4, no hang."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from launch import run_provision

BODY = 'schema = 1\nname = "{name}"\ncuda = "13.0"\n[packages]\nalpha = {{}}\n'


def run(provision_bin: str, folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PROVISION_PROFILES": str(folder)}
    return run_provision(*args, timeout=30, env=env)


def one_error(done: subprocess.CompletedProcess[str], code: int, *words: str) -> None:
    lines = done.stderr.strip().splitlines()
    assert (
        done.returncode == code
        and len(lines) == 2
        and lines[0].startswith("error: ")
        and lines[1].startswith("hint: ")
    ), done.stderr
    assert all(w in lines[0] for w in words), done.stderr


@pytest.mark.parametrize(
    ("env", "words"),
    [
        ('"X;touch PWNED;Y" = "1"', ("'X;touch PWNED;Y' is not a variable name",)),
        ('"1X" = "1"', ("'1X' is not a variable name",)),
        ('"A B" = "1"', ("'A B' is not a variable name",)),
        ('X = "{home}/x"', ("env.X", "unknown placeholder {home}")),
        ('X = "{env.__class__}"', ("env.X", "unknown placeholder")),
        ('X = "{venv!r}"', ("env.X", "unknown placeholder {venv}")),
        ('X = "{venv"', ("env.X", "literal brace")),
    ],
)
def test_env_keys_are_shell_names_and_placeholders_are_known(
    tmp_path: Path, provision_bin: str, env: str, words: tuple[str, ...]
) -> None:
    (tmp_path / "bad.toml").write_text(BODY.format(name="bad") + f"[env]\n{env}\n")
    one_error(run(provision_bin, tmp_path, "lock", "bad"), 4, *words)
    assert not (tmp_path / "PWNED").exists()


def test_every_known_placeholder_is_accepted(tmp_path: Path) -> None:
    from provision.stacks import profiles

    path = tmp_path / "good.toml"
    path.write_text(
        BODY.format(name="good") + '[env]\nA = "{env}:{venv}:{site}:{arch_list}:{{literal}}"\nB_2 = "x"\n'
    )
    assert profiles.load_file(path).env["A"] == "{env}:{venv}:{site}:{arch_list}:{{literal}}"


def test_hostile_files_in_a_profiles_folder(tmp_path: Path, provision_bin: str) -> None:
    (tmp_path / "good.toml").write_text(BODY.format(name="good"))
    os.mkfifo(tmp_path / "pipe.toml")
    (tmp_path / "dir.toml").mkdir()
    (tmp_path / "loop.toml").symlink_to(tmp_path / "loop.toml")
    (tmp_path / "deep.toml").write_text("x = " + "[" * 100_000 + "]" * 100_000 + "\n")
    listed = run(provision_bin, tmp_path, "profiles", "--json")  # a pipe is passed over, not waited on
    assert (
        listed.returncode == 4
        and "deep.toml: nested too deeply" in listed.stderr
        and "Traceback" not in listed.stderr
    )
    (tmp_path / "deep.toml").unlink()
    listed = run(provision_bin, tmp_path, "profiles", "--json")  # the good one listed; the rest named, exit 4
    assert listed.returncode == 4 and "good" in [p["name"] for p in json.loads(listed.stdout)["profiles"]]
    assert sorted(Path(s["path"]).name for s in json.loads(listed.stdout)["skipped"]) == [
        "dir.toml",
        "loop.toml",
        "pipe.toml",
    ]
    one_error(run(provision_bin, tmp_path, "lock", "pipe"), 4, "pipe.toml: not a regular file")
    one_error(run(provision_bin, tmp_path, "lock", "dir"), 4, "dir.toml: not a regular file")
    one_error(run(provision_bin, tmp_path, "lock", "loop"), 4, "loop.toml: cannot read it")
    one_error(
        run(provision_bin, tmp_path, "lock", str(tmp_path / "dir.toml")), 4, "dir.toml: not a regular file"
    )
    if os.geteuid() != 0:  # root reads every file
        (tmp_path / "secret.toml").write_text(BODY.format(name="secret"))
        (tmp_path / "secret.toml").chmod(0)
        one_error(run(provision_bin, tmp_path, "lock", "secret"), 4, "secret.toml: cannot read it")


def test_a_profile_name_follows_the_environment_name_rule(tmp_path: Path, provision_bin: str) -> None:
    (tmp_path / "long.toml").write_text(BODY.format(name="x" * 65))
    one_error(run(provision_bin, tmp_path, "lock", "long"), 4, "name: letters, digits")
