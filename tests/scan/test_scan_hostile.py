"""Hostile and damaged input to `provision scan`: one line and an exit code, never a traceback, never a hang."""

from __future__ import annotations

import contextlib
import os
import random
import shutil
import signal
import struct
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from launch import run_provision
from wheelhouse import build_wheel

from provision.cli.options import compute_capability
from provision.errors import InputError
from provision.scan import archives, fatbin
from provision.scan import binaries as scan

NVCC = shutil.which("nvcc")
WHEEL_TAG = "py3-none-manylinux_2_28_x86_64"
RUNS = 100  # fuzz samples per run of the test


@contextmanager
def deadline(seconds: int) -> Iterator[None]:
    """Fail instead of hanging: SIGALRM raises in the scan if it runs past `seconds`."""

    def expired(_signum: int, _frame: object) -> None:
        raise TimeoutError(f"scan still running after {seconds} s")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def run(*args: str) -> tuple[int, str, str]:
    """`provision ARGS` as a real process: (exit code, stdout, stderr)."""
    done = run_provision(*args, timeout=120)
    assert "Traceback" not in done.stderr, done.stderr
    return done.returncode, done.stdout, done.stderr


def ar_archive(members: list[tuple[str, bytes]], sizes: dict[str, str] | None = None) -> bytes:
    out = bytearray(archives.AR_MAGIC)
    for name, data in members:
        size = (sizes or {}).get(name, str(len(data)))
        out += (
            f"{name + '/':<16}{0:<12}{0:<6}{0:<6}{644:<8}{size:<10}`\n".encode()
            + data
            + (b"\n" if len(data) % 2 else b"")
        )
    return bytes(out)


def elf64(sections: list[tuple[str, int, int, int, int]], e_type: int = 3, payload: bytes = b"") -> bytes:
    """A minimal ELF64 little-endian file: (name, type, flags, offset, size) sections and a name table."""
    names = b"\0" + b"\0".join(n.encode() for n, *_ in sections) + b"\0.shstrtab\0"
    body = bytearray(64) + payload
    names_at = len(body)
    body += names
    while len(body) % 8:
        body += b"\0"
    shoff = len(body)
    table = bytearray(64)  # section 0
    position = 1
    for name, kind, flags, offset, size in sections:
        table += struct.pack("<IIQQQQIIQQ", position, kind, flags, 0, offset, size, 0, 0, 8, 0)
        position += len(name) + 1
    table += struct.pack("<IIQQQQIIQQ", position, 3, 0, 0, names_at, len(names), 0, 0, 1, 0)
    header = b"\x7fELF" + bytes([2, 1, 1, 0]) + bytes(8)
    header += struct.pack(
        "<HHIQQQIHHHHHH", e_type, 62, 1, 0, 0, shoff, 0, 64, 56, 0, 64, len(sections) + 2, len(sections) + 1
    )
    body[:64] = header
    return bytes(body + table)


def container(arch: int, kind: int = fatbin.KIND_CUBIN) -> bytes:
    entry = struct.pack("<HHIQ", kind, 0x101, 64, 8) + bytes(12) + struct.pack("<I", arch) + bytes(8)
    entry += struct.pack("<Q", 0x11) + bytes(16) + b"payload!"
    return struct.pack("<IHHQ", fatbin.CONTAINER_MAGIC, 1, 16, len(entry)) + entry


def test_ar_member_with_a_negative_size_ends(tmp_path: Path) -> None:
    good = elf64([(".nv_fatbin", 1, 2, 64, len(container(90)))], payload=container(90))
    archive = ar_archive([("a.o", good), ("b.o", good)], sizes={"b.o": "-60"})
    (tmp_path / "libx.a").write_bytes(archive)
    folder = tmp_path / "site"
    folder.mkdir()
    (folder / "liby.a").write_bytes(archive)
    wheel = build_wheel(tmp_path / "dist", "hostile", "1.0", tag=WHEEL_TAG, files={"hostile/libz.a": archive})
    with deadline(20):
        for target in (tmp_path / "libx.a", folder, wheel):
            result = scan.scan([target])
            assert result.files == [] and any("size '-60'" in note for note in result.notes), result.notes
    with pytest.raises(archives.DamagedArchive):
        list(archives.members(ar_archive([("a.o", good)], sizes={"a.o": "99999"})))


def test_fifo_named_like_a_library_is_not_opened(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "libcuda.so")
    os.mkfifo(tmp_path / "trap.whl")
    with deadline(20):
        assert scan.scan([tmp_path]).files == []  # walked past: never opened
        result = scan.scan([tmp_path / "libcuda.so"])  # named on the command line: a note
        assert result.files == [] and "not a regular file" in result.notes[0]
        assert "not a regular file" in scan.scan([tmp_path / "trap.whl"]).notes[0]


