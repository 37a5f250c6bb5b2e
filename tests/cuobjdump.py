"""NVIDIA's cuobjdump (the `nvidia-cuda-cuobjdump` wheel) as the oracle for `provision scan`, and real wheels.

    python tests/cuobjdump.py FOLDER...   # compare every ELF file and archive under the folders; print disagreements

Wheels come from the default registry through pip and are cached in PROVISION_TEST_CACHE (default
$XDG_CACHE_HOME/provision-tests, else ~/.cache/provision-tests), read when this module is imported (the tests' isolation
then clears every PROVISION_ variable): the tests that use them are marked `network`; test_sglang_stack keeps its
downloads there too.
"""

from __future__ import annotations

import os
import re
import stat
import subprocess
import sys
import tempfile
import zipfile
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from provision.scan import archives, binaries, elf, fatbin, installed  # noqa: E402

CACHE = Path(
    os.environ.get("PROVISION_TEST_CACHE")
    or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "provision-tests"
)
_LISTED = re.compile(r"\.(sm_\d+[a-z]?)\.(cubin|ptx)\s*$", re.MULTILINE)


def wheel(requirement: str) -> Path:
    """Download one wheel (no dependencies) into the cache unless it is there; return its path. Test processes running
    side by side (pytest-xdist) may ask at once: each downloads into a folder of its own, the first rename wins."""
    folder = CACHE / re.sub(r"[^A-Za-z0-9.]+", "_", requirement)
    found = sorted(folder.glob("*.whl"))
    if not found:
        CACHE.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=CACHE, prefix=f".{folder.name}-") as partial:
            Path(partial).chmod(0o755)
            subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "pip",
                    "download",
                    "-q",
                    "--no-deps",
                    "--only-binary=:all:",
                    "-d",
                    partial,
                    requirement,
                ],
                check=True,
                timeout=900,
            )
            _publish(Path(partial), folder)
        found = sorted(folder.glob("*.whl"))
    return found[0]


def unpacked(requirement: str) -> Path:
    """The wheel for `requirement`, unpacked once into the cache (executable bits kept)."""
    path = wheel(requirement)
    folder = path.with_suffix("")
    if not folder.is_dir():
        with tempfile.TemporaryDirectory(dir=path.parent, prefix=f".{folder.name}-") as partial:
            tmp = Path(partial) / "unpacked"
            with zipfile.ZipFile(path) as archive:
                for info in archive.infolist():
                    target = Path(archive.extract(info, tmp))
                    mode = info.external_attr >> 16
                    if mode and target.is_file():
                        target.chmod(stat.S_IMODE(mode) | 0o400)
            _publish(tmp, folder)
    return folder


def _publish(partial: Path, folder: Path) -> None:
    """Move a finished folder into place; another process that finished first keeps its copy."""
    try:
        partial.rename(folder)
    except OSError:
        if not folder.is_dir():
            raise


def cuobjdump() -> Path:
    """The cuobjdump binary of the `nvidia-cuda-cuobjdump` wheel."""
    folder = unpacked("nvidia-cuda-cuobjdump")
    (binary,) = folder.glob("nvidia/*/bin/cuobjdump")
    return binary


def listing(tool: Path, path: Path) -> tuple[Counter[str], Counter[str]] | None:
    """(cubins, PTX) as cuobjdump --list-elf and --list-ptx name them (sm_XY[a]); None when cuobjdump fails on the
    file (13.5 stops with "fatal: Invalid ELF" on the CUDA 12.1 cubins of bitsandbytes' _cuda121.so)."""
    found: list[Counter[str]] = []
    for flag in ("--list-elf", "--list-ptx"):
        done = subprocess.run([str(tool), flag, str(path)], capture_output=True, text=True, timeout=600)
        if "does not contain device code" in done.stderr:
            return Counter(), Counter()
        if "fatal" in done.stderr or (
            done.returncode != 0
            and "No PTX file found" not in done.stderr
            and "No ELF file found" not in done.stderr
        ):
            return None
        found.append(Counter(label for label, _kind in _LISTED.findall(done.stdout)))
    return found[0], found[1]


def as_cuobjdump(counts: fatbin.Counts) -> tuple[Counter[str], Counter[str]]:
    """provision's labels in cuobjdump's naming: family cubins lose their `f`, PTX is named sm_XY too."""
    cubins: Counter[str] = Counter()
    ptx: Counter[str] = Counter()
    for label, number in counts.cubin.items():
        cubins[label.removesuffix("f")] += number
    for label, number in counts.ptx.items():
        ptx[label.replace("compute_", "sm_").removesuffix("f")] += number
    return cubins, ptx


def fatbin_sections_only(path: Path) -> fatbin.Counts:
    """What provision finds in `.nv_fatbin` (and, in link input, `__nv_relfatbin`): all that cuobjdump looks at.
    Containers a library keeps elsewhere (cuFFT's `.data`/`.ldata`, cuBLASLt's `.cask_resource`) are loaded by the
    library itself; provision counts them, cuobjdump does not see them."""
    data = path.read_bytes()
    counts = fatbin.Counts()
    if data[:8] == b"!<arch>\n":
        images = [
            (offset, size)
            for _n, offset, size in archives.members(data)
            if data[offset : offset + 4] == b"\x7fELF"
        ]
    else:
        images = [(0, len(data))]
    for base, size in images:
        image = elf.read_image(data, base, size)
        if image.machine == elf.EM_CUDA:
            counts.cubin[elf.cubin_label(image, data, base, size)] += 1
        for section in image.sections:
            if section.name == ".nv_fatbin" or (section.name == "__nv_relfatbin" and not image.linked):
                fatbin.parse(data, base + section.offset, section.size, counts)
    return counts


def disagreements(tool: Path, folder: Path) -> tuple[int, list[str], list[str]]:
    """Compare every ELF file and archive under `folder`: (files compared, one line per disagreement, files
    cuobjdump itself fails on).

    For an object or archive (link input) cuobjdump lists `__nv_relfatbin` too, as provision does; for a shared
    library or executable it lists only what the driver loads, which is what provision counts as `cubin`/`ptx`."""
    compared, problems, failed = 0, [], []
    for path in sorted(installed.walk(folder)):
        with open(path, "rb") as handle:
            head = handle.read(8)
        if head[:4] != b"\x7fELF" and head != b"!<arch>\n":
            continue
        theirs = listing(tool, path)
        if theirs is None:
            failed.append(str(path.relative_to(folder)))
            continue
        compared += 1
        code = binaries.code_in_file(path).loadable
        in_sections = fatbin_sections_only(path)
        if (
            in_sections.containers > code.containers
            or in_sections.cubin - code.cubin
            or in_sections.ptx - code.ptx
        ):
            problems.append(f"{path.relative_to(folder)}: the scan lost containers of the fatbin sections")
        ours = as_cuobjdump(in_sections)
        if ours != theirs:
            problems.append(
                f"{path.relative_to(folder)}: provision {dict(ours[0])} {dict(ours[1])}, "
                f"cuobjdump {dict(theirs[0])} {dict(theirs[1])}"
            )
    return compared, problems, failed


if __name__ == "__main__":
    oracle = cuobjdump()
    for argument in sys.argv[1:]:
        count, lines, failed = disagreements(oracle, Path(argument))
        print(f"{argument}: {count} files, {len(lines)} disagree; cuobjdump fails on {failed}")
        for line in lines:
            print("  " + line)
