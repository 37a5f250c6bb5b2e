"""A lock made again that comes out exactly as the lock in place leaves it as it is, byte for byte (`unchanged`), as
`uv lock` leaves an unchanged uv.lock: proven by comparing uv's text with the lock's, never by trusting what the lock in
place says of itself. Real uv, the tests' own index, real files."""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
from pathlib import Path

import pytest
from test_lock_again import _lock, _served

from provision.stacks import lockfile


def _result(done: subprocess.CompletedProcess[str]) -> dict[str, object]:
    assert done.returncode == 0, done.stderr
    result: dict[str, object] = json.loads(done.stdout)
    return result


def _resealed(text: str) -> str:
    """`text` with its seal recomputed, as a hand who edits a lock and knows the rule would."""
    from provision import toml

    raw = toml.loads(text)
    tool = raw["tool"]["provision"]
    digest = lockfile.packages_digest(raw["packages"], tool.get("known_conflicts"))
    return re.sub(r'packages_sha256 = "[0-9a-f]+"', f'packages_sha256 = "{digest}"', text)


def test_a_lock_made_again_unchanged_is_left_byte_for_byte(index_server, tmp_path: Path) -> None:
    served = _served(index_server)
    lockpath = tmp_path / "pylock.mine.toml"
    first = _result(_lock(tmp_path, served))
    assert first["unchanged"] is False
    written = lockpath.read_bytes()
    proofs = list((tmp_path / "xdg/provision/locks").iterdir())
    assert len(proofs) == 1  # the packages' text, parsed back once
    stat = lockpath.stat()
    again = _result(_lock(tmp_path, served))
    assert again["unchanged"] is True and again["changes"] == {"added": [], "removed": [], "changed": []}
    # not even rewritten
    assert lockpath.read_bytes() == written and lockpath.stat().st_mtime_ns == stat.st_mtime_ns
    assert again["packages"] == first["packages"] and again["warnings"] == first["warnings"]
    said = _lock(tmp_path, served, json_=False).stdout
    assert "unchanged: the lock in place is this lock" in said
    # the lock in place reads as the lock it is: create and report take it
    lockfile.read(lockpath)


def test_a_new_release_uv_now_takes_is_written(index_server, tmp_path: Path) -> None:
    served = _served(index_server)
    _result(_lock(tmp_path, served))
    served.add("lib", "1.1")
    done = _result(_lock(tmp_path, served, "--upgrade"))
    assert done["unchanged"] is False
    assert done["changes"] == {
        "added": [],
        "removed": [],
        "changed": [{"name": "lib", "from": "1.0", "to": "1.1"}],
    }
    assert 'version = "1.1"' in (tmp_path / "pylock.mine.toml").read_text()


@pytest.mark.parametrize(
    "edit",
    ["url", "hash", "package-after-tool", "key-after-tool", "profile-key", "created-by", "header", "comment"],
)
def test_a_lock_in_place_edited_by_hand_is_written_again_from_uv(
    index_server, tmp_path: Path, edit: str
) -> None:
    """An edit that keeps the seal right (recomputed, or outside the packages) is still no lock uv wrote: the lock in
    place is replaced by what uv resolved, never kept because it says it is unchanged."""
    served = _served(index_server)
    lockpath = tmp_path / "pylock.mine.toml"
    _result(_lock(tmp_path, served))
    fresh = lockpath.read_text()
    evil = "http://127.0.0.1:9/evil/lib-1.0-py3-none-any.whl"
    text = {
        "url": lambda t: _resealed(re.sub(r'url = "[^"]*/lib-1\.0-py3-none-any\.whl"', f'url = "{evil}"', t)),
        "hash": lambda t: _resealed(
            re.sub(
                r'(lib-1\.0-py3-none-any\.whl".*?sha256 = ")[0-9a-f]{64}',
                r"\g<1>" + "0" * 64,
                t,
                count=1,
                flags=re.S,
            )
        ),  # fmt: skip
        "package-after-tool": lambda t: t + '\n[[packages]]\nname = "extra"\nversion = "1.0"\n',
        "key-after-tool": lambda t: t + "\n[attacker]\nx = 1\n",
        "profile-key": lambda t: t.replace('cuda = "', 'cuda = "9', 1),
        "created-by": lambda t: t.replace(
            'created-by = "provision (uv pip compile)"', 'created-by = "someone"', 1
        ),
        "header": lambda t: t.replace("# PEP 751 lock", "# A lock", 1),
        "comment": lambda t: t.replace("[[packages]]\n", "[[packages]]\n# looked at\n", 1),
    }[edit](fresh)
    assert text != fresh
    lockpath.write_text(text)
    done = _result(_lock(tmp_path, served))
    assert done["unchanged"] is False
    after = lockpath.read_text()
    assert evil not in after and "extra" not in after and "[attacker]" not in after and "someone" not in after
    assert after.startswith("# PEP 751 lock") and "# looked at" not in after
    assert _strip_created(after) == _strip_created(fresh)  # uv's lock again, as it was first written
    lockfile.read(lockpath)


