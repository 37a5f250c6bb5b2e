"""Issue 41's network tier: a lock of three real CUDA 13 wheels from the default registry (nvidia-cuda-runtime,
nvidia-nvjitlink, nvidia-cuda-nvrtc: about 107 MB), judged by `report --lock` three times: first (every wheel checked
and scanned), again (each wheel's scan from scans/ by its sha256), again with scans/ removed (every wheel scanned
anew). The wheels come from the tests' cache of real wheels (tests/cuobjdump.py: PROVISION_TEST_CACHE, else
~/.cache/provision-tests), put in provision's wheel cache as a fetch would leave them: nothing is downloaded twice.
Time is each whole process's CPU, its own and its children's (a wall clock on a shared machine measures the others)."""

from __future__ import annotations

import hashlib
import json
import os
import resource
import shutil
import signal
import subprocess
import time
from pathlib import Path

import launch
import pytest
from conftest import ROOT
from cuobjdump import wheel

from provision import regular

pytestmark = pytest.mark.network
PINS = {"nvidia-cuda-runtime": "13.0.96", "nvidia-nvjitlink": "13.0.88", "nvidia-cuda-nvrtc": "13.0.88"}
MACHINE = ROOT / "docs/machines/h200.probe.json"


def timed(*args: str) -> tuple[subprocess.CompletedProcess[str], float, float]:
    """(the process, its CPU seconds with its children's, its wall seconds): run here, never through the fork server.
    In a session of its own: one that has not ended in 200 s is killed with every process it forked (a hung scan
    worker once held the pipe open until pytest's own timeout), and the test fails saying so."""
    before, started = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
    child = subprocess.Popen(
        launch.argv(args),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=launch.environment(),
        start_new_session=True,
    )
    try:
        out, err = child.communicate(timeout=200)
    except subprocess.TimeoutExpired:
        os.killpg(child.pid, signal.SIGKILL)
        out, err = child.communicate()
        pytest.fail(f"provision {' '.join(args[:2])} had not ended after 200 s: {err[-2000:]}")
    done = subprocess.CompletedProcess(child.args, child.returncode, out, err)
    after, wall = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter() - started
    return done, after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime, wall


def read_here(reason: str) -> int:
    """The wheels scanned from uv's cache and from provision's: the tests' uv cache is shared by the run, so a wheel
    another test installed is read from there, the rest from provision's (none fetched either way)."""
    import re

    return sum(int(n) for n in re.findall(r"(\d+) from (?:uv's|provision's)", reason))


def test_a_lock_judged_again_reads_its_scans_from_the_cache(tmp_path: Path) -> None:
    profile = tmp_path / "cudart.toml"
    profile.write_text(
        'schema = 1\nname = "cudart"\ncuda = "13.0"\npython = "3.12"\n[packages]\n'
        + "".join(f'{name} = "=={version}"\n' for name, version in PINS.items())
    )
    lock = tmp_path / "pylock.cudart.toml"
    done = subprocess.run(
        launch.argv(("lock", str(profile), "--platform", "x86_64-manylinux_2_28", "-o", str(lock), "--json")),
        capture_output=True,
        text=True,
        timeout=900,
        env=launch.environment(),
    )
    assert done.returncode == 0, done.stderr[-3000:]
    wheels = {p["name"]: p for p in json.loads(done.stdout)["packages"]}
    assert {n: p["version"] for n, p in wheels.items()} == PINS
    kept = Path(os.environ["XDG_CACHE_HOME"]) / "provision"
    # as a fetch leaves them: the lock's sha256 checked, its stamp beside it
    for (
        name,
        version,
    ) in PINS.items():
        real = wheel(f"{name}=={version}")
        assert (
            real.name == wheels[name]["file"]
            and hashlib.sha256(real.read_bytes()).hexdigest() == wheels[name]["sha256"]
        )
        place = kept / "wheels" / wheels[name]["sha256"]
        place.mkdir(parents=True)
        shutil.copyfile(real, place / real.name)
        (place / "checked").write_text(json.dumps(regular.stamp_of((place / real.name).stat())))
    judge = ("report", "--lock", str(lock), "--machine", str(MACHINE), "--json")

    def scanned(done: subprocess.CompletedProcess[str]) -> str:
        assert done.returncode in (0, 1), done.stderr[-3000:]
        target = next(t for t in json.loads(done.stdout)["machines"][0]["targets"] if t["kind"] == "lock")
        return str(next(g for g in target["gates"] if g["id"] == "lock-scan")["reason"])

    first, first_cpu, first_wall = timed(*judge)
    assert "3 wheels, " in scanned(first) and "0 scanned before" in scanned(first), scanned(first)
    assert read_here(scanned(first)) == 3 and "0 fetched" in scanned(first), scanned(first)
    again, again_cpu, again_wall = timed(*judge)
    assert "3 scanned before" in scanned(again) and "0 fetched" in scanned(again), scanned(again)
    shutil.rmtree(kept / "scans")
    rescanned, rescanned_cpu, rescanned_wall = timed(*judge)
    assert "0 scanned before" in scanned(rescanned) and read_here(scanned(rescanned)) == 3, scanned(rescanned)

    def judged(done: subprocess.CompletedProcess[str]) -> list[tuple[str, str]]:
        target = next(t for t in json.loads(done.stdout)["machines"][0]["targets"] if t["kind"] == "lock")
        return [(target["verdict"], "")] + [
            (g["id"], g["status"]) for g in target["gates"] if g["id"] != "lock-scan"
        ]

    # the same judgement, however the scans were had
    assert judged(first) == judged(again) == judged(rescanned)
    figures = (
        f"CPU first {first_cpu:.2f} s, again {again_cpu:.2f} s, scans/ removed {rescanned_cpu:.2f} s; "
        f"wall {first_wall:.2f} / {again_wall:.2f} / {rescanned_wall:.2f} s"
    )
    assert again_cpu <= rescanned_cpu / 3, figures
