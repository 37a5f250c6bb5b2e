"""The profile's own compiler judged from its wheel: `nvcc --list-gpu-code` of the nvidia-cuda-nvcc wheel that uv's
cache holds, run once and remembered by the wheel's sha256; the cited table when no wheel is at hand; never a download."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from conftest import ROOT
from launch import run_provision

from provision.report import compiler
from provision.report import gates as report
from provision.stacks import profiles, uvcache

SHA = "ab" * 32


def fake_uv_cache(root: Path, version: str, answer: str) -> Path:
    """uv's layout: wheels-v8/pypi/<project>/<version-tags> links to archive-v0/<id>, the hash in the .http beside it."""
    archive = root / "archive-v0" / "Xyz123"
    nvcc = archive / "nvidia" / "cu13" / "bin" / "nvcc"
    nvcc.parent.mkdir(parents=True)
    nvcc.write_text(f"#!/bin/sh\necho '{answer}'\n")
    nvcc.chmod(0o644)  # as uv may leave it: not executable
    folder = root / "wheels-v8" / "pypi" / "nvidia-cuda-nvcc"
    folder.mkdir(parents=True)
    link = folder / f"{version}-py3-none-manylinux_2_28_x86_64"
    os.symlink(os.path.relpath(archive, folder), link)
    link.with_name(link.name + ".http").write_bytes(b"\x95\xb0Sha256\xd9@" + SHA.encode())
    return root


def profile_with_compiler(tmp_path: Path, version: str) -> profiles.Profile:
    path = tmp_path / "p.toml"
    path.write_text(
        f'schema = 1\nname = "p"\ncuda = "{version[:4]}"\n[packages]\n'
        f'cuda-toolkit = {{ version = "=={version}", extras = ["nvcc"] }}\n'
    )
    return profiles.load_file(path)


def test_the_wheels_own_answer_is_used_and_remembered(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    cache = fake_uv_cache(tmp_path / "uv", "13.5.37", "sm_90 sm_107 sm_120")
    assert set(uvcache.wheels(cache)) == {("nvidia-cuda-nvcc", "13.5.37-py3-none-manylinux_2_28_x86_64")}
    # by project
    assert set(uvcache.wheels(cache, {"nvidia-cuda-nvcc", "torch"})) == set(uvcache.wheels(cache))
    assert uvcache.wheels(cache, {"torch"}) == {}
    found = compiler.targets("13.5", cache)
    assert found is not None and found.sms == ("sm_90", "sm_107", "sm_120") and "from its wheel" in found.name
    nvcc = next(cache.glob("archive-v0/*/nvidia/cu13/bin/nvcc"))
    # asked once: the answer now comes from memory, by the wheel's sha256
    nvcc.write_text("#!/bin/sh\nexit 3\n")
    assert compiler.targets("13.5", cache).sms == ("sm_90", "sm_107", "sm_120")  # type: ignore[union-attr]
    assert SHA in compiler.memory_file().read_text()
    machine = report.load_machine(ROOT / "docs/machines/h200.probe.json")
    gate = next(
        g
        for g in report.judge(machine, profile_with_compiler(tmp_path, "13.5.0"), cache).gates
        if g.id == "toolkit"
    )
    assert (
        gate.status == "pass"
        and "nvcc 13.5.37 from its wheel" in gate.reason
        and "--list-gpu-code" in gate.source
    )


def test_the_table_is_the_offline_fallback(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    cache = fake_uv_cache(tmp_path / "uv", "13.5.37", "not a list")  # an nvcc that says nothing useful
    found = compiler.targets("13.5", cache)
    assert (
        found is not None
        and "the table" in found.name
        and "sm_107" in found.sms
        and "https://" in found.source
    )
    assert compiler.targets("13.9", cache) is None  # neither wheel nor table row


@pytest.mark.parametrize("cuda", ["13.1", "13.2", "13.3", "13.4", "13.5"])
def test_the_table_follows_the_releases(cuda: str) -> None:
    from provision import knowledge

    sms = knowledge.toolkit_sms(cuda)
    assert sms and "sm_90" in sms and "sm_120" in sms and "sm_70" not in sms


def test_report_machine_never_downloads(provision_bin: str, tmp_path: Path) -> None:
    nowhere = "http://127.0.0.1:9"
    env = {
        **os.environ,
        "HTTP_PROXY": nowhere,
        "HTTPS_PROXY": nowhere,
        "http_proxy": nowhere,
        "https_proxy": nowhere,
        "UV_OFFLINE": "1",
        "UV_CACHE_DIR": str(fake_uv_cache(tmp_path / "uv", "13.0.88", "sm_90")),
        "XDG_CACHE_HOME": str(tmp_path / "xdg"),
    }
    done = run_provision(
        "report", "--machine", str(ROOT / "docs/machines/h200.probe.json"), "--json", timeout=60, env=env
    )
    assert done.returncode == 0, done.stderr
    assert '"toolkit"' in done.stdout and "from its wheel" in done.stdout
