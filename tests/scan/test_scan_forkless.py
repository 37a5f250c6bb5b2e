"""A scan whose searchers cannot be forked (EAGAIN: out of processes; ENOMEM) searches their slices itself: the same
answer, one process, never an error. Proven on a shared library with a data section large enough to be cut into
slices for children (two of SLICE_MIN), a container in each, the fork failing inside the real command (tests/forkless.py)."""

from __future__ import annotations

import errno
import json
import subprocess
import sys
from pathlib import Path

import forkless
import pytest
from test_scan_hostile import container, elf64
from wheelhouse import build_wheel

from provision.scan import search, wheels


def scanned(path: Path) -> dict:
    """`provision scan --json PATH` where forks work: the answer a forkless scan must give too."""
    done = subprocess.run(
        [sys.executable, "-m", "provision", "scan", "--json", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.mark.parametrize("code", [errno.EAGAIN, errno.ENOMEM])
def test_a_searcher_that_cannot_be_forked_leaves_its_slice_to_the_parent(tmp_path: Path, code: int) -> None:
    size = 2 * search.SLICE_MIN + 4096
    payload = bytearray(size)
    for at, arch in ((4096, 90), (size - 4096, 120)):  # one in the parent's slice, one in the child's
        payload[at : at + len(container(arch))] = container(arch)
    library = tmp_path / "libbig.so"
    library.write_bytes(elf64([(".rodata", 1, 2, 64, size)], payload=bytes(payload)))
    expected = scanned(library)
    assert expected["files"][0]["cubin"] == {"sm_90": 1, "sm_120": 1}, expected
    done = forkless.run_provision(
        "scan", "--json", str(library), code=code, env={"XDG_CACHE_HOME": str(tmp_path / "cache")}
    )
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    found = json.loads(done.stdout)
    assert (found["files"], found["notes"]) == (expected["files"], expected["notes"]), done.stdout


@pytest.mark.parametrize(("code", "allowed"), [(errno.EAGAIN, 0), (errno.ENOMEM, 0), (errno.EAGAIN, 1)])
def test_a_wheel_whose_workers_cannot_be_forked_is_scanned_in_one_process(
    tmp_path: Path, code: int, allowed: int
) -> None:
    """A wheel of more than PARALLEL candidate bytes is scanned over worker processes (two here): none can be forked,
    or only the first (which is killed: left waiting, it held provision's stdout open), and its members are scanned
    here, the same answer."""
    size = wheels.PARALLEL // 2 + 4096
    files = {}
    for number, arch in enumerate((90, 120)):
        payload = bytearray(size)
        payload[4096 : 4096 + len(container(arch))] = container(arch)
        files[f"big/lib{number}.so"] = elf64([(".rodata", 1, 2, 64, size)], payload=bytes(payload))
    wheel = build_wheel(tmp_path / "dist", "big", "1.0", tag="py3-none-manylinux_2_28_x86_64", files=files)
    expected = scanned(wheel)
    assert sorted(str(f["cubin"]) for f in expected["files"]) == ["{'sm_120': 1}", "{'sm_90': 1}"], expected
    # a cache of its own: the scan above is kept by the wheel's sha256, and would answer for this one
    done = forkless.run_provision(
        "scan",
        "--json",
        str(wheel),
        code=code,
        allowed=allowed,
        env={"XDG_CACHE_HOME": str(tmp_path / "cache")},
        timeout=60,
    )
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    found = json.loads(done.stdout)
    assert (found["files"], found["notes"]) == (expected["files"], expected["notes"]), done.stdout
