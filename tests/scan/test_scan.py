"""The scan against nvcc ground truth: build binaries for known -gencode sets and count what must be there."""

from __future__ import annotations

import json
import shutil
import subprocess
import zipfile
from collections import Counter
from pathlib import Path

import nvcc
import pytest
from launch import run_provision
from wheelhouse import build_wheel

from provision.scan import binaries as scan
from provision.scan import elf, fatbin

NVCC = shutil.which("nvcc")
needs_nvcc = pytest.mark.skipif(NVCC is None, reason="nvcc is not installed on this machine")
KERNEL = '__global__ void k(float* x) { x[threadIdx.x] *= 2.0f; }\nextern "C" void go(float* x) { k<<<1, 32>>>(x); }\n'

# (gencode pairs (arch, code), extra nvcc flags, expected cubin labels, expected PTX labels).
# A shared library holds each real target twice: the code and its device-link stub.
CASES = [
    ([("compute_90a", "sm_90a"), ("compute_120", "sm_120")], [], {"sm_90a": 2, "sm_120": 2}, {}),
    ([("compute_120f", "sm_121f"), ("compute_80", "sm_86")], [], {"sm_121f": 2, "sm_86": 2}, {}),
    ([("compute_100", "compute_100"), ("compute_75", "sm_75")], [], {"sm_75": 2}, {"compute_100": 1}),
    (
        [("compute_100a", "sm_100a"), ("compute_100f", "sm_100f"), ("compute_100", "sm_103")],
        [],
        {"sm_100a": 2, "sm_100f": 2, "sm_103": 2},
        {},
    ),
    (
        [("compute_120a", "compute_120a"), ("compute_90", "sm_90")],
        ["-Xfatbin", "-compress-all"],
        {"sm_90": 2},
        {"compute_120a": 1},
    ),
    ([("compute_90", "[sm_90,compute_90]")], ["--compress-mode=size"], {"sm_90": 2}, {"compute_90": 1}),
    (
        [("compute_90", "[sm_90,compute_90]")],
        ["-Xfatbin", "-compress=false"],
        {"sm_90": 2},
        {"compute_90": 1},
    ),
]


def compile_shared(
    tmp_path: Path, gencodes: list[tuple[str, str]], flags: list[str], name: str = "lib.so"
) -> Path:
    out = tmp_path / name
    source = tmp_path / "k.cu"
    source.write_text(KERNEL)
    argv: list[str | Path] = ["-shared", "-Xcompiler", "-fPIC", "-o", out, source, *flags]
    for arch, code in gencodes:
        argv += ["-gencode", f"arch={arch},code={code}"]
    return nvcc.run(argv, out)


@needs_nvcc
@pytest.mark.parametrize(("gencodes", "flags", "cubins", "ptx"), CASES)
def test_scan_finds_exactly_what_nvcc_compiled(tmp_path: Path, gencodes, flags, cubins, ptx) -> None:
    library = compile_shared(tmp_path, gencodes, flags)
    counts = scan.counts_in_file(library)
    assert dict(counts.cubin) == cubins
    assert dict(counts.ptx) == ptx
    compressed = "-compress-all" in flags or "--compress-mode=size" in flags
    if compressed:
        assert counts.compressed == sum(cubins.values()) + sum(ptx.values())


@needs_nvcc
@pytest.mark.parametrize(
    "target",
    [
        "sm_75",
        "sm_90",
        "sm_90a",
        "sm_100",
        "sm_100a",
        "sm_100f",
        "sm_103a",
        "sm_120",
        "sm_120a",
        "sm_120f",
        "sm_121",
    ],
)
def test_bare_cubin_label_from_elf_header(tmp_path: Path, target: str) -> None:
    source = tmp_path / "k.cu"
    source.write_text(KERNEL)
    cubin = tmp_path / f"{target}.cubin"
    arch = target.replace("sm_", "compute_")
    nvcc.run(["-cubin", "-o", cubin, source, "-gencode", f"arch={arch},code={target}"], cubin)
    # nvcc 13 marks `a` in .nv.compat; family cubins carry no mark and are labelled plainly, as cuobjdump does.
    assert dict(scan.counts_in_file(cubin).cubin) == {target.rstrip("f"): 1}


