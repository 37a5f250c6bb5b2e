"""Where device code lives: relocatable copies, containers outside `.nv_fatbin`, wheels in place, package versions."""

from __future__ import annotations

import functools
import json
import os
import shutil
import signal
import subprocess
import sys
import zipfile
from pathlib import Path

import nvcc
import pytest
from test_scan import KERNEL, compile_shared
from wheelhouse import build_wheel

from provision.scan import binaries as scan
from provision.scan import wheels

NVCC = shutil.which("nvcc")
needs_nvcc = pytest.mark.skipif(NVCC is None, reason="nvcc is not installed on this machine")
RDC_KERNEL = (
    "__device__ float twice(float v) { return 2.0f * v; }\n"
    "__global__ void k(float* x) { x[threadIdx.x] = twice(x[threadIdx.x]); }\n"
    'extern "C" void go(float* x) { k<<<1, 32>>>(x); }\n'
)


def rdc_library(tmp_path: Path) -> Path:
    """Like NCCL 11's libnccl.so.2: sm_80 code the driver loads, PTX for 12.0 only in the relocatable copy."""
    source = tmp_path / "r.cu"
    source.write_text(RDC_KERNEL)
    out = tmp_path / "librdc.so"
    return nvcc.run(
        [
            "-shared",
            "-Xcompiler",
            "-fPIC",
            "-rdc=true",
            "-o",
            out,
            source,
            "-gencode",
            "arch=compute_80,code=sm_80",
            "-gencode",
            "arch=compute_120,code=compute_120",
        ],
        out,
    )


def data_section_library(tmp_path: Path) -> Path:
    """Like cuFFT: fatbin containers kept in `.data` and `.rodata` (no `.nv_fatbin` section at all)."""
    source = tmp_path / "k.cu"
    source.write_text(KERNEL)
    blob = tmp_path / "k.fatbin"
    nvcc.run(
        [
            "-fatbin",
            "-o",
            blob,
            source,
            "-gencode",
            "arch=compute_120,code=sm_120",
            "-gencode",
            "arch=compute_90,code=[sm_90,compute_90]",
        ],
        blob,
    )
    data = ", ".join(str(b) for b in blob.read_bytes())
    c_source = tmp_path / "blobs.c"
    c_source.write_text(
        f"__attribute__((aligned(8))) unsigned char kernels[] = {{{data}}};\n"
        f"__attribute__((aligned(8))) const unsigned char more[] = {{{data}}};\n"
    )
    out = tmp_path / "libfft.so"
    subprocess.run(["cc", "-shared", "-fPIC", "-o", out, c_source], check=True, timeout=120)
    return out


@pytest.mark.slow
@needs_nvcc
def test_relocatable_copy_is_reported_apart_and_never_judged(tmp_path: Path) -> None:
    library = rdc_library(tmp_path)
    code = scan.code_in_file(library)
    # as cuobjdump --list-elf/--list-ptx
    assert dict(code.loadable.cubin) == {"sm_80": 1} and not code.loadable.ptx
    assert dict(code.relocatable.ptx) == {"compute_120": 1} and dict(code.relocatable.cubin) == {"sm_80": 1}
    result = scan.scan([library], require=("8.0", "12.0"))
    (package,) = result.packages
    assert package.verdicts["8.0"][0] == "pass"
    assert package.verdicts["12.0"][0] == "fail"  # the PTX is link input: nothing runs there
    doc = result.to_dict()
    assert doc["files"][0]["relocatable"]["ptx"] == {"compute_120": 1} and doc["files"][0]["ptx"] == {}
    assert doc["packages"][0]["relocatable"]["ptx"] == {"compute_120": 1}
    # an object file is link input: its __nv_relfatbin is what it carries, reported as cubin/ptx as before
    obj = tmp_path / "r.o"
    nvcc.run(
        [
            "-c",
            "-rdc=true",
            "-Xcompiler",
            "-fPIC",
            "-o",
            obj,
            tmp_path / "r.cu",
            "-gencode",
            "arch=compute_120,code=[sm_120,compute_120]",
        ],
        obj,
    )
    assert (
        dict(scan.code_in_file(obj).loadable.cubin) == {"sm_120": 1}
        and scan.code_in_file(obj).relocatable.empty
    )


@needs_nvcc
def test_containers_outside_fatbin_sections_are_found(tmp_path: Path) -> None:
    library = data_section_library(tmp_path)
    code = scan.code_in_file(library)
    assert dict(code.loadable.cubin) == {"sm_120": 2, "sm_90": 2} and dict(code.loadable.ptx) == {
        "compute_90": 2
    }
    verdicts = scan.scan([library], require=("12.0", "10.0")).packages[0].verdicts
    assert verdicts["12.0"][0] == "pass" and verdicts["10.0"][0] == "warn"


