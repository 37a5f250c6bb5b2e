"""`provision adopt` killed with SIGKILL while it reads the index, and two adopts of one venv at once. Adopt registers
the venv first, then proves each wheel (held in memory where the page gives its size) and writes the lock last: a
kill in the lookup leaves the environment registered without a lock (`lock --env` makes it later), the venv untouched
and no half-written entry in provision's cache; two at once each end with the same lock. Real venvs built by uv, a
real index on 127.0.0.1 that holds its answers until told, the installed provision as processes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import tiny
from launch import popen_provision, run_provision


def _venv(index_server, tmp_path: Path):  # type: ignore[no-untyped-def]
    served = tiny.index(index_server)
    served.sizes = True  # as the default registry's page: the downloads are held in memory
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "uv", "venv", "-q", str(venv)], check=True, capture_output=True)
    subprocess.run(
        [sys.executable, "-m", "uv", "pip", "install", "-q", "--python", str(venv / "bin" / "python")]
        + ["--index-url", served.url, "alpha==1.0"],
        check=True,
        capture_output=True,
        env={**os.environ, "UV_CACHE_DIR": str(tmp_path / "uv-build-cache")},
    )
    served.requests.clear()
    env = {
        **os.environ,
        "PROVISION_HOME": str(tmp_path / "home"),
        "PROVISION_INDEX_DEFAULT": served.url,
        "PROVISION_HTTP_TIMEOUT": "30",
        "UV_CACHE_DIR": str(tmp_path / "uv-cache"),  # empty: every RECORD comes from the index
        "XDG_CACHE_HOME": str(tmp_path / "xdg"),
    }
    return served, venv, env


def _cache_files(tmp_path: Path) -> list[Path]:
    return sorted(p for p in (tmp_path / "xdg").rglob("*") if p.is_file())


def test_adopt_killed_in_its_lookup_leaves_the_venv_registered_and_lock_env_locks_it_later(
    index_server, tmp_path: Path
) -> None:
    served, venv, env = _venv(index_server, tmp_path)
    before = sorted(p.name for p in venv.rglob("*"))
    served.hold = threading.Event()
    adopting = popen_provision("adopt", "x", str(venv), env=env)
    try:
        deadline = time.time() + 60
        while not served.requests and time.time() < deadline and adopting.poll() is None:
            time.sleep(0.05)
        assert served.requests, "adopt never asked the index"
        adopting.send_signal(signal.SIGKILL)
        adopting.communicate(timeout=60)
    finally:
        served.hold.set()
    assert adopting.returncode == -signal.SIGKILL
    listed = json.loads(run_provision("envs", "--json", env=env).stdout)["environments"]
    assert [e["name"] for e in listed] == ["x"]
    assert sorted(p.name for p in venv.rglob("*")) == before, "the venv itself is never touched"
    assert not [p for p in _cache_files(tmp_path) if p.name.endswith(".tmp")], _cache_files(tmp_path)
    locked = run_provision("lock", "--env", "x", "--json", env=env, timeout=120)
    assert locked.returncode == 0, locked.stderr
    assert [m["name"] for m in json.loads(locked.stdout)["matched"]] == ["alpha"]


def test_two_adopts_of_one_venv_at_once_each_end_with_the_same_lock(index_server, tmp_path: Path) -> None:
    served, venv, env = _venv(index_server, tmp_path)
    served.delay = 0.05  # their lookups overlap
    both = [popen_provision("adopt", name, str(venv), "--json", env=env) for name in ("a", "b")]
    done = [process.communicate(timeout=120) for process in both]
    for process, (_out, err) in zip(both, done, strict=True):
        assert process.returncode == 0 and "Traceback" not in err, err
    adopted = [json.loads(out) for out, _ in done]
    assert all("lock_error" not in a for a in adopted), adopted
    pins = [[(m["name"], m["sha256"]) for m in a["matched"]] for a in adopted]
    assert pins[0] == pins[1] and [n for n, _ in pins[0]] == ["alpha"], pins
    assert not [p for p in _cache_files(tmp_path) if p.name.endswith(".tmp")]