@needs_nvcc
def test_relocatable_object_with_lto_ir_and_an_archive(tmp_path: Path) -> None:
    source = tmp_path / "k.cu"
    source.write_text(KERNEL)
    obj = tmp_path / "k.o"
    nvcc.run(
        [
            "-c",
            "-dc",
            "-Xcompiler",
            "-fPIC",
            "-o",
            obj,
            source,
            "-gencode",
            "arch=compute_90,code=lto_90",
            "-gencode",
            "arch=compute_120,code=[sm_120,lto_120]",
        ],
        obj,
    )
    counts = scan.counts_in_file(obj)
    assert dict(counts.lto) == {"lto_90": 1, "lto_120": 1} and dict(counts.cubin) == {"sm_120": 1}
    archive = tmp_path / "libk.a"
    subprocess.run(["ar", "rcs", archive, obj], check=True)
    assert dict(scan.counts_in_file(archive).lto) == {"lto_90": 1, "lto_120": 1}


@needs_nvcc
def test_wheel_scanned_in_place_and_venv_attributed_by_record(tmp_path: Path) -> None:
    library = compile_shared(tmp_path, [("compute_90", "sm_90"), ("compute_120", "compute_120")], [])
    wheel = build_wheel(
        tmp_path / "dist",
        "fake-kernels",
        "1.0+cu130",
        tag="cp312-cp312-manylinux_2_28_x86_64",
        files={"fake_kernels/libk.so": library.read_bytes(), "fake_kernels/__init__.py": b""},
    )
    result = scan.scan([wheel], require=("12.0", "9.0", "8.0"))
    (package,) = result.packages
    assert package.name == "fake-kernels" and dict(package.counts.cubin) == {"sm_90": 2}
    assert package.verdicts["9.0"][0] == "pass"
    assert package.verdicts["12.0"][0] == "warn"  # only compute_120 PTX: the driver must JIT it
    assert package.verdicts["8.0"][0] == "fail"
    # the same wheel unpacked into a site-packages: files are attributed through RECORD
    site = tmp_path / "venv/lib/python3.12/site-packages"
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(site)
    result = scan.scan([tmp_path / "venv"])
    assert [f.package for f in result.files] == ["fake-kernels"]
    # a folder inside site-packages is attributed through the RECORD files beside it
    assert [f.package for f in scan.scan([site / "fake_kernels"]).files] == ["fake-kernels"]


@needs_nvcc
def test_a_folder_of_wheels_is_scanned_wheel_by_wheel_and_a_bad_one_is_a_note(tmp_path: Path) -> None:
    library = compile_shared(tmp_path, [("compute_90", "sm_90")], [])
    wheelhouse = tmp_path / "wheelhouse"
    build_wheel(
        wheelhouse,
        "fake-kernels",
        "1.0",
        tag="cp312-cp312-manylinux_2_28_x86_64",
        files={"fake_kernels/libk.so": library.read_bytes()},
    )
    (wheelhouse / "broken-1.0-py3-none-any.whl").write_bytes(b"not a zip")
    result = scan.scan([wheelhouse])
    (package,) = result.packages
    assert (package.name, package.version, dict(package.counts.cubin)) == (
        "fake-kernels",
        "1.0",
        {"sm_90": 2},
    )
    assert len(result.notes) == 1 and "broken-1.0-py3-none-any.whl: not a readable wheel" in result.notes[0]


def test_files_without_cuda_code_and_broken_elf(tmp_path: Path) -> None:
    (tmp_path / "plain.so").write_bytes(Path("/bin/sh").resolve().read_bytes()[:4096])  # truncated ELF
    (tmp_path / "text.so").write_text("not an ELF")
    result = scan.scan([tmp_path])
    assert result.files == []
    assert any("plain.so" in note for note in result.notes)


