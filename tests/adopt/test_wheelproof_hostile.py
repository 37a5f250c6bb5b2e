"""wheelproof's proof of hostile zips (the members inflated by provision.scan.members over the spooled file's
descriptor, or over the bytes of a download held in memory): each is NotProven, never a traceback of another kind,
never a hang, never a read past a bound."""

from __future__ import annotations

import io
import struct
import tempfile
import time
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest
from wheelhouse import build_wheel

from provision.stacks import wheelproof

LIB = b"\x7fELF" + bytes(range(256)) * 64  # 16 KiB: stored and deflated copies below


def _wheel(tmp_path: Path) -> bytearray:
    """A genuine wheel (proven as it is) with pkg/lib.so deflated and pkg/raw.so stored."""
    built = build_wheel(tmp_path, "hostile", "1.0", files={"pkg/lib.so": LIB, "pkg/raw.so": LIB[::-1]})
    out = tmp_path / "rewritten.whl"
    with zipfile.ZipFile(built) as source, zipfile.ZipFile(out, "w") as target:
        for info in source.infolist():
            method = zipfile.ZIP_STORED if info.filename == "pkg/raw.so" else zipfile.ZIP_DEFLATED
            target.writestr(info.filename, source.read(info), compress_type=method)
    return bytearray(out.read_bytes())


def _central(data: bytearray, name: str) -> int:
    at = 0
    while (at := data.find(b"PK\x01\x02", at)) >= 0:
        size = struct.unpack_from("<H", data, at + 28)[0]
        if data[at + 46 : at + 46 + size] == name.encode():
            return at
        at += 4
    raise AssertionError(name)


def _local(data: bytearray, name: str) -> int:
    return struct.unpack_from("<I", data, _central(data, name) + 42)[0]


def _put(data: bytearray, at: int, form: str, value: int) -> None:
    struct.pack_into(form, data, at, value)


def _get(data: bytearray, at: int, form: str) -> int:
    return struct.unpack_from(form, data, at)[0]


Mutation = Callable[[bytearray, str], None]
MUTATIONS: dict[str, Mutation] = {
    "local name differs": lambda d, n: d.__setitem__(_local(d, n) + 30, ord("q")),
    "local extra length +7": lambda d, n: _put(d, _local(d, n) + 28, "<H", 7),
    "local extra length 65535": lambda d, n: _put(d, _local(d, n) + 28, "<H", 0xFFFF),
    "local signature broken": lambda d, n: d.__setitem__(_local(d, n), 0),
    "encrypted flag": lambda d, n: _put(d, _central(d, n) + 8, "<H", _get(d, _central(d, n) + 8, "<H") | 1),
    "crc lies": lambda d, n: _put(d, _central(d, n) + 16, "<I", _get(d, _central(d, n) + 16, "<I") ^ 1),
    "compressed size 0": lambda d, n: _put(d, _central(d, n) + 20, "<I", 0),
    "compressed size -100": lambda d, n: _put(
        d, _central(d, n) + 20, "<I", _get(d, _central(d, n) + 20, "<I") - 100
    ),
    # a stored member's compressed size past the file's end (a deflated one ends at its own end marker, as zipfile
    # reads it: the bytes hashed are the member's, and a data descriptor flag alone changes nothing either)
    "compressed size huge": lambda d, n: _put(d, _central(d, n) + 20, "<I", 0xFFFFFFF0),
    "size 0": lambda d, n: _put(d, _central(d, n) + 24, "<I", 0),
    "size -1": lambda d, n: _put(d, _central(d, n) + 24, "<I", _get(d, _central(d, n) + 24, "<I") - 1),
    "size +1": lambda d, n: _put(d, _central(d, n) + 24, "<I", _get(d, _central(d, n) + 24, "<I") + 1),
    "size huge": lambda d, n: _put(d, _central(d, n) + 24, "<I", 0xFFFFFFF0),
    "method stored<->deflated": lambda d, n: _put(
        d, _central(d, n) + 10, "<H", 8 - _get(d, _central(d, n) + 10, "<H")
    ),
    "method 99": lambda d, n: _put(d, _central(d, n) + 10, "<H", 99),
    "header offset past the end": lambda d, n: _put(d, _central(d, n) + 42, "<I", len(d) + 10),
    "header offset at the other member": lambda d, n: _put(
        d, _central(d, n) + 42, "<I", _local(d, "pkg/raw.so" if n == "pkg/lib.so" else "pkg/lib.so")
    ),
    "data damaged": lambda d, n: d.__setitem__(slice(_local(d, n) + 50, _local(d, n) + 60), bytes(10)),
}


# every mutation of both members but one: a deflated member whose compressed size is huge still ends at its own end
# marker (zipfile reads it so too), and the bytes hashed are the member's: that wheel is proven, rightly
CASES = [
    (mutation, name)
    for mutation in MUTATIONS
    for name in ("pkg/lib.so", "pkg/raw.so")
    if (mutation, name) != ("compressed size huge", "pkg/lib.so")
]


HELD = {"spooled": tempfile.TemporaryFile, "in memory": io.BytesIO}


@pytest.mark.parametrize("held", HELD)
@pytest.mark.parametrize(("mutation", "name"), CASES)
@pytest.mark.timeout(20)
def test_a_hostile_zip_is_not_proven(tmp_path: Path, mutation: str, name: str, held: str) -> None:
    """A local header whose extra length puts the data past the file's end hung the proof for ever (the reader
    waited for data a file that ended gives no more of); zipfile's reader said EOFError. A download held in memory
    is read by the same reader over its bytes, with the same answers."""
    data = _wheel(tmp_path)
    with HELD[held]() as genuine:
        genuine.write(data)
        genuine.seek(0)
        wheelproof.record_of(genuine, verify=True)  # proven as built
    MUTATIONS[mutation](data, name)
    started = time.monotonic()
    with HELD[held]() as spool, pytest.raises(wheelproof.NotProven):
        spool.write(data)
        spool.seek(0)
        wheelproof.record_of(spool, verify=True)
    assert time.monotonic() - started < 10
