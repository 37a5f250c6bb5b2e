"""A download `adopt` proves is held in memory where its page gives a size of at most wheelproof.IN_MEMORY (no more
than that size is read): its members are read out of those bytes, without a system call per read (in a thread each
one hands the GIL back and forth: 46,000 preads for the 123 wheels of a real venv). A wheel of no size given, or a
larger one, is spooled to a file as before. Either way the proof is the same: a real wheel served on 127.0.0.1."""

from __future__ import annotations

import hashlib
import os
import tempfile
import zipfile

import pytest

from provision.stacks import wheelproof

FILES = {f"pkg/mod{i}.py": f"X = {i}\n".encode() * 400 for i in range(12)}


@pytest.fixture
def served(index_server) -> tuple[str, str, int]:
    index = index_server.index("held")
    wheel = index.add("held", "1.0", files=FILES)
    return (
        f"http://127.0.0.1:{index_server.port}/held/files/{wheel.name}",
        hashlib.sha256(wheel.read_bytes()).hexdigest(),
        wheel.stat().st_size,
    )


def _counted(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    counts = {"pread": 0, "spooled": 0}
    pread, spool = os.pread, tempfile.TemporaryFile

    def counting_pread(fd: int, count: int, offset: int) -> bytes:
        counts["pread"] += 1
        return pread(fd, count, offset)

    def counting_spool(*args: object, **kwargs: object):  # type: ignore[no-untyped-def]
        counts["spooled"] += 1
        return spool(*args, **kwargs)  # type: ignore[call-overload]

    monkeypatch.setattr(os, "pread", counting_pread)
    monkeypatch.setattr(tempfile, "TemporaryFile", counting_spool)
    return counts


def test_a_wheel_whose_page_gives_its_size_is_proven_in_memory(
    served: tuple[str, str, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    url, sha256, size = served
    counts = _counted(monkeypatch)
    record, found = wheelproof.downloaded(url, sha256, size)
    assert found == sha256
    assert all(name in record for name in FILES)
    assert counts == {"pread": 0, "spooled": 0}


@pytest.mark.parametrize("why", ["no size given", "larger than IN_MEMORY"])
def test_a_wheel_of_no_size_or_a_large_one_is_spooled_and_proven_the_same(
    served: tuple[str, str, int], monkeypatch: pytest.MonkeyPatch, why: str
) -> None:
    url, sha256, size = served
    if why == "larger than IN_MEMORY":
        monkeypatch.setattr(wheelproof, "IN_MEMORY", size - 1)
    counts = _counted(monkeypatch)
    record, found = wheelproof.downloaded(url, sha256, None if why == "no size given" else size)
    assert found == sha256
    assert all(name in record for name in FILES)
    assert counts["spooled"] == 1
    assert counts["pread"] >= 2 * len(FILES)  # each member's local header and name, then its data


def test_a_wheel_held_in_memory_that_lies_about_its_members_is_not_proven(
    index_server, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The held bytes answer as the spooled file does: a member changed after its RECORD was written is refused."""
    index = index_server.index("lies")
    wheel = index.add("lies", "1.0", files=FILES)
    out = wheel.with_suffix(".tmp")
    with zipfile.ZipFile(wheel) as source, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as target:
        for info in source.infolist():
            body = source.read(info)
            target.writestr(info.filename, b"X = 666\n" if info.filename == "pkg/mod3.py" else body)
    out.replace(wheel)
    url = f"http://127.0.0.1:{index_server.port}/lies/files/{wheel.name}"
    counts = _counted(monkeypatch)
    with pytest.raises(wheelproof.NotProven, match="pkg/mod3.py does not match its RECORD"):
        wheelproof.downloaded(url, hashlib.sha256(wheel.read_bytes()).hexdigest(), wheel.stat().st_size)
    assert counts == {"pread": 0, "spooled": 0}


def test_downloads_held_at_once_stay_within_the_budget_and_give_their_share_back(
    served: tuple[str, str, int], index_server, monkeypatch: pytest.MonkeyPatch
) -> None:
    """16 threads of 32 MiB wheels would hold 512 MiB: past HELD_BUDGET in all, a download is spooled instead; a
    proof that ends, proven or not, gives its share back."""
    url, sha256, size = served
    monkeypatch.setattr(wheelproof, "HELD_BUDGET", size + size // 2)  # room for one of these at a time
    counts = _counted(monkeypatch)
    with wheelproof._held_if_room(size) as first:  # another thread's download, held meanwhile
        assert first
        wheelproof.downloaded(url, sha256, size)
        assert counts["spooled"] == 1
    junk = b"not a zip at all" * 64
    folder = index_server.index("junk").root / "junk"
    folder.mkdir()
    (folder / "junk-1.0-py3-none-any.whl").write_bytes(junk)
    with pytest.raises(wheelproof.NotProven):  # not a wheel: its share is given back all the same
        wheelproof.downloaded(
            f"http://127.0.0.1:{index_server.port}/junk/files/junk-1.0-py3-none-any.whl",
            hashlib.sha256(junk).hexdigest(),
            len(junk),
        )
    assert wheelproof._held == [0]
    wheelproof.downloaded(url, sha256, size)
    assert counts["spooled"] == 1 and wheelproof._held == [0]
