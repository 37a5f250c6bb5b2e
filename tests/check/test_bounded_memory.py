"""Nothing hostile is inflated or read whole: a wheel member starting like an ELF file that is not a 64-bit one, an ar
archive, an ELF whose section table is at its start (scan); a METADATA with a huge description, a RECORD past its
bound (the drift check). Each run's peak memory is measured from outside (the largest child's RSS) and held to a
bound far below what reading any of them whole would take."""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import tiny
from launch import environment

pytestmark = pytest.mark.timeout(300)
MEMBER = 512 << 20  # each hostile member inflates to this; read whole (twice, as before) it took over 1 GiB
PEAK = 256 << 20  # what a run may take at most, interpreter and all
PEAK_PROBE = """import resource, subprocess, sys
done = subprocess.run(sys.argv[1:], capture_output=True, text=True, timeout=240)
print(done.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024)
sys.stderr.write(done.stderr)
sys.stdout.write(done.stdout)"""


def peak(*argv: str, env: dict[str, str] | None = None) -> tuple[int, int, str, str]:
    """(exit code, peak RSS in bytes, stdout, stderr) of one run, measured by a parent of its own."""
    done = subprocess.run(
        [sys.executable, "-c", PEAK_PROBE, *argv], capture_output=True, text=True, timeout=280, env=env
    )
    first, _, rest = done.stdout.partition("\n")
    code, rss = (int(x) for x in first.split())
    return code, rss, rest, done.stderr


def elf_head(cls: int, shoff: int = 0) -> bytes:
    """An ELF header: class 1 (32-bit) or 2 (64-bit, little-endian, section table at `shoff`, 1 section of 64 bytes)."""
    ident = b"\x7fELF" + bytes([cls, 1, 1, 0]) + bytes(8)
    return ident + struct.pack("<HHIQQQIHHHHHH", 3, 62, 1, 0, 0, shoff, 0, 64, 56, 0, 64, 1, 0)


def ar_of(member: bytes, size: int) -> bytes:
    return b"!<arch>\n" + f"{'lib.o/':<16}{0:<12}{0:<6}{0:<6}{644:<8}{size:<10}`\n".encode() + member


def hostile_wheel(folder: Path, head: bytes, size: int = MEMBER) -> Path:
    path = folder / "evil-1.0-py3-none-manylinux_2_28_x86_64.whl"
    with (
        zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as wheel,
        wheel.open("evil/libevil.so", "w", force_zip64=True) as member,
    ):
        member.write(head)
        block = bytes(8 << 20)
        written = len(head)
        while written < size:
            member.write(block[: size - written])
            written += min(len(block), size - written)
    return path


@pytest.mark.parametrize("kind", ["elf32", "ar-of-elf32", "elf64-table-first"])
def test_scan_never_inflates_a_hostile_member_whole(tmp_path: Path, provision_bin: str, kind: str) -> None:
    head = {
        "elf32": elf_head(1),
        "ar-of-elf32": ar_of(elf_head(1), MEMBER - 68),
        "elf64-table-first": elf_head(2, shoff=64),
    }[kind]
    wheel = hostile_wheel(tmp_path, head)
    assert wheel.stat().st_size < 8 << 20  # a few MiB on disk
    code, rss, out, err = peak(provision_bin, "scan", str(wheel), "--json")
    assert code == 0 and "Traceback" not in err, err
    assert rss < PEAK, f"{kind}: {rss >> 20} MiB"
    notes = json.loads(out)["notes"]
    assert kind == "elf64-table-first" or any(
        "libevil.so" in note and "not read" in note for note in notes
    ), notes


def test_the_drift_check_reads_metadata_headers_and_bounded_records(
    index_server, provision_bin: str, tmp_path: Path
) -> None:
    tool = tiny.tool_with_env(tmp_path, provision_bin, tiny.index(index_server))
    site = next((tool.home / "envs" / "tiny" / "venv").resolve().glob("lib/python3*/site-packages"))
    info = site / "alpha-1.0.dist-info"
    metadata = info / "METADATA"
    with open(metadata, "ab") as handle:  # a description after the headers, as large as the member above
        handle.write(b"\n")
        handle.truncate(MEMBER)
    with open(info / "RECORD", "ab") as handle:  # past the RECORD bound (64 MiB): a finding, never read
        handle.truncate(80 << 20)
    code, rss, out, err = peak(
        tool.binary, "check", "tiny", "--only", "drift", "--json", env=environment(tool.env())
    )
    assert code == 0 and "Traceback" not in err, err
    assert rss < PEAK, f"{rss >> 20} MiB"
    findings = json.loads(out)["checks"][0]["details"]["findings"]
    assert any(
        f["path"] == "alpha-1.0.dist-info/RECORD" and "larger than 64 MiB" in f["found"] for f in findings
    ), findings
    os.truncate(info / "RECORD", 0)