@pytest.mark.parametrize("size", [2**63, 2**64 - 1, 2**40])
def test_huge_section_sizes_are_clipped_or_noted(tmp_path: Path, size: int) -> None:
    payload = container(120)
    (tmp_path / "big.so").write_bytes(
        elf64([(".nv_fatbin", 1, 2, 64, size), (".data", 1, 3, 2**62, size)], payload=payload)
    )
    # 32-bit ELF goes through pyelftools: its OverflowError/MemoryError become a note
    thirty_two = bytearray(elf64([(".nv_fatbin", 1, 2, 64, size)], payload=payload))
    thirty_two[4] = 1
    (tmp_path / "small.so").write_bytes(bytes(thirty_two))
    result = scan.scan([tmp_path], require=("12.0",))
    by_name = {Path(f.path).name: f for f in result.files}
    assert dict(by_name["big.so"].code.loadable.cubin) == {"sm_120": 1}
    assert "small.so" not in by_name


def test_wheels_that_are_not_zips_bad_crc_or_bad_names(tmp_path: Path) -> None:
    (tmp_path / "fake-1.0-py3-none-any.whl").write_bytes(b"PK\x03\x04 not really a zip")
    code, _out, err = run("scan", str(tmp_path / "fake-1.0-py3-none-any.whl"))
    assert code == 2 and "not a readable wheel" in err and "hint:" in err
    library = elf64([(".nv_fatbin", 1, 2, 64, len(container(90)))], payload=container(90))
    wheel = build_wheel(tmp_path / "dist", "crc", "1.0", tag=WHEEL_TAG, files={"crc/lib.so": library})
    data = bytearray(wheel.read_bytes())
    with zipfile.ZipFile(wheel) as archive:
        info = archive.getinfo("crc/lib.so")
    start = info.header_offset + 30 + len(info.filename.encode()) + len(info.extra)
    data[start + info.compress_size // 2] ^= 0xFF
    wheel.write_bytes(bytes(data))
    code, _out, err = run("scan", str(wheel))
    assert code == 2 and "not a readable wheel" in err
    # a member whose directory says 100 bytes and whose data inflates to more: one line naming it, exit 2
    small = build_wheel(tmp_path / "lies", "lies", "1.0", tag=WHEEL_TAG, files={"lies/lib.so": library})
    data = bytearray(small.read_bytes())
    central = data.find(b"PK\x01\x02")
    data[central + 24 : central + 28] = (100).to_bytes(4, "little")
    small.write_bytes(bytes(data))
    code, _out, err = run("scan", str(small))
    assert (
        code == 2 and "'lies/lib.so' inflates past its size, 100 bytes" in err and len(err.splitlines()) == 2
    ), err
    named = tmp_path / "notawheel.whl"
    named.write_bytes(b"")
    code, _out, err = run("scan", str(named))
    assert code == 2 and "not a wheel file name" in err


def test_require_labels(tmp_path: Path) -> None:
    # a single-digit SM label
    seven = elf64([(".nv_fatbin", 1, 2, 64, len(container(7)))], payload=container(7))
    (tmp_path / "lib7.so").write_bytes(seven)
    code, out, _err = run("scan", str(tmp_path / "lib7.so"), "--require", "9", "--json")
    assert code == 1 and '"9.0"' in out and "sm_7" in out
    assert compute_capability("12") == "12.0" and compute_capability("sm_9") == "9.0"
    assert compute_capability("90") == "9.0" and compute_capability("sm_120a") == "12.0"
    assert compute_capability("120") == "12.0" and compute_capability("9") == "9.0"
    code, _out, err = run("scan", str(tmp_path / "lib7.so"), "--require", "1.2.3")
    assert code == 2 and "not a compute capability" in err


def mutations(seed: bytes, rng: random.Random) -> Iterator[bytes]:
    """Byte flips, extreme values written over header fields, and truncations of `seed`."""
    extremes = [b"\xff" * 8, b"\x00" * 8, struct.pack("<q", -1), struct.pack("<Q", 2**63), b"-60       "]
    while True:
        data = bytearray(seed)
        for _ in range(rng.choice([1, 2, 4, 16])):
            roll = rng.random()
            at = rng.randrange(len(data))
            if roll < 0.5:
                data[at] = rng.randrange(256)
            elif roll < 0.9:
                # header fields: the ELF header, section table, container/entry headers, ar headers
                hot = [
                    rng.randrange(64),
                    len(data) - rng.randrange(1, min(len(data), 4096)),
                    max(0, seed.find(struct.pack("<I", fatbin.CONTAINER_MAGIC))) + rng.randrange(128),
                    at,
                ]
                spot = rng.choice(hot)
                value = rng.choice(extremes)
                data[spot : spot + len(value)] = value
            else:
                del data[at:]
                break
        yield bytes(data)


@pytest.mark.slow
@pytest.mark.skipif(NVCC is None, reason="nvcc is not installed on this machine")
def test_fuzz_no_traceback_no_hang(tmp_path: Path) -> None:
    """Mutated ELF, ar and wheel files (seeded: the same RUNS samples every time, however loaded the machine): every scan
    ends with a result or an InputError."""
    from test_scan import compile_shared

    # one of test_scan's builds: compiled once
    library = compile_shared(
        tmp_path, [("compute_120a", "compute_120a"), ("compute_90", "sm_90")], ["-Xfatbin", "-compress-all"]
    ).read_bytes()
    seeds = {"lib.so": library, "libk.a": ar_archive([("k.o", library), ("j.o", library)])}
    rng = random.Random(13)
    streams = {name: mutations(seed, rng) for name, seed in seeds.items()}
    work = tmp_path / "fuzz"
    work.mkdir()
    for runs in range(RUNS):
        name = rng.choice(sorted(seeds))
        sample = next(streams[name])
        target = work / name
        target.write_bytes(sample)
        if runs % 10 == 9:  # now and then inside a wheel (streamed and whole) and a damaged zip around it
            target.unlink()
            wheel = build_wheel(work, "fuzz", "1.0", tag=WHEEL_TAG, files={f"fuzz/{name}": sample})
            raw = bytearray(wheel.read_bytes())
            if rng.random() < 0.5:
                raw[rng.randrange(len(raw))] ^= 0xFF
            wheel.write_bytes(bytes(raw))
            target = wheel
        with deadline(20), contextlib.suppress(InputError):  # a damaged zip: one documented line
            scan.scan([target], require=("9.0", "12.0"))
        target.unlink()
    # the same run as a process: one line of output per problem, never a traceback
    (work / "lib.so").write_bytes(next(streams["lib.so"]))
    done = run_provision("scan", work, "--json", timeout=60)
    assert "Traceback" not in done.stderr and done.returncode in (0, 1)


def test_fifo_named_record_or_metadata_in_a_scanned_folder_is_not_opened(tmp_path: Path) -> None:
    info = tmp_path / "site-packages" / "trap-1.0.dist-info"
    info.mkdir(parents=True)
    os.mkfifo(info / "RECORD")
    other = tmp_path / "site-packages" / "bait-1.0.dist-info"
    other.mkdir()
    os.mkfifo(other / "METADATA")
    (other / "RECORD").write_text("bait/libk.so,,\n")
    # a real process: the deadline's TimeoutError is an OSError, which the RECORD reader would swallow
    done = run_provision("scan", tmp_path / "site-packages", "--json", timeout=30)
    # the pipes are skipped, never waited on (a hang: TimeoutExpired)
    assert done.returncode == 0, done.stderr


def test_each_worker_opens_the_wheel_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The central directory of a wheel of 24,000 members is read once per worker, not once per ELF member (the
    workers re-opened the zip for each one: twice the CPU of unzip)."""
    from provision.scan import wheels

    members = {f"pkg/lib{i}.so": b"\x7fELF" + bytes(60) for i in range(8)} | {
        f"pkg/m{i}.py": b"x = 1\n" * 4 for i in range(50)
    }
    wheel = build_wheel(tmp_path, "many", "1.0", tag=WHEEL_TAG, files=members)
    opened = tmp_path / "opened"
    real_init = zipfile.ZipFile.__init__

    def counting_init(self: zipfile.ZipFile, *args: object, **kwargs: object) -> None:
        with open(opened, "a") as log:
            log.write(f"{os.getpid()}\n")
        real_init(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(zipfile.ZipFile, "__init__", counting_init)
    monkeypatch.setattr(wheels, "PARALLEL", 0)  # the worker processes even for a small wheel
    results = list(wheels.scan_wheel(wheel, jobs=2))
    assert sorted(name for name, _code, _why in results) == sorted(n for n in members if n.endswith(".so"))
    workers = {int(pid) for pid in opened.read_text().split()} - {os.getpid()}
    assert len(opened.read_text().split()) <= 1 + len(workers) and len(workers) <= 2