def _strip_created(text: str) -> str:
    return re.sub(r'created = "[^"]*"', "", text)


@pytest.mark.parametrize("damage", ["removed", "empty", "foreign", "link"])
def test_a_proof_missing_or_damaged_is_no_proof(index_server, tmp_path: Path, damage: str) -> None:
    """The proof kept in locks/ (that the packages' text parses back as written) is one of provision's cache entries:
    gone, damaged or another key's, the lock is written again (and the proof put back), never trusted."""
    served = _served(index_server)
    tmp_path / "pylock.mine.toml"
    _result(_lock(tmp_path, served))
    [proof] = (tmp_path / "xdg/provision/locks").iterdir()
    good = proof.read_bytes()
    if damage == "removed":
        proof.unlink()
    elif damage == "empty":
        proof.write_bytes(b"")
    elif damage == "foreign":
        proof.write_bytes(good.replace(proof.name.encode(), hashlib.sha256(b"other").hexdigest().encode()))
    else:
        proof.unlink()
        target = tmp_path / "elsewhere"
        target.write_bytes(good)
        proof.symlink_to(target)
    done = _result(_lock(tmp_path, served))
    assert done["unchanged"] is False
    assert proof.read_bytes() == good and not proof.is_symlink()  # put back by the lock written
    assert _result(_lock(tmp_path, served))["unchanged"] is True


def test_a_profile_changed_beside_the_same_packages_is_written(index_server, tmp_path: Path) -> None:
    """The same uv output from another profile (app ">=1.0" resolves as "==1.0" did): the lock says which profile made
    it (its hash), so it is written again."""
    served = _served(index_server)
    _result(_lock(tmp_path, served))
    done = _result(_lock(tmp_path, served, packages='app = ">=1.0"'))
    assert done["unchanged"] is False and done["changes"] == {"added": [], "removed": [], "changed": []}
    assert _result(_lock(tmp_path, served, packages='app = ">=1.0"'))["unchanged"] is True


def test_uvs_log_is_asked_for_only_where_the_lock_in_place_was_made_for_another_key(
    index_server, tmp_path: Path
) -> None:
    """uv's log of what it fetches names the wheels to read ahead; a lock made again for the same key (profile,
    indexes, Python, platform) keeps its versions and its wheels were read when it was made, so the log is not asked
    for (reading it slowed uv by 25-45 ms); for another key, after --upgrade-package, or with no lock in place, it is.
    The key is found in the lock's text, not parsed: before uv runs."""
    from provision.stacks import lock as locking

    served = _served(index_server)
    _result(_lock(tmp_path, served))
    lockpath = tmp_path / "pylock.mine.toml"
    key = re.search(r'lock_key = "([0-9a-f]+)"', lockpath.read_text())
    assert key is not None
    here = locking._in_place(lockpath)
    same = locking.Preferences.of(lockpath, here, upgrade=False, packages=())
    assert same.same_key(lambda: key.group(1)) and not same.same_key(lambda: "0" * 16)
    assert not locking.Preferences.of(lockpath, here, upgrade=False, packages=("lib",)).same_key(
        lambda: key.group(1)
    )
    assert not locking.Preferences.of(lockpath, here, upgrade=True, packages=()).same_key(
        lambda: key.group(1)
    )
    assert not locking.Preferences.of(lockpath, None, upgrade=False, packages=()).same_key(
        lambda: key.group(1)
    )
    # a new release uv takes with -P is read (after uv or ahead): the gate's verdict covers it
    served.add("lib", "1.1")
    done = _result(_lock(tmp_path, served, "--upgrade-package", "lib"))
    assert done["unchanged"] is False and not [w for w in done["warnings"] if w["id"] == "conflict-unread"]  # type: ignore[attr-defined]
