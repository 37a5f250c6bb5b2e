"""A lock describes itself: `provision lock` writes the CUDA release into [tool.provision], so `report --lock` judges
the driver, compiler and torch gates from the lock alone, run where its profile cannot be found; a lock whose CUDA
cannot be known is never a PASS."""

from __future__ import annotations

import json
import os
from pathlib import Path

import stacks
import tomlkit
from conftest import ROOT
from launch import run_provision
from locks import sealed
from test_lockscan import TAG, cubin

RTX = ROOT / "docs/machines/rtx-pro-6000-x8.probe.json"


def machine_570(tmp_path: Path) -> Path:
    """The 8 x RTX PRO 6000 machine on driver 570 (CUDA 12.8 at most), as a probe document."""
    doc = json.loads(RTX.read_text())
    doc["driver"].update(version="570.86.15", cuda="12.8", cuda_raw=12080, nvml_version="12.570.86.15")
    path = tmp_path / "rtx-570.probe.json"
    path.write_text(json.dumps(doc))
    return path


def lock_from_path(index_server, tmp_path: Path, provision_bin: str, torch: str = "2.14.1") -> Path:
    default = index_server.index("default")
    default.add("torch", torch, tag=TAG, files={"torch/lib/a.cubin": cubin(120), "torch/__init__.py": b""})
    profile = tmp_path / "made" / "today.toml"
    profile.parent.mkdir(parents=True)
    profile.write_text(
        f'schema = 1\nname = "today"\ncuda = "13.0"\n[indexes]\ndefault = "{default.url}"\n'
        f'[packages]\ntorch = "=={torch}"\n'
    )
    lock = tmp_path / "pylock.today.toml"
    done = run_provision(
        "lock",
        str(profile),
        "--platform",
        stacks.PLATFORM,
        "--python",
        stacks.PYTHON,
        "-o",
        str(lock),
        timeout=300,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    profile.unlink()  # judged where the profile cannot be found
    return lock


def judged(provision_bin: str, lock: Path, machine: Path, tmp_path: Path) -> dict:
    env = {**os.environ, "UV_CACHE_DIR": str(tmp_path / "uv-cache"), "XDG_CACHE_HOME": str(tmp_path / "xdg")}
    env.pop("PROVISION_PROFILES", None)
    done = run_provision(
        "report", "--lock", str(lock), "--machine", str(machine), "--json", timeout=120, env=env, cwd=tmp_path
    )
    assert done.returncode in (0, 1), done.stderr
    return next(t for t in json.loads(done.stdout)["machines"][0]["targets"] if t["kind"] == "lock")


def test_a_lock_made_from_a_path_is_judged_by_its_own_cuda(
    index_server, tmp_path: Path, provision_bin: str
) -> None:
    lock = lock_from_path(index_server, tmp_path, provision_bin)
    tool = tomlkit.parse(lock.read_text())["tool"]["provision"]
    assert tool["profile"] == "today" and tool["cuda"] == "13.0" and tool["compiler_cuda"] == ""
    target = judged(provision_bin, lock, machine_570(tmp_path), tmp_path)
    gates = {g["id"]: g for g in target["gates"]}
    assert target["cuda"] == "13.0" and target["verdict"] == "fail"
    assert gates["driver"]["status"] == "fail" and "570.86.15" in gates["driver"]["reason"], gates["driver"]
    assert "the lock's [tool.provision] cuda" in gates["driver"]["reason"]
    # judged: the machine's own nvcc
    assert gates["toolkit"]["status"] == "pass" and "nvcc" in gates["toolkit"]["reason"]
    assert gates["torch-wheels"]["status"] == "pass" and "scanned wheel" in gates["torch-wheels"]["reason"]
    # on the 590 driver the same lock's driver gate passes
    assert {g["id"]: g for g in judged(provision_bin, lock, RTX, tmp_path)["gates"]}["driver"][
        "status"
    ] == "pass"


def without_cuda(lock: Path) -> Path:
    doc = tomlkit.parse(lock.read_text())
    for key in ("cuda", "compiler_cuda", "flashinfer_arch_list"):
        del doc["tool"]["provision"][key]  # a lock from before locks described themselves
    lock.write_text(sealed(doc))
    return lock


def test_a_lock_whose_cuda_cannot_be_known_is_never_a_pass(
    index_server, tmp_path: Path, provision_bin: str
) -> None:
    lock = without_cuda(lock_from_path(index_server, tmp_path / "plain", provision_bin))
    target = judged(provision_bin, lock, RTX, tmp_path)
    gates = {g["id"]: g for g in target["gates"]}
    assert target["cuda"] == "?" and target["verdict"] != "pass"
    assert (
        gates["driver"]["status"] == "warn"
        and "today" in gates["driver"]["reason"]
        and "re-lock" in gates["driver"]["reason"]
    )
    # torch's +cu130 says it: the wheels give the CUDA release when the lock does not
    lock = without_cuda(lock_from_path(index_server, tmp_path / "local", provision_bin, torch="2.14.1+cu130"))
    gates = {g["id"]: g for g in judged(provision_bin, lock, machine_570(tmp_path), tmp_path)["gates"]}
    assert gates["driver"]["status"] == "fail" and "torch 2.14.1+cu130" in gates["driver"]["reason"]


def test_what_a_lock_says_of_itself_is_read_once_each_key_of_its_own_type() -> None:
    from provision.stacks.lockfile import Stamp, Unlisted

    stamp = Stamp.from_table(
        {
            "profile": "cu130",
            "profile_hash": "ab",
            "cuda": "13.0",
            "compiler_cuda": "13.0",
            "flashinfer_arch_list": "9.0a",
            "python": "3.12",
            "adopted": True,
            "environment": "old",
            "venv": "/v",
            "unmatched": [{"name": "beta", "version": "1.0"}, {"name": "gamma"}],
        }
    )
    assert stamp == Stamp(
        profile="cu130",
        profile_hash="ab",
        cuda="13.0",
        compiler_cuda="13.0",
        flashinfer_arch_list="9.0a",
        python="3.12",
        adopted=True,
        environment="old",
        venv="/v",
        unmatched=(Unlisted("beta", "1.0"), Unlisted("gamma", "")),
    )
    # a key of another type than provision writes reads as absent, never as a str() of it or a traceback
    odd = Stamp.from_table(
        {
            "profile": 5,
            "cuda": 13.0,
            "python": ["3.12"],
            "adopted": "yes",
            "venv": None,
            "unmatched": [5, {"name": 7}, {"name": ""}, {"version": "1"}, {"name": "ok", "version": 2}],
        }
    )
    assert odd == Stamp(unmatched=(Unlisted("ok", "2"),))
    assert Stamp.from_table({"unmatched": 5}) == Stamp() == Stamp.from_table({})