def test_entry_label_flags() -> None:
    assert fatbin.entry_label(fatbin.KIND_CUBIN, 120, 0x1200011) == "sm_120f"
    assert fatbin.entry_label(fatbin.KIND_CUBIN, 90, 0x100011) == "sm_90a"
    assert fatbin.entry_label(fatbin.KIND_PTX, 100, 0x8011) == "compute_100"
    assert fatbin.entry_label(fatbin.KIND_LTO, 90, 0x18011) == "lto_90"


@pytest.mark.parametrize(
    ("flags", "abi", "compat", "label"),
    [
        (0x6007802, 8, b"", "sm_120"),
        (0x6006402 | 0x8, 8, b"", "sm_100a"),  # CUDA 12.8/12.9 cubins: bit 0x8 of e_flags
        (
            0x6006402,
            8,
            bytes.fromhex("02090100020201000205050003070101"),
            "sm_100a",
        ),  # nvcc 13: .nv.compat attr 9
        (0x6006402, 8, bytes.fromhex("02090000020201000205050003070101"), "sm_100"),
        (0x460546, 7, b"", "sm_70"),
        (0x5A | 0x800, 7, b"", "sm_90a"),  # before ABI 8: EF_CUDA_ACCELERATORS
    ],
)
def test_bare_cubin_label_rules(flags: int, abi: int, compat: bytes, label: str) -> None:
    sections = (elf.Section(".nv.compat", 0x70000086, 0, 0, len(compat)),) if compat else ()
    image = elf.Image(elf.ET_EXEC, elf.EM_CUDA, flags, abi, sections)
    assert elf.cubin_label(image, compat, 0, len(compat)) == label


@needs_nvcc
def test_scan_process_json_and_exit_code(tmp_path: Path, provision_bin: str) -> None:
    library = compile_shared(tmp_path, [("compute_90", "sm_90")], [])
    ok = run_provision("scan", str(library), "--require", "9.0", "--json")
    assert ok.returncode == 0, ok.stderr
    doc = json.loads(ok.stdout)
    assert doc["files"][0]["cubin"] == {"sm_90": 2} and doc["files"][0]["package"] is None
    assert doc["packages"][0]["require"]["9.0"]["status"] == "pass"
    bad = run_provision("scan", str(library), "--require", "sm_120")
    assert bad.returncode == 1 and "FAIL" in bad.stdout
    usage = run_provision("scan", str(tmp_path / "missing"))
    assert usage.returncode == 2 and "no such file" in usage.stderr


def test_counter_union_by_package() -> None:
    a = fatbin.Counts(cubin=Counter({"sm_90": 1}))
    b = fatbin.Counts(cubin=Counter({"sm_90": 2}), ptx=Counter({"compute_90": 1}))
    a.add(b)
    assert a.cubin["sm_90"] == 3 and a.ptx["compute_90"] == 1


def test_a_path_that_cannot_be_a_file_says_why_and_a_file_named_dot_whl_is_a_file(tmp_path: Path) -> None:
    """`scan lib.so/` (a file named with a trailing /) is not a directory, as ls says, not 'no such file'; a file
    named `.whl` has no suffix (pathlib's rule, which a folder's walk keeps): scanned as a file, not refused as a wheel
    name."""
    library = tmp_path / "libk.so"
    library.write_bytes(b"not an ELF")
    with pytest.raises(scan.InputError) as refused:
        scan.scan([f"{library}/"])
    assert refused.value.message == f"{library}/: not a directory", refused.value.message
    with pytest.raises(scan.InputError) as missing:
        scan.scan([str(tmp_path / "missing.so")])
    assert missing.value.message.endswith("missing.so: no such file or directory")
    hidden = tmp_path / ".whl"
    hidden.write_bytes(b"not a wheel")
    result = scan.scan([str(hidden)])
    assert (result.scanned, result.files, result.notes) == (1, [], [])
    assert scan.scan([str(tmp_path)]).scanned == 2  # the folder's walk read it as a file too
