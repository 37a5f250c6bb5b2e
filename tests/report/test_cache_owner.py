"""provision's caches in a folder another local user can write (adversary of issue 39, round three): a cache folder
owned by another user, or writable by group or others (a shared $XDG_CACHE_HOME, a home made with umask 0), lets that
user plant entries that parse but lie: a scan claiming sm_120 for a wheel without it, a wheel of other content beside a
`checked` stamp of its own. Such a folder is never read or written: what it would answer is computed again (wheelfacts)
or fetched again (the wheel cache), and the folder is named with what to do."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

from provision import regular, wheelfacts
from provision.errors import EnvError
from provision.stacks import wheelcache

KEY = "ab" * 32
LIE = {
    "scanned": 1,
    "from": "wheel",
    "problems": [],
    "members": [
        ["lib.so", {"cubin": {"sm_120": 1}, "ptx": {}, "lto": {}, "compressed": 0, "containers": 1}, {}]
    ],
}


@pytest.fixture(autouse=True)
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.setattr(wheelfacts, "_held", {})
    return tmp_path / "xdg" / "provision"


def _plant(cache: Path) -> None:
    """What another user writes where the scan of KEY belongs: an entry of the right shape, and a lie."""
    (cache / "scans").mkdir(parents=True, exist_ok=True)
    (cache / "scans" / KEY).write_text(
        json.dumps({"kind": "scans", "key": KEY, "version": wheelfacts.VERSION, "data": LIE})
    )


@pytest.mark.parametrize("where", ["root", "kind"])
def test_a_world_writable_cache_folder_is_not_trusted(
    cache: Path, where: str, capfd: pytest.CaptureFixture[str]
) -> None:
    _plant(cache)
    assert wheelfacts.get("scans", KEY) == LIE  # ours, as written: read
    (cache if where == "root" else cache / "scans").chmod(0o777)
    assert wheelfacts.get("scans", KEY) is None
    wheelfacts.put("scans", "cd" * 32, LIE)
    assert not (cache / "scans" / ("cd" * 32)).exists()  # nothing written there either
    assert "writable by other users" in capfd.readouterr().err


@pytest.mark.skipif(os.geteuid() != 0, reason="only root can give a folder to another user")
@pytest.mark.parametrize("what", ["root", "kind", "entry"])
def test_a_cache_folder_or_entry_owned_by_another_user_is_not_trusted(cache: Path, what: str) -> None:
    _plant(cache)
    os.chown({"root": cache, "kind": cache / "scans", "entry": cache / "scans" / KEY}[what], 65534, 65534)
    assert wheelfacts.get("scans", KEY) is None


def test_a_wheel_planted_with_its_own_stamp_in_a_world_writable_wheel_cache_is_not_used(cache: Path) -> None:
    genuine = hashlib.sha256(b"the genuine wheel").hexdigest()
    place = cache / "wheels" / genuine
    place.mkdir(parents=True)
    planted = place / "x-1-py3-none-any.whl"
    planted.write_bytes(b"another user's wheel")
    # the stamp they can read off it
    (place / "checked").write_text(json.dumps(regular.stamp_of(os.stat(planted))))
    (cache / "wheels").chmod(0o777)
    assert wheelcache.cached(genuine, planted.name) is None
    with pytest.raises(EnvError, match="writable by other users"):
        wheelcache.fetch("http://127.0.0.1:9/x-1-py3-none-any.whl", genuine, planted.name, hint="")


def test_nvccs_remembered_targets_in_a_world_writable_cache_folder_are_not_trusted(cache: Path) -> None:
    from provision.report import compiler

    cache.mkdir(parents=True)
    compiler.memory_file().write_text(json.dumps({KEY: ["sm_120", "sm_121"]}))
    assert compiler._remembered(KEY) == ["sm_120", "sm_121"]  # ours: read
    cache.chmod(0o777)
    assert compiler._remembered(KEY) is None
    cache.chmod(0o700)
    # parses, but is no answer of nvcc
    compiler.memory_file().write_text(json.dumps({KEY: ["sm_120", {"not": "an sm"}]}))
    assert compiler._remembered(KEY) is None
