"""nvcc for the scan tests, with its outputs kept as ccache keeps a compiler's: `run(argv, out)` runs nvcc once per
machine for each set of inputs, options and nvcc (its path, size, mtime and `--version`), and copies the kept file
otherwise. The file is nvcc's own output either way: the scan is still held to what nvcc made. nvcc takes 1-3 s of CPU
a build, and the scan tests build about thirty times. Kept in the tests' cache of real wheels (tests/cuobjdump.py:
PROVISION_TEST_CACHE, else ~/.cache/provision-tests), under nvcc/; delete that folder to build everything again."""

from __future__ import annotations

import functools
import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from cuobjdump import CACHE

NVCC = shutil.which("nvcc")


@functools.cache
def _identity() -> str:
    assert NVCC, "nvcc is not installed (the test should be marked needs_nvcc)"
    real = Path(NVCC).resolve()
    status = real.stat()
    version = subprocess.run(
        [NVCC, "--version"], capture_output=True, text=True, check=True, timeout=60
    ).stdout
    return f"{real} {status.st_size} {status.st_mtime_ns}\n{version}"


def run(argv: list[str | Path], out: Path) -> Path:
    """nvcc ARGV (without nvcc itself), which writes `out`; every other file named in ARGV is an input, keyed by its
    bytes. Returns `out`."""
    key = hashlib.sha256(_identity().encode())
    for arg in argv:
        path = Path(arg)
        if str(arg) == str(out):
            key.update(b"\0OUT" + out.suffix.encode())
        elif isinstance(arg, Path) or (os.sep in str(arg) and path.is_file()):
            key.update(b"\0FILE" + path.suffix.encode() + hashlib.sha256(path.read_bytes()).digest())
        else:
            key.update(b"\0" + str(arg).encode())
    kept = CACHE / "nvcc" / f"{key.hexdigest()}{out.suffix}"
    if not kept.is_file():
        subprocess.run([NVCC, *map(str, argv)], check=True, capture_output=True, timeout=300)
        kept.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=kept.parent, prefix=".partial-", delete=False) as partial:
            partial.write(out.read_bytes())
        # test processes side by side: the last rename wins, both files are nvcc's
        os.replace(partial.name, kept)
        return out
    shutil.copyfile(kept, out)
    return out
