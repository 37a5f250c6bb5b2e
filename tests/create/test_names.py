"""Names and what may be deleted: one rule checked before anything is done, nothing outside the home ever deleted,
`remove` taking only its own build and link, rollback and run refusing an environment whose venv is gone, and a
second `create` of a name only with --replace (what was measured is kept)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import tiny
from launch import run_provision

BAD = [
    "../x",
    "sa/",
    "a/b",
    ".",
    "..",
    "x" * 300,
    ".hidden",
    "-x",
    "b/",
    "./b",
    "../envs/b",
    "../active",
    "",
    "a b",
]


def snapshot(folder: Path) -> set[str]:
    return {str(p.relative_to(folder)) for p in folder.rglob("*")}


def test_a_bad_name_is_a_usage_error_before_anything_is_done(tool: tiny.Tool, tmp_path: Path) -> None:
    before = snapshot(tmp_path)
    others = [
        ("adopt", "{}", str(tmp_path)),
        ("switch", "{}"),
        ("remove", "{}"),
        ("remove", "{}", "--force"),
        ("rollback", "--to", "{}"),
        ("run", "{}", "--", "true"),
        ("shell-env", "{}"),
        ("check", "{}"),
    ]
    for number, name in enumerate(BAD):
        other = tuple(a.replace("{}", name) for a in others[number % len(others)])
        for args in (("create", "tiny", "--name", name, "--python", tiny.PY), other):
            done = tool(*args, check=False)
            assert done.returncode == 2 and "Traceback" not in done.stderr, (args, done.stderr)
            if not name.startswith("-"):  # click's own usage error for what looks like an option
                assert done.stderr.startswith("error: ") and "hint: use letters, digits" in done.stderr, (
                    args,
                    done.stderr,
                )
    assert snapshot(tmp_path) - before <= {"home", "home/builds", "home/envs", "home/locks", "home/.lock"}
    assert not tool.builds()


def test_remove_past_the_guard_and_of_the_active_pointer_is_refused(tool: tiny.Tool) -> None:
    tool.create("tiny", "--name", "a", "--no-checks")
    tool.create("tiny", "--name", "b", "--no-checks")
    for spelled in ("./b", "b/", "../envs/b", "../active"):
        assert tool("remove", spelled, check=False).returncode == 2
    assert tool.envs()["b"]["active"] and os.readlink(tool.home / "active") == "envs/b"
    assert tool("remove", "b", check=False).returncode == 7  # the one spelling of the active one: refused too
    assert len(tool.builds()) == 2


def test_remove_deletes_nothing_outside_home_nor_a_build_another_name_uses(
    tool: tiny.Tool, tmp_path: Path
) -> None:
    tool.create("tiny", "--name", "a", "--no-checks")
    outside = tmp_path / "precious"
    (outside / "venv" / "bin").mkdir(parents=True)
    (outside / "venv" / "bin" / "python").symlink_to(sys.executable)
    (tool.home / "envs" / "evil").symlink_to(outside)
    (tool.home / "envs" / "twin").symlink_to(os.readlink(tool.home / "envs" / "a"))
    tool("remove", "evil")
    assert (outside / "venv" / "bin" / "python").exists() and not (tool.home / "envs" / "evil").is_symlink()
    tool("switch", "twin")
    tool("remove", "a")
    assert (
        len(tool.builds()) == 1 and tool("run", "twin", "--", "python", "-c", "import alpha").returncode == 0
    )
    assert json.loads(tool("gc", "--json").stdout)["removed"] == [] and len(tool.builds()) == 1


def test_gc_keeps_a_build_that_a_link_with_an_old_style_name_points_at(tool: tiny.Tool) -> None:
    tool.create("tiny", "--name", "a", "--no-checks")
    (tool.home / "envs" / "odd name").symlink_to(os.readlink(tool.home / "envs" / "a"))
    (tool.home / "envs" / "a").unlink()
    tool("gc")
    assert len(tool.builds()) == 1


def test_rollback_skips_an_environment_whose_venv_is_gone_and_run_never_uses_the_system_python(
    tool: tiny.Tool,
) -> None:
    tool.create("tiny", "--name", "a", "--no-checks")
    tool.create("tiny", "--name", "b", "--no-checks")
    shutil.rmtree(Path(tool.envs()["a"]["venv"]))
    rolled = tool("rollback", check=False)
    assert rolled.returncode == 7 and "venv gone: a" in rolled.stderr and tool.envs()["b"]["active"]
    assert tool("switch", "a", check=False).returncode == 7
    ran = tool("run", "a", "--", "python", "-c", "import sys; print(sys.prefix)", check=False)
    assert ran.returncode == 7 and "venv is gone" in ran.stderr and ran.stdout == ""
    assert tool("shell-env", "a", check=False).returncode == 7


def test_create_of_an_existing_name_needs_replace_and_keeps_what_was_measured(tool: tiny.Tool) -> None:
    tool.create("tiny", "--no-checks")
    first = Path(tool.envs()["tiny"]["path"])
    meta = json.loads((first / "env.json").read_text())
    meta["baselines"] = [
        {"figure": 123.0, "unit": "tok/s", "at": "2026-11-29T00:00:00+00:00", "machine": {"summary": "test"}}
    ]
    (first / "env.json").write_text(json.dumps(meta))
    again = tool.create("tiny", "--no-checks", check=False)
    assert again.returncode == 7 and "--replace" in again.stderr and tool.builds() == [first.name]
    tool.create("tiny", "--no-checks", "--replace")
    second = Path(tool.envs()["tiny"]["path"])
    assert second != first and not first.exists() and tool.builds() == [second.name]
    assert json.loads((second / "env.json").read_text())["baselines"][0]["figure"] == 123.0
    assert tool.envs()["tiny"]["baseline"]["figure"] == 123.0


def test_run_without_the_double_dash_says_to_add_it(tool: tiny.Tool) -> None:
    tool.create("tiny", "--no-checks")
    done = tool("run", "tiny", "python", "-V", check=False)
    assert done.returncode == 2 and "hint: add --: provision run tiny -- python -V" in done.stderr


def test_ctrl_c_after_the_swap_finishes_the_swap(tool: tiny.Tool, monkeypatch: pytest.MonkeyPatch) -> None:
    """The interrupt cannot be timed into that instant for real: it is sent from inside the swap, in-process."""
    import signal

    from provision.commands import create as creating
    from provision.envs import home as homes
    from provision.stacks import profiles

    for key, value in tool.env().items():
        monkeypatch.setenv(key, value)
    where = homes.Home(tool.home)
    original = homes.Home.point

    def point_then_interrupt(self: homes.Home, link: Path, target: str, **options: bool) -> None:
        original(self, link, target, **options)
        os.kill(os.getpid(), signal.SIGINT)

    monkeypatch.setattr(homes.Home, "point", point_then_interrupt)
    said: list[str] = []
    result = creating.create(where, profiles.load("tiny"), python=tiny.PY, checks=False, progress=said.append)
    assert result.passed and result.activated and where.active() == "tiny"
    assert any("Ctrl-C came after tiny was complete" in line for line in said)


def test_gc_spares_a_build_that_a_live_payload_runs_from(tool: tiny.Tool) -> None:
    leftover = tool.home / "builds" / "tiny-20260101T000000Z-dead00"
    (leftover / "venv").mkdir(parents=True)
    (leftover / ".building").write_text("999999999")  # its creator is gone ...
    payload = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(60)", str(leftover / "venv" / "payload.py")]
    )
    try:
        # ... its payload is not
        assert json.loads(tool("gc", "--json").stdout)["removed"] == [] and leftover.exists()
    finally:
        payload.kill()
        payload.wait()
    assert json.loads(tool("gc", "--json").stdout)["removed"] == [f"builds/{leftover.name}"]


def test_a_trailing_newline_passes_no_name_rule(tmp_path: Path, provision_bin: str) -> None:
    """`$` matches before a final newline: "ab\\n" passed the environment-name rule (a folder named with a newline) and
    "13.0\\n" or an [env] key "A\\n" (an `export A\\n=...` line from shell-env) passed the profile loader's."""
    from provision import names
    from provision.errors import ProfileError, UsageError
    from provision.stacks import profiles

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    home = tmp_path / "home"
    done = run_provision("adopt", "ab\n", str(venv), "--home", str(home), timeout=60)
    assert done.returncode == 2 and "is not allowed" in done.stderr, done.stderr
    assert not [p for p in home.rglob("*") if "\n" in p.name]
    with pytest.raises(UsageError):
        names.check_name("ab\n")
    base = 'schema = 1\nname = "x"\ncuda = "13.0"\n[packages]\ntorch = "==2.9.0"\n'
    for bad in (
        base.replace('"13.0"', '"13.0\\n"'),
        base + '[env]\n"A\\n" = "1"\n',
        base.replace('name = "x"', 'name = "x\\n"'),
    ):
        (tmp_path / "x.toml").write_text(bad)
        with pytest.raises(ProfileError):
            profiles.load_file(tmp_path / "x.toml")
