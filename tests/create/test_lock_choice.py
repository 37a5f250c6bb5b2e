"""Which lock `create` builds from (issue 36, items 2 and 3). `create --lock RELATIVE` kept the relative path: from any
other folder drift called the lock a file missing from the venv and `restore --dry-run` exited 7. And the README's steps
judged one lock and built another: `lock cu130` wrote lockfiles/, `report --lock` judged it, then `create cu130` reused
its own cached lock. The build now owns a copy of a lock from outside HOME, and takes the profile's own in lockfiles/
when it is current, or says why not."""

from __future__ import annotations

import json
from pathlib import Path

import tiny
from launch import run_provision


def _tool(tmp_path: Path, index_server, packages: str = 'alpha = "==1.0"') -> tuple[tiny.Tool, tiny.Index]:
    served = tiny.index(index_server)
    tool = tiny.make_tool(tmp_path, "", served)
    tiny.profile(tool.profiles, packages=packages)  # tiny, with these packages
    return tool, served


def _in(tool: tiny.Tool, cwd: Path, *args: str, check: bool = True) -> dict:
    done = run_provision(*args, "--json", env=tool.env(), cwd=cwd, check=False)
    assert not check or done.returncode == 0, (args, done.stderr)
    return json.loads(done.stdout)


def test_a_relative_lock_belongs_to_the_build_and_drift_and_restore_work_from_anywhere(
    tmp_path: Path, index_server
) -> None:
    tool, _ = _tool(tmp_path, index_server)
    here, elsewhere = tmp_path / "here", tmp_path / "elsewhere"
    here.mkdir(), elsewhere.mkdir()
    _in(tool, here, "lock", "tiny", "--python", _python(), "-o", "pylock.tiny.toml")
    created = _in(tool, here, "create", "tiny", "--python", tiny.PY, "--lock", "pylock.tiny.toml")
    drift = _in(tool, elsewhere, "check", "tiny", "--only", "drift")
    assert drift["status"] == "pass", drift
    (here / "pylock.tiny.toml").unlink()  # the build's own copy is what drift and restore read
    dry = run_provision("restore", "tiny", "--dry-run", env=tool.env(), cwd=elsewhere)
    assert dry.returncode == 0, dry.stdout + dry.stderr
    assert created["lock_origin"] == "given" and created["lock_source"] == str(here / "pylock.tiny.toml")
    assert Path(created["lock"]) == Path(created["path"]) / "pylock.toml" and Path(created["lock"]).is_file()


def test_create_builds_the_profiles_lock_in_lockfiles_that_report_judged(
    tmp_path: Path, index_server
) -> None:
    tool, served = _tool(tmp_path, index_server, packages='alpha = ">=1.0"')
    here = tmp_path / "here"
    here.mkdir()
    assert _in(tool, here, "lock", "tiny", "--python", _python())["lockfile"] == "lockfiles/pylock.tiny.toml"
    served.add("alpha", "3.0")  # released after the lock was judged: what is built is still what was judged
    created = _in(tool, here, "create", "tiny", "--python", tiny.PY)
    site = next(Path(created["path"]).glob("venv/lib/python*/site-packages"))
    assert [p.name for p in site.glob("alpha-*.dist-info")] == ["alpha-2.0.dist-info"]
    assert created["lock_origin"] == "lockfiles" and created["lock_note"] is None, created
    assert created["lock_source"] == str(here / "lockfiles" / "pylock.tiny.toml")
    table = run_provision(
        "create", "tiny", "--name", "two", "--python", tiny.PY, env=tool.env(), cwd=here, check=True
    )
    assert "(the profile's own, current; copied into the build)" in table.stderr + table.stdout


def test_a_lock_in_lockfiles_made_from_another_version_of_the_profile_is_named_and_not_built(
    tmp_path: Path, index_server
) -> None:
    tool, _ = _tool(tmp_path, index_server)
    here = tmp_path / "here"
    here.mkdir()
    _in(tool, here, "lock", "tiny", "--python", _python())
    tiny.profile(tool.profiles, packages='alpha = "==2.0"')  # the profile changed since its lock was judged
    created = _in(tool, here, "create", "tiny", "--python", tiny.PY)
    assert created["lock_origin"] == "locked" and created["lock_source"] is None, created
    assert (
        created["lock_note"].startswith(f"{Path('lockfiles') / 'pylock.tiny.toml'} not used: ")
        and "another version of profile tiny" in created["lock_note"]
    ), created["lock_note"]
    shown = run_provision(
        "create", "tiny", "--name", "two", "--python", tiny.PY, env=tool.env(), cwd=here, check=True
    )
    assert "note: lockfiles/pylock.tiny.toml not used: " in shown.stdout + shown.stderr


def _python() -> str:
    import sys

    return f"{sys.version_info.major}.{sys.version_info.minor}"


def test_the_readmes_steps_use_one_profile_name_throughout() -> None:
    """`today` was written, `cu130` locked, judged and built: the steps judged one lock and built another."""
    import re

    from conftest import ROOT

    readme = (ROOT / "README.md").read_text()
    section = readme.split("## The upgrade, step by step", 1)[1].split("\n## ", 1)[0]
    blocks = [b.split("```", 1)[0] for b in section.split("```sh\n")[1:]]
    steps = next(b for b in blocks if "provision report --lock" in b)  # the steps, each a command of its own
    upgrade = next(b for b in blocks if b.startswith("provision profiles new") and "provision upgrade" in b)
    # the one command, the same name
    assert "upgrade today.toml" in upgrade and "profiles new today " in upgrade
    commands = [line.split("#", 1)[0].split() for line in steps.splitlines() if line.startswith("provision ")]
    (new,) = [c[3] for c in commands if c[1:3] == ["profiles", "new"]]
    named = {"lock": 2, "create": 2, "check": 2, "baseline": 2, "restore": 2, "run": 2}
    used = {c[named[c[1]]].removesuffix(".toml") for c in commands if c[1] in named}
    judged = {
        re.sub(r"^lockfiles/pylock\.(.+)\.toml$", r"\1", c[c.index("--lock") + 1])
        for c in commands
        if "--lock" in c
    }
    compared = {c[3] for c in commands if c[1] == "compare"}
    assert used == judged == compared == {new}, (new, used, judged, compared)
