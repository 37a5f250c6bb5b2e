"""The stack SGLang runs on, whole, from the real registry: `profiles new` from sglang 0.5.23 with every index pointed
at the default registry, `lock`, `report --lock` judged where the profile cannot be found (the lock's own CUDA 13.0:
a 570 driver FAILs), the same lock with cuda-python 12.6 forced in FAILed before anything is installed, and, opted in
with PROVISION_TEST_STACK=1 (about 10 GB, tens of minutes on a small machine: README), `create` and the imports check
in the environment (sglang and flashinfer PASS; sgl_kernel SKIPs for want of libcuda.so.1 where there is no driver).
Downloads are kept in the tests' cache of real wheels (tests/cuobjdump.py: PROVISION_TEST_CACHE, else
~/.cache/provision-tests), under sglang-stack/: a second run, or a fresh clone on the same machine, is cheap. Without
PROVISION_TEST_STACK the reports judge with empty caches of their own: the wheels other runs left are not read (4 GB
scanned twice cost 100 s of CPU and proved nothing the gates use)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
import tomlkit
from conftest import ROOT
from cuobjdump import CACHE
from launch import run_provision
from locks import sealed
from test_lockself import machine_570

pytestmark = pytest.mark.network
STACK = os.environ.get("PROVISION_TEST_STACK") == "1"


def run(
    provision_bin: str, env: dict[str, str], *args: str, cwd: Path, timeout: int = 900
) -> subprocess.CompletedProcess[str]:
    return run_provision(*args, timeout=timeout, env=env, cwd=cwd)


def lock_target(done: subprocess.CompletedProcess[str], machine: int = 0) -> dict:
    assert done.returncode in (0, 1), done.stderr[-3000:]
    return next(t for t in json.loads(done.stdout)["machines"][machine]["targets"] if t["kind"] == "lock")


def forced(lock: Path, registry: str) -> Path:
    """The lock with cuda-python 12.6.2.post1 in place of the version SGLang's pins take (what the resolver picked
    when sglang was not in the profile), its wheel by URL and sha256 from the registry, sealed as provision seals what
    the resolver gives (packages_sha256): the lock `provision lock` writes for such a profile."""
    from provision.stacks import index

    wheel = next(
        f
        for f in index.project_files(registry, "cuda-python")
        if f.filename.startswith("cuda_python-12.6.2.post1-")
        and f.filename.endswith(".whl")
        and "x86_64" in f.filename
        and "cp312" in f.filename
    )
    doc = tomlkit.parse(lock.read_text())
    for package in doc["packages"]:
        if package["name"] == "cuda-python":
            package["version"] = "12.6.2.post1"
            package["wheels"] = [
                {"name": wheel.filename, "url": wheel.url, "hashes": {"sha256": wheel.sha256}}
            ]
            package.pop("sdist", None)
    path = lock.with_name("pylock.forced.toml")
    path.write_text(sealed(doc))
    return path


def stack_python() -> Path | None:
    """The interpreter `create --python 3.12` takes (provision's own lookup: uv's discovery, then pyenv's versions), or
    None where there is none: the create half skips only where create itself would find no Python 3.12."""
    from provision.envs.interpreters import find_python
    from provision.errors import ProvisionError

    try:
        return find_python("3.12")[0]
    except ProvisionError:
        return None


def test_the_create_half_finds_python_as_create_does() -> None:
    # The tests' isolation moves XDG_DATA_HOME (where uv keeps its own Pythons) and pyenv's shim for a version that is
    # not active exits 127: `uv python find 3.12` alone found none here, and the create half skipped on a fresh clone.
    pyenv = Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv") / "versions"
    installed = sorted(pyenv.glob("3.12*/bin/python3.12"))
    if not installed:
        pytest.skip("pyenv has no Python 3.12 here")
    assert stack_python() is not None, (
        f"create --python 3.12 would find none, though pyenv has {installed[0]}"
    )


# Bounds past pytest-timeout's 300 s: the test's own steps are bounded (900 s each, the create 3600 s) and say which
# one hung; the run without the create took 265 s warm on a quiet machine, the create about 23 minutes cold.
@pytest.mark.timeout(4800 if STACK else 900)
def test_the_sglang_stack_whole_judged_before_install(provision_bin: str, tmp_path: Path) -> None:
    from provision.stacks import newprofile

    cache = CACHE / "sglang-stack"
    env = {
        **os.environ,
        "UV_CACHE_DIR": str(cache / "uv"),
        "XDG_CACHE_HOME": str(cache / "xdg"),
        "PROVISION_HOME": str(tmp_path / "home"),
    }
    env.pop("PROVISION_PROFILES", None)
    registry = newprofile.default_index()
    made = tmp_path / "made"
    made.mkdir()
    indexes = [
        part
        for name in ("pytorch", "sglang", "flashinfer", "default")
        for part in ("--index", f"{name}={registry}")
    ]
    new = run(
        provision_bin,
        env,
        "profiles",
        "new",
        "today",
        "--from",
        "sglang==0.5.23",
        *indexes,
        "-o",
        str(made / "today.toml"),
        "--json",
        cwd=tmp_path,
    )
    assert new.returncode == 0, new.stderr
    written = json.loads(new.stdout)
    pins = {p["name"]: p["version"] for p in written["packages"]}
    assert (
        pins["sglang"] == "==0.5.23" and pins["torch"] == "==2.14.1" and pins["sglang-kernel"] == "==0.4.10"
    )
    assert {x["name"] for x in written["left_out"]} == {"flashinfer-cubin", "flashinfer-jit-cache"}

    lock = tmp_path / "pylock.today.toml"
    locked = run(
        provision_bin, env, "lock", str(made / "today.toml"), "-o", str(lock), "--json", cwd=tmp_path
    )
    assert locked.returncode == 0, locked.stderr
    result = json.loads(locked.stdout)
    versions = {p["name"]: p["version"] for p in result["packages"]}
    assert versions["sglang"] == "0.5.23" and versions["cuda-python"].startswith("13.")
    assert not {w["id"] for w in result["warnings"]} & {"conflict", "cuda-mix"}, result["warnings"]
    # from here on the profile cannot be found: the lock names profile "today", which no profile folder holds

    # Judged before install, as on a machine that has downloaded nothing: with --no-fetch and caches of their own
    # (the shared ones hold whatever other runs left, and scanning 4 GB of them proves nothing here), every wheel
    # SKIPs, nothing is fetched, and the lock's own CUDA release and versions are what the gates judge.
    judging = (
        env
        if STACK
        else {
            **env,
            "UV_CACHE_DIR": str(tmp_path / "uv-empty"),
            "XDG_CACHE_HOME": str(tmp_path / "xdg-empty"),
        }
    )
    machines = sorted((ROOT / "docs/machines").glob("*.probe.json"))
    argv = [
        "report",
        "--lock",
        str(lock),
        *(p for m in [*machines, machine_570(tmp_path)] for p in ("--machine", str(m))),
        "--json",
    ]
    before = run(provision_bin, judging, *argv, "--no-fetch", cwd=tmp_path)
    targets = [lock_target(before, i) for i in range(len(machines) + 1)]
    if not STACK:
        scanned = {g["id"]: g for g in targets[0]["gates"]}["lock-scan"]["reason"]
        assert (
            " 0 from uv's cache" in scanned and " 0 from provision's" in scanned and " 0 fetched" in scanned
        ), scanned
        assert not (tmp_path / "xdg-empty" / "provision" / "wheels").exists()
    assert all(t["cuda"] == "13.0" for t in targets)
    driver = [{g["id"]: g for g in t["gates"]}["driver"] for t in targets]
    assert (
        driver[-1]["status"] == "fail" and "570" in driver[-1]["reason"] and targets[-1]["verdict"] == "fail"
    )
    assert all(d["status"] == "pass" for d in driver[:-1]), driver
    assert all({g["id"]: g for g in t["gates"]}["cuda-mix"]["status"] == "pass" for t in targets)

    bad = forced(lock, registry)
    judged = lock_target(
        run(
            provision_bin,
            judging,
            "report",
            "--lock",
            str(bad),
            "--machine",
            str(machines[0]),
            "--json",
            *(() if STACK else ("--no-fetch",)),
            cwd=tmp_path,
        )
    )
    gates = {g["id"]: g for g in judged["gates"]}
    assert judged["verdict"] == "fail" and gates["cuda-mix"]["status"] == "fail"
    assert "CUDA 12: cuda-python 12.6.2.post1" in gates["cuda-mix"]["reason"]
    if not STACK:
        return

    if stack_python() is None:
        pytest.skip(
            "no Python 3.12 on this machine for the environment (neither uv nor pyenv has one; never downloaded)"
        )
    created = run(
        provision_bin,
        env,
        "create",
        str(made / "today.toml"),
        "--lock",
        str(lock),
        "--python",
        "3.12",
        "--json",
        cwd=tmp_path,
        timeout=3600,
    )
    checks = {c["id"]: c for c in json.loads(created.stdout)["checks"]}
    imports = checks["imports"]
    modules = imports["details"]["modules"]
    assert modules["sglang"]["status"] == "pass" and modules["flashinfer"]["status"] == "pass", imports
    assert modules["sglang.launch_server"]["status"] in ("pass", "skip")
    if shutil.which("nvidia-smi") is None:
        assert modules["sgl_kernel"]["status"] == "skip" and "libcuda.so.1" in modules["sgl_kernel"]["reason"]
    # now uv's cache holds every wheel unpacked: the forced lock's shared files are read, nothing else fetched
    judged = lock_target(
        run(
            provision_bin,
            judging,
            "report",
            "--lock",
            str(bad),
            "--machine",
            str(machines[0]),
            "--json",
            cwd=tmp_path,
        )
    )
    conflict = {g["id"]: g for g in judged["gates"]}["conflict"]
    assert conflict["status"] == "fail" and "cuda/bindings/" in conflict["reason"], conflict
