"""provision's cache of what a wheel's bytes determine (provision/wheelfacts.py): an entry is trusted only when it is
whole and is the one asked for; a damaged, foreign, wrong-keyed entry, a link or a folder in its place is removed and
computed again; nothing is written through a link; concurrent writers leave one whole entry; each kind is bounded."""

from __future__ import annotations

import json
import multiprocessing
import os
import zipfile
from pathlib import Path

import pytest

from provision import wheelfacts
from provision.scan import binaries, remembered
from provision.stacks import wheelrecords

KEY = "ab" * 32
OTHER = "cd" * 32


@pytest.fixture(autouse=True)
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.setattr(wheelfacts, "_held", {})
    return tmp_path / "xdg" / "provision"


def test_an_entry_is_read_back_as_written(cache: Path) -> None:
    wheelfacts.put("records", KEY, {"rows": [["a/b.py", "sha256=x"]]})
    assert wheelfacts.get("records", KEY) == {"rows": [["a/b.py", "sha256=x"]]}
    entry = json.loads((cache / "records" / KEY).read_text())
    assert entry["key"] == KEY and entry["kind"] == "records" and entry["version"] == wheelfacts.VERSION
    assert oct((cache / "records" / KEY).stat().st_mode & 0o777) == "0o600"


@pytest.mark.parametrize(
    "damage", ["truncated", "wrong-key", "wrong-kind", "old-version", "not-json", "empty", "nested"]
)
def test_a_damaged_or_foreign_entry_is_removed_never_trusted(cache: Path, damage: str) -> None:
    wheelfacts.put("records", KEY, {"rows": []})
    path = cache / "records" / KEY
    whole = path.read_text()
    entry = json.loads(whole)
    text = {
        "truncated": whole[: len(whole) // 2],
        "not-json": "RECORD,,\n",
        "empty": "",
        "nested": "[" * 100_000,
        "wrong-key": json.dumps({**entry, "key": OTHER}),
        "wrong-kind": json.dumps({**entry, "kind": "scans"}),
        "old-version": json.dumps({**entry, "version": wheelfacts.VERSION - 1}),
    }[damage]
    path.write_text(text)
    assert wheelfacts.get("records", KEY) is None
    assert not path.exists()


def test_an_entry_copied_under_another_key_is_refused(cache: Path) -> None:
    """Another wheel's entry renamed to this sha256 names its own key inside: it is not this wheel's."""
    wheelfacts.put("scans", OTHER, {"scanned": 1, "from": "wheel", "problems": [], "members": []})
    os.rename(cache / "scans" / OTHER, cache / "scans" / KEY)
    assert wheelfacts.get("scans", KEY) is None and not (cache / "scans" / KEY).exists()


def test_a_link_in_place_of_an_entry_is_removed_and_never_written_through(
    cache: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    outside.write_text("kept")
    wheelfacts.put("records", OTHER, {"rows": []})  # the folder exists
    (cache / "records" / KEY).symlink_to(outside)
    assert wheelfacts.get("records", KEY) is None
    assert not (cache / "records" / KEY).is_symlink()
    (cache / "records" / KEY).symlink_to(outside)
    wheelfacts.put("records", KEY, {"rows": []})
    assert outside.read_text() == "kept" and not (cache / "records" / KEY).is_symlink()
    assert wheelfacts.get("records", KEY) == {"rows": []}


def test_a_link_in_place_of_a_kinds_folder_is_removed_and_nothing_written_through_it(
    cache: Path, tmp_path: Path
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    cache.mkdir(parents=True)
    (cache / "scans").symlink_to(elsewhere)
    assert wheelfacts.get("scans", KEY) is None
    wheelfacts.put("scans", KEY, {"x": 1})
    assert list(elsewhere.iterdir()) == []
    assert (cache / "scans").is_dir() and not (cache / "scans").is_symlink()
    assert wheelfacts.get("scans", KEY) == {"x": 1}


def test_a_folder_or_a_pipe_in_place_of_an_entry_is_removed(cache: Path) -> None:
    (cache / "records" / KEY / "inner").mkdir(parents=True)
    assert wheelfacts.get("records", KEY) is None and not (cache / "records" / KEY).exists()
    (cache / "records" / KEY / "inner").mkdir(parents=True)
    wheelfacts.put("records", KEY, {"rows": []})  # a folder there: replaced by the entry
    assert wheelfacts.get("records", KEY) == {"rows": []}
    (cache / "records" / KEY).unlink()
    os.mkfifo(cache / "records" / KEY)
    assert wheelfacts.get("records", KEY) is None and not (cache / "records" / KEY).exists()  # not waited on


def test_a_key_that_is_not_a_sha256_is_neither_read_nor_written(cache: Path) -> None:
    for key in ("../../etc/passwd", KEY.upper(), KEY[:-1], ""):
        wheelfacts.put("records", key, {"rows": []})
        assert wheelfacts.get("records", key) is None
    assert not (cache / "records").exists() or list((cache / "records").iterdir()) == []


def _write_many(args: tuple[str, int]) -> None:
    root, worker = args
    os.environ["XDG_CACHE_HOME"] = root
    for round_ in range(200):
        wheelfacts.put("records", KEY, {"rows": [[f"w{worker}", str(round_)]] * 200})


def test_concurrent_writers_leave_one_whole_entry_and_no_temp_file(cache: Path) -> None:
    with multiprocessing.get_context("fork").Pool(4) as pool:
        pool.map(_write_many, [(str(cache.parent), n) for n in range(4)])
    found = wheelfacts.get("records", KEY)
    assert found is not None and len(found["rows"]) == 200 and found["rows"][0][1] == "199"
    assert os.listdir(cache / "records") == [KEY]


def test_each_kind_is_bounded_the_least_recently_used_going_first(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(wheelfacts.LIMITS, "records", 40_000)
    keys = [f"{n:064x}" for n in range(12)]
    for n, key in enumerate(keys):
        wheelfacts.put("records", key, {"rows": [["x" * 1000, ""]] * 4})
        os.utime(cache / "records" / key, (1_000_000 + n, 1_000_000 + n))
        if n == 1:
            wheelfacts.get("records", keys[0])  # used again: newer than the rest so far
            os.utime(cache / "records" / keys[0], (2_000_000, 2_000_000))
    count, size = wheelfacts.usage("records")
    assert size <= 40_000 and 0 < count < 12
    assert (cache / "records" / keys[0]).exists() and (cache / "records" / keys[-1]).exists()
    assert not (cache / "records" / keys[1]).exists()  # the least recently used


def test_an_entry_dated_ahead_of_the_clock_goes_first_when_a_kind_is_past_its_bound(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An entry written while the clock was years ahead (corrected since) counts as old, as `gc` counts it: it was
    taken for the most recently used, kept while every entry used since went before it, until the clock caught up."""
    monkeypatch.setitem(wheelfacts.LIMITS, "records", 40_000)
    keys = [f"{n:064x}" for n in range(12)]
    for n, key in enumerate(keys):
        wheelfacts.put("records", key, {"rows": [["x" * 1000, ""]] * 4})
        when = 4_070_908_800 if n == 0 else 1_000_000 + n  # the first in 2099
        os.utime(cache / "records" / key, (when, when))
    kept = [key for key in keys if (cache / "records" / key).exists()]
    # it went first, then the least recently used
    assert keys[0] not in kept and kept == keys[-len(kept) :], kept


def test_an_entry_past_its_kinds_bound_is_not_kept(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(wheelfacts.ENTRY_MAX, "metadata", 100)
    wheelfacts.put("metadata", KEY, {"requires_dist": ["x" * 200]})
    assert wheelfacts.get("metadata", KEY) is None


def test_a_record_entry_of_the_wrong_shape_is_read_again(cache: Path) -> None:
    wheelfacts.put("records", KEY, {"rows": [["a.py", 5]]})
    assert wheelrecords.remembered(KEY, "") is None and wheelfacts.get("records", KEY) is None


def wheel_with_cubin(path: Path) -> Path:
    from test_lockscan import cubin

    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("pkg/libk.so", cubin(90))
        archive.writestr("pkg-1.0.dist-info/RECORD", "pkg/libk.so,,\n")
    return path


def test_scan_of_a_wheel_is_kept_and_a_damaged_scan_entry_is_scanned_again(
    cache: Path, tmp_path: Path
) -> None:
    wheel = wheel_with_cubin(tmp_path / "pkg-1.0-py3-none-any.whl")
    first = binaries.scan([wheel])
    digest = binaries._sha256(str(wheel))
    assert remembered.load(digest) is not None
    again = binaries.scan([wheel])
    assert [(f.path, f.code.loadable) for f in again.files] == [
        (f.path, f.code.loadable) for f in first.files
    ]
    assert first.files and first.files[0].code.loadable.cubin == {"sm_90": 1}
    # a kept scan that says sm_120 where the wheel has sm_90, with a counts table of the wrong shape: never believed
    entry = json.loads((cache / "scans" / digest).read_text())
    entry["data"]["members"][0][1]["cubin"] = {"sm_120": "1"}
    (cache / "scans" / digest).write_text(json.dumps(entry))
    third = binaries.scan([wheel])
    assert third.files[0].code.loadable.cubin == {"sm_90": 1}


def test_has_names_entries_that_lie_there_and_nothing_else(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    one, two = "1" * 64, "2" * 64
    assert wheelfacts.has("records", []) and not wheelfacts.has("records", [one])  # no folder yet
    wheelfacts.put("records", one, {"rows": []})
    assert wheelfacts.has("records", [one]) and not wheelfacts.has("records", [one, two])
    assert not wheelfacts.has("records", ["../" + one]) and not wheelfacts.has("nothing", [one])
    (tmp_path / "provision" / "records" / two).mkdir()  # a folder where an entry belongs is none
    assert not wheelfacts.has("records", [two])
    os.symlink(tmp_path / "provision" / "records" / one, tmp_path / "provision" / "records" / ("3" * 64))
    assert not wheelfacts.has("records", ["3" * 64])  # nor a link


def test_an_entry_put_later_lands_where_the_cache_was_when_given(
    cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """put_later keeps an entry until settle (a lock writes its 414 entries at its end, not among its reads): written
    then into the cache folder of the moment it was given, though the environment changed since."""
    wheelfacts.put_later("records", KEY, {"rows": [["a.py", "sha256=x"]]})
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "elsewhere"))
    assert not (cache / "records" / KEY).exists()
    wheelfacts.settle()
    assert json.loads((cache / "records" / KEY).read_text())["data"] == {"rows": [["a.py", "sha256=x"]]}
    assert not (tmp_path / "elsewhere").exists()
    wheelfacts.settle()  # nothing left: nothing done


def test_a_process_that_ends_writes_what_it_was_given_to_put_later(cache: Path) -> None:
    """An entry put_later and never settled by its caller is written as the process ends (atexit), a child's as well."""
    import subprocess
    import sys

    code = (
        "from provision import wheelfacts\n"
        f"wheelfacts.put_later('records', {KEY!r}, {{'rows': [['c.py', 'sha256=y']]}})\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert wheelfacts.get("records", KEY) == {"rows": [["c.py", "sha256=y"]]}


def test_a_write_that_fails_leaves_the_rest_written(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """One entry the disk refuses (full, for a moment) costs that entry alone: the others settled with it are written."""
    import errno

    from provision import atomic

    write = atomic.write_atomic_at
    calls: list[str] = []

    def failing_once(folder: int, name: str, data: bytes, *args: object, **kwargs: object) -> None:
        calls.append(name)
        if len(calls) == 1:
            raise OSError(errno.ENOSPC, "No space left on device")
        write(folder, name, data, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(atomic, "write_atomic_at", failing_once)
    for key in (KEY, OTHER):
        wheelfacts.put_later("urls", key, {"sha256": key})
    wheelfacts.settle()
    assert calls == [KEY, OTHER]
    assert wheelfacts.get("urls", KEY) is None and wheelfacts.get("urls", OTHER) == {"sha256": OTHER}


def test_an_entry_encoded_before_its_key_is_known_reads_back_as_one_put_whole(cache: Path) -> None:
    """A RECORD read while uv resolves is encoded then (its sha256 is said later): put with its key, it is the very
    entry put would have written, and an encoding of another kind is not written."""
    data = {"rows": [["a/b.py", "sha256=x"], ['q"uote\\\\', ""]], "from": "range", "url": "d" * 64}
    wheelfacts.put("records", OTHER, data)
    wheelfacts.put("records", KEY, wheelfacts.encoded("records", data))
    assert (cache / "records" / KEY).read_bytes().replace(KEY.encode(), OTHER.encode()) == (
        cache / "records" / OTHER
    ).read_bytes()
    assert wheelfacts.get("records", KEY) == data
    wheelfacts.put("urls", KEY, wheelfacts.encoded("records", data))
    assert wheelfacts.get("urls", KEY) is None