@pytest.mark.slow
@needs_nvcc
def test_wheel_in_place_equals_files_streamed_and_in_parallel(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    libraries = [
        rdc_library(tmp_path),
        data_section_library(tmp_path),
        compile_shared(
            tmp_path,
            [("compute_90a", "sm_90a"), ("compute_120", "[sm_120,compute_120]")],
            ["-Xfatbin", "-compress-all"],
            name="libc.so",
        ),
    ]
    for library in libraries:  # the streaming reader (large members) answers as the file scan does
        streamed = wheels.code_in_stream(functools.partial(library.open, "rb"))
        assert streamed == scan.code_in_file(library), library.name
    files = {f"pkg/{library.name}": library.read_bytes() for library in libraries}
    wheel = build_wheel(tmp_path / "dist", "pkg", "1.0", tag="py3-none-manylinux_2_28_x86_64", files=files)
    serial = scan.scan([wheel], jobs=1)
    monkeypatch.setattr(wheels, "WHOLE", 0)  # every member streamed
    monkeypatch.setattr(wheels, "PARALLEL", 0)  # and spread over processes
    parallel = scan.scan([wheel], jobs=2)
    assert sorted(f.to_dict()["path"] for f in parallel.files) == sorted(
        f.to_dict()["path"] for f in serial.files
    )
    assert [p.to_dict() for p in parallel.packages] == [p.to_dict() for p in serial.packages]
    by_name = {Path(f.path.split("!")[1]).name: f.code for f in serial.files}
    assert by_name == {library.name: scan.code_in_file(library) for library in libraries}


@needs_nvcc
def test_a_row_per_distribution_version(tmp_path: Path) -> None:
    library = compile_shared(tmp_path, [("compute_90", "sm_90")], [])
    new = build_wheel(
        tmp_path / "new",
        "torch",
        "2.14.1",
        tag="cp312-cp312-manylinux_2_28_x86_64",
        files={"torch/lib/libk.so": library.read_bytes()},
    )
    old = build_wheel(
        tmp_path / "old",
        "torch",
        "2.8.0",
        tag="cp312-cp312-manylinux_2_28_x86_64",
        files={"torch/lib/libk.so": library.read_bytes(), "torch/lib/libj.so": library.read_bytes()},
    )
    result = scan.scan([new, old], require=("9.0",))
    assert [(p.name, p.version, p.files) for p in result.packages] == [
        ("torch", "2.14.1", 1),
        ("torch", "2.8.0", 2),
    ]
    assert [p["version"] for p in result.to_dict()["packages"]] == ["2.14.1", "2.8.0"]
    # installed: the version comes from the .dist-info beside the RECORD
    site = tmp_path / "venv/lib/python3.12/site-packages"
    with zipfile.ZipFile(new) as archive:
        archive.extractall(site)
    (row,) = scan.scan([tmp_path / "venv"]).packages
    assert (row.name, row.version) == ("torch", "2.14.1")


@needs_nvcc
def test_one_file_scan_imports_only_what_it_needs(tmp_path: Path) -> None:
    """The whole process has 0.1 s: no pyelftools, rich, packaging or zipfile for `scan --json FILE`, and no dataclass
    generated at import (1-4 ms each: the scan's records are named tuples and plain classes)."""
    library = compile_shared(tmp_path, [("compute_90", "sm_90")], [])
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "provision", "scan", "--json", str(library)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["files"][0]["cubin"] == {"sm_90": 2}
    imported = {
        line.split("|")[-1].strip() for line in done.stderr.splitlines() if line.startswith("import time:")
    }
    assert not {"elftools", "rich", "packaging", "zipfile", "concurrent.futures", "dataclasses"} & imported


def test_magic_found_across_every_cut_by_forked_searchers(monkeypatch: pytest.MonkeyPatch) -> None:
    """The parallel search finds exactly the offsets one `find` loop finds, a magic straddling a cut included, and
    really runs in children (the parent's share is one group, none while it walks the fatbin sections)."""
    from provision.scan import search

    data = bytearray(b"\x50\xed\x55" * 700)  # near-misses everywhere
    ranges = [(5, 900), (900, 1500), (1600, 2100)]
    for at in (5, 6, 300, 301, 302, 303, 598, 896, 897, 1200, 1496, 1497, 1600, 2096):
        data[at : at + 4] = search.MAGIC
    expected = [
        at for start, end in ranges for at in range(start, end - 3) if data[at : at + 4] == search.MAGIC
    ]
    monkeypatch.setattr(search, "SLICE_MIN", 16)
    for jobs in range(1, 9):
        pending = search.Search(bytes(data), ranges, jobs)
        assert len(pending.children) == jobs - 1
        assert pending.result() == expected, jobs
        # a caller that walks `.nv_fatbin` meanwhile leaves every share to a child (one process: it searches it all)
        pending = search.Search(bytes(data), ranges, jobs, walking=True)
        assert (len(pending.children), len(pending.own)) == ((jobs, 0) if jobs > 1 else (0, 1))
        assert pending.result() == expected, jobs


@needs_nvcc
def test_data_sections_searched_in_parallel_give_the_same_code(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from provision.scan import elf, search

    library = data_section_library(tmp_path)
    one = elf.code_in_image(library.read_bytes())
    monkeypatch.setattr(search, "SLICE_MIN", 64)  # every data section cut in slices, each searched by a child
    assert elf.code_in_image(library.read_bytes(), jobs=4) == one == scan.code_in_file(library)
    assert dict(one.loadable.cubin) == {"sm_120": 2, "sm_90": 2}
    image = elf.read_image(library.read_bytes(), 0, library.stat().st_size)
    assert [s.name for s in image.sections if s.name == ".eh_frame" and elf.role(image, s)] == []


@needs_nvcc
def test_a_name_table_far_from_the_section_table_is_not_inflated_twice(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """lld writes `.shstrtab` before a `.strtab` of 188 MB (libtensorflow_cc): the second look at the names starts
    from the last mark of the member before them, not from its first byte (every large member was inflated twice)."""
    import struct

    from provision.scan import members

    library = data_section_library(tmp_path)
    data = library.read_bytes()
    (shoff,) = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    names_header = shoff + shstrndx * shentsize
    names_at, names_size = struct.unpack_from("<QQ", data, names_header + 0x18)
    filler = bytes(range(256)) * (3 << 12)  # 3 MiB before the names and 3 MiB after them, as a `.strtab` is
    moved = bytearray(data[:shoff] + filler + data[names_at : names_at + names_size] + filler + data[shoff:])
    struct.pack_into("<Q", moved, 0x28, shoff + 2 * len(filler) + names_size)
    struct.pack_into("<Q", moved, 2 * len(filler) + names_size + names_header + 0x18, shoff + len(filler))
    far = tmp_path / "libfar.so"
    far.write_bytes(bytes(moved))
    wheel = build_wheel(
        tmp_path / "dist",
        "far",
        "1.0",
        tag="py3-none-manylinux_2_28_x86_64",
        files={"far/libfar.so": bytes(moved)},
    )
    given = []
    real_read = members.Reader.read

    def counting_read(self: members.Reader, count: int = -1) -> bytes:
        part = real_read(self, count)
        given.append(len(part))
        return part

    monkeypatch.setattr(members.Reader, "read", counting_read)
    monkeypatch.setattr(wheels, "WHOLE", 0)  # streamed
    monkeypatch.setattr(wheels, "MARK", 256 << 10)
    (row,) = scan.scan([wheel], jobs=1).files
    assert row.code == scan.code_in_file(far) == scan.code_in_file(library)
    assert dict(row.code.loadable.cubin) == {"sm_120": 2, "sm_90": 2}
    # once, then at most a mark's stretch again
    assert sum(given) < len(moved) + (256 << 10) + (1 << 20) + 4096


def test_a_child_that_dies_leaves_its_slice_to_the_parent(monkeypatch: pytest.MonkeyPatch) -> None:
    from provision.scan import search

    data = bytearray(4096)
    for at in (10, 1500, 3000):
        data[at : at + 4] = search.MAGIC
    monkeypatch.setattr(search, "SLICE_MIN", 16)
    real_hits = search.hits
    parent = os.getpid()

    def dying_hits(buffer: object, pieces: list[search.Piece]) -> list[int]:
        if os.getpid() != parent:
            os.kill(os.getpid(), signal.SIGKILL)  # a child killed before it writes a byte
        return real_hits(buffer, pieces)

    monkeypatch.setattr(search, "hits", dying_hits)
    pending = search.Search(bytes(data), [(0, 4096)], 3)
    assert len(pending.children) == 2 and pending.result() == [10, 1500, 3000]


def test_children_reaped_by_an_ignored_sigchld(monkeypatch: pytest.MonkeyPatch) -> None:
    """Where SIGCHLD is ignored (a service manager, a parent shell's setting), the kernel reaps the children itself:
    waitpid finds none, and what they wrote is still used."""
    from provision.scan import search

    data = bytearray(4096)
    for at in (10, 1500, 3000):
        data[at : at + 4] = search.MAGIC
    monkeypatch.setattr(search, "SLICE_MIN", 16)
    previous = signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    try:
        assert search.Search(bytes(data), [(0, 4096)], 3).result() == [10, 1500, 3000]
    finally:
        signal.signal(signal.SIGCHLD, previous)
