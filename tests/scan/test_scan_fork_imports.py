"""A wheel's workers are forked, and the process that forks them may have other threads (report --lock scans
several wheels at once, each forking its own workers). A module that another thread was importing at the fork is
held, in the child, by an import lock no thread will release: a worker that imports it waits forever, and the
command never ends (its orphaned workers keep its stdout open). This happened in a fresh clone's CI: a worker of one
wheel imported provision.scan.search while another wheel's thread was importing it.

So the workers import nothing of their own: every module on a worker's path is imported before the fork
(wheels._imported_for_workers). Both halves are held here: the race itself, made certain, and the worker's whole
path, which must import nothing once those modules are in."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

from test_scan_hostile import ar_archive, container, elf64
from wheelhouse import build_wheel

WHEEL_TAG = "py3-none-manylinux_2_28_x86_64"


def members() -> dict[str, bytes]:
    """One member down each of a worker's paths: a shared library whose data is searched, an archive of objects,
    a 32-bit ELF (pyelftools reads it), a bare cubin, and a library larger than a worker reads whole (streamed)."""
    from provision.scan import wheels

    library = elf64([(".rodata", 1, 2, 64, len(container(90)))], payload=container(90))
    thirty_two = bytearray(library)
    thirty_two[4] = 1
    cubin = bytearray(elf64([(".text", 1, 6, 64, 8)], e_type=2, payload=bytes(8)))
    cubin[18:20] = (190).to_bytes(2, "little")  # EM_CUDA
    size = wheels.WHOLE + 4096
    big = bytearray(size)
    big[size - 4096 : size - 4096 + len(container(120))] = container(120)
    return {
        "pkg/libsearched.so": library,
        "pkg/libobjects.a": ar_archive(
            [("a.o", elf64([(".nv_fatbin", 1, 2, 64, 88)], e_type=1, payload=container(100)))]
        ),
        "pkg/lib32.so": bytes(thirty_two),
        "pkg/kernel.cubin": bytes(cubin),
        "pkg/libstreamed.so": elf64([(".rodata", 1, 2, 64, size)], payload=bytes(big)),
    }


def run_script(script: str, timeout: float) -> subprocess.CompletedProcess[str]:
    """`script` in a fresh interpreter of its own session: on a timeout, the whole group (the forked workers too)
    is killed, and the test fails with what it printed."""
    child = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(script)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = child.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(child.pid, signal.SIGKILL)
        out, err = child.communicate()
        raise AssertionError(
            f"still running after {timeout} s (a worker waiting on an import lock): {err[-2000:]}"
        ) from None
    return subprocess.CompletedProcess(child.args, child.returncode, out, err)


def test_workers_forked_while_another_thread_imports_what_they_need_still_end(tmp_path: Path) -> None:
    """Another thread is inside provision.scan.search's import (held there two seconds) when the scan forks its
    workers, and each worker's member needs that module: the scan waits for the import, then forks, and ends."""
    wheel = build_wheel(tmp_path, "race", "1.0", tag=WHEEL_TAG, files=members())
    done = run_script(
        f"""
        import importlib.abc, importlib.machinery, json, sys, threading, time

        inside = threading.Event()

        class Slow(importlib.abc.MetaPathFinder):
            def find_spec(self, name, path, target=None):
                if name != "provision.scan.search":
                    return None
                spec = importlib.machinery.PathFinder.find_spec(name, path)
                real = spec.loader

                class Loader(importlib.abc.Loader):
                    def create_module(self, spec):
                        return real.create_module(spec)

                    def exec_module(self, module):
                        inside.set()
                        time.sleep(2)
                        real.exec_module(module)

                spec.loader = Loader()
                return spec

        sys.meta_path.insert(0, Slow())
        from pathlib import Path
        from provision.scan import wheels
        assert "provision.scan.search" not in sys.modules
        threading.Thread(target=lambda: __import__("provision.scan.search"), daemon=True).start()
        assert inside.wait(10)
        wheels.PARALLEL = 0  # workers even for a wheel this small
        found = {{name: (dict(code.loadable.cubin) if code else None) for name, code, _ in wheels.scan_wheel(Path({str(wheel)!r}), jobs=2)}}
        print(json.dumps(found))
        """,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    assert found["pkg/libsearched.so"] == {"sm_90": 1} and found["pkg/libstreamed.so"] == {"sm_120": 1}, found


def test_a_workers_whole_path_imports_nothing_once_its_modules_are_in(tmp_path: Path) -> None:
    """Every member kind a worker reads, read as a worker reads it, after wheels._imported_for_workers: not one
    module more is imported (one more would be one more lock a worker could wait on forever)."""
    wheel = build_wheel(tmp_path, "paths", "1.0", tag=WHEEL_TAG, files=members())
    done = run_script(
        f"""
        import json, os, sys, zipfile
        from provision.scan import members, wheels

        path = {str(wheel)!r}
        with zipfile.ZipFile(path) as opened:
            places = [members.Place.of(i) for i in wheels.candidates(opened)]
        wheels._imported_for_workers()
        before = set(sys.modules)
        wheels._open_wheel(path)
        found = {{}}
        for place in places:
            name, code, why = wheels._scan_member(place)
            found[name] = dict(code.loadable.cubin) if code else why
        print(json.dumps({{"found": found, "imported": sorted(set(sys.modules) - before)}}))
        """,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    assert set(answer["found"]) == set(members()), answer  # every path was taken
    assert answer["found"]["pkg/libstreamed.so"] == {"sm_120": 1}, answer
    assert answer["imported"] == [], answer
