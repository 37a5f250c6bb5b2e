"""The RECORDs `lock` reads to find wheels that overwrite each other (stacks/wheelrecords.py): a wheel from the index,
kept in uv's cache or remembered from an earlier read, whose RECORD has a field longer than csv's limit (128 KiB) is a
wheel without a readable RECORD (no conflict can be said of it), never a csv.Error traceback out of `lock`."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

from provision.stacks import wheelrecords

HUGE = "a" * (200 << 10)
RECORD = f"huge/{HUGE}.py,sha256=x,1\nhuge/__init__.py,,\n"


def test_a_wheel_whose_record_has_a_field_past_csvs_limit_has_no_readable_record(tmp_path: Path) -> None:
    wheel = tmp_path / "huge-1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr("huge/__init__.py", "")
        archive.writestr("huge-1.0.dist-info/RECORD", RECORD)
    assert wheelrecords.in_wheel(wheel) is None
    unpacked = tmp_path / "unpacked" / "huge-1.0.dist-info"
    unpacked.mkdir(parents=True)
    (unpacked / "RECORD").write_text(RECORD)
    assert wheelrecords.in_folder(unpacked.parent) is None


def test_a_remembered_record_past_csvs_limit_is_read_as_none(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sha256 = "ab" * 32
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))  # where earlier reads were kept: this test's folder
    wheelrecords.folder().mkdir(parents=True)
    (wheelrecords.folder() / sha256).write_text(RECORD)
    assert wheelrecords.remembered(sha256, "") is None


def test_a_wheel_whose_record_is_compressed_by_an_unknown_method_has_no_readable_record(
    tmp_path: Path,
) -> None:
    """Method 99 (AES) in the zip's headers: zipfile raises NotImplementedError on reading the member."""
    wheel = tmp_path / "odd-1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr("odd-1.0.dist-info/RECORD", "odd/__init__.py,,\n")
    data = bytearray(wheel.read_bytes())
    local, central = data.find(b"PK\x03\x04"), data.find(b"PK\x01\x02")
    data[local + 8 : local + 10] = data[central + 10 : central + 12] = (99).to_bytes(2, "little")
    wheel.write_bytes(bytes(data))
    assert wheelrecords.in_wheel(wheel) is None
