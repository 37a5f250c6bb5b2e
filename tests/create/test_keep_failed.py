"""`create --keep-failed`: a build whose checks or install failed is kept under its own name, listed by `envs`, never
activated, and removed by `remove` or `gc` (a plain create still removes it, and its own gc leaves kept ones alone)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import tiny


def failing_tool(tmp_path: Path, index_server, provision_bin: str) -> tiny.Tool:
    served = tiny.index(index_server)
    served.add("broken", "1.0", files={"broken/__init__.py": b"raise ImportError('broken build')\n"})
    return tiny.make_tool(tmp_path, provision_bin, served, ("bad", 'broken = "==1.0"'))


def test_a_build_whose_checks_failed_is_kept_listed_never_activated_and_removed(
    tmp_path: Path, index_server, provision_bin: str
) -> None:
    tool = failing_tool(tmp_path, index_server, provision_bin)
    tool.create("tiny", "--no-checks")
    plain = tool.create("bad", check=False)
    assert plain.returncode == 1 and "create --keep-failed keeps it" in plain.stderr
    assert set(tool.envs()) == {"tiny"} and len(tool.builds()) == 1

    done = tool.create("bad", "--keep-failed", "--json", check=False)
    assert done.returncode == 1
    result = json.loads(done.stdout)
    kept = result["kept_as"]
    assert kept.startswith("bad-failed-") and not result["activated"] and Path(result["path"]).is_dir()
    assert (Path(result["path"]) / "venv" / "bin" / "python").exists()  # all of it, to look into
    listed = tool.envs()
    assert listed[kept]["failed"] and listed[kept]["check_status"] == "fail" and listed["tiny"]["active"]
    assert not listed["tiny"]["failed"]
    human = tool("envs")
    assert f"{kept} (failed)" in human.stdout

    refused = tool("switch", kept, check=False)
    assert refused.returncode == 7 and "never activated" in refused.stderr
    assert tool("rollback", "--to", kept, check=False).returncode == 7
    assert tool.envs()["tiny"]["active"]

    tool.create("tiny", "--name", "again", "--no-checks")  # create's own gc leaves a kept build alone
    assert kept in tool.envs()
    tool("remove", kept)
    assert kept not in tool.envs() and not Path(result["path"]).exists()

    second = json.loads(tool.create("bad", "--keep-failed", "--json", check=False).stdout)
    cleaned = tool("gc")
    assert second["kept_as"] in cleaned.stderr and not Path(second["path"]).exists()
    assert set(tool.envs()) == {"tiny", "again"}


def test_a_build_whose_install_failed_is_kept_too(tmp_path: Path, index_server, provision_bin: str) -> None:
    tool = failing_tool(tmp_path, index_server, provision_bin)
    lock = tmp_path / "pylock.tiny.toml"
    tool("lock", "tiny", "--python", f"{sys.version_info[0]}.{sys.version_info[1]}", "-o", str(lock))
    index_server.down.add("tiny")  # the index fails while the lock's files are fetched
    done = tool(
        "create",
        "tiny",
        "--python",
        tiny.PY,
        "--lock",
        str(lock),
        "--keep-failed",
        check=False,
        env={"UV_CACHE_DIR": str(tmp_path / "empty-cache")},
    )
    assert done.returncode in (5, 6), done.stderr
    listed = tool.envs()
    (kept,) = [name for name, row in listed.items() if row["failed"]]
    assert kept.startswith("tiny-failed-") and f"kept as {kept}" in done.stderr
    assert listed[kept]["profile"] == "tiny" and not listed[kept]["active"]
    tool("gc")
    assert tool.envs() == {} and tool.builds() == []


def test_two_failed_builds_of_one_name_in_the_same_second_keep_both(
    tmp_path: Path, index_server, provision_bin: str, monkeypatch
) -> None:
    """The kept name has a stamp of seconds: a second failure within it is NAME-failed-STAMP-2, never the first one's
    name taken over (its build was left behind, named by nothing)."""
    import datetime

    from provision.envs import home as homes
    from provision.envs import lifecycle
    from provision.stacks import profiles

    tool = failing_tool(tmp_path, index_server, provision_bin)
    for key, value in tool.env().items():
        if value is not None:
            monkeypatch.setenv(key, value)
    where = homes.Home(tool.home)
    moment = datetime.datetime(2026, 12, 2, 10, 0, 0, tzinfo=datetime.timezone.utc)

    class Frozen(datetime.datetime):
        @classmethod
        def now(cls, tz: datetime.tzinfo | None = None) -> datetime.datetime:  # type: ignore[override]
            return moment

    monkeypatch.setattr(lifecycle.datetime, "datetime", Frozen)
    kept = []
    for n in (1, 2):
        build = where.builds / f"bad-{n}"
        (build / "venv").mkdir(parents=True)
        kept.append(lifecycle.keep(where, "bad", profiles.load("bad"), build))
    assert kept == ["bad-failed-20261202T100000", "bad-failed-20261202T100000-2"]
    assert {name: where.build_of(name).name for name in kept} == {kept[0]: "bad-1", kept[1]: "bad-2"}
    assert set(tool.envs()) == set(kept)
