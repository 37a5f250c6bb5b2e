"""provision lock with the real uv against indexes served by the tests: right packages from the right indexes,
hashes for everything, one nightly date, and a one-line error for each way it can go wrong."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import stacks
from launch import run_provision
from packaging.pylock import Pylock

from provision import toml
from provision.errors import IndexUnreachable, ProvisionError, ResolveError, UsageError
from provision.stacks import lock, profiles, uvtool


def run_lock(
    provision_bin: str, tmp_path: Path, profile: str, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    out = tmp_path / "lockfiles" / "pylock.test.toml"
    return run_provision(
        "lock",
        profile,
        "--platform",
        stacks.PLATFORM,
        "--python",
        stacks.PYTHON,
        "-o",
        out,
        "--json",
        *args,
        env=env,
        cwd=tmp_path,
    )


def test_cu130_against_mirrors(index_server, tmp_path: Path, provision_bin: str) -> None:
    indexes = stacks.cu130(index_server)
    done = run_lock(provision_bin, tmp_path, "cu130", *stacks.index_args(indexes))
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    packages = {p["name"]: p for p in doc["packages"]}
    assert (
        packages["torch"]["version"] == "2.16.0.dev20261126+cu130" and packages["torch"]["index"] == "pytorch"
    )
    assert packages["pytorch-triton"]["index"] == "pytorch"  # unbound: first index that has it, not the decoy
    assert packages["filelock"]["index"] == "pytorch" and packages["filelock"]["version"] == "3.20.0"
    assert packages["sgl-kernel"]["version"] == "0.3.21+cu130" and packages["sgl-kernel"]["index"] == "sglang"
    assert packages["flashinfer-jit-cache"]["index"] == "flashinfer"
    assert (
        packages["flashinfer-python"]["index"] == "default"
        and packages["cuda-toolkit"]["version"] == "13.0.2"
    )
    assert {"nvidia-cuda-nvcc", "nvidia-cuda-crt"} <= set(packages)
    assert all(len(p["sha256"]) == 64 for p in doc["packages"])
    assert doc["nightly_date"] == "20261126"
    # the file: valid PEP 751, every wheel by URL and sha256, the profile's hash under [tool.provision]
    path = Path(doc["lockfile"])
    raw = toml.loads(path.read_text())
    pylock = Pylock.from_dict(raw)
    assert all(w.url and w.hashes["sha256"] for p in pylock.packages for w in p.wheels or [])
    assert raw["tool"]["provision"]["profile_hash"] == profiles.load("cu130").content_hash
    assert {p.index for p in pylock.packages if p.name == "torch"} == {indexes["pytorch"].url}


def test_lock_installs_with_uv_pip_sync(index_server, tmp_path: Path) -> None:
    indexes = stacks.cu130(index_server)
    output = tmp_path / "pylock.cu130.toml"
    target = lock.Target(python=stacks.PYTHON, platform=stacks.PLATFORM)
    overrides = {n: i.url for n, i in indexes.items()}
    lock.lock(profiles.load("cu130"), target=target, overrides=overrides, output=output)
    # the lock names manylinux_2_28 x86_64 wheels; install them as they are into a target folder
    uvtool.run(
        [
            "pip",
            "sync",
            str(output),
            "--python-platform",
            stacks.PLATFORM,
            "--target",
            str(tmp_path / "site"),
            "--quiet",
            "--python",
            sys.executable,
        ]
    )
    assert (tmp_path / "site" / "torch" / "__init__.py").read_text().count("2.16.0.dev20261126") == 1


def nightly_profile(tmp_path: Path, vision_dates: tuple[str, ...]) -> Path:
    path = tmp_path / "nightly.toml"
    path.write_text("""schema = 1
name = "nightly"
cuda = "13.0"
python = "3.12"
[indexes]
pytorch = "https://download.pytorch.org/whl/nightly/cu130"
[packages]
torch = { index = "pytorch", version = ">=2.10.0.dev0", prerelease = true }
torchvision = { index = "pytorch", prerelease = true }
""")
    return path


def test_nightly_date_is_the_newest_that_every_package_has(index_server, tmp_path: Path) -> None:
    indexes = stacks.cu130(index_server)
    for date in ("20261124", "20261125"):  # torchvision is missing for the newest date
        indexes["pytorch"].add(
            "torchvision", f"0.31.0.dev{date}+cu130", tag=stacks.CP312, requires=("torch",)
        )
    profile = profiles.load_file(nightly_profile(tmp_path, ()))
    result = lock.lock(
        profile,
        target=lock.Target(python=stacks.PYTHON, platform=stacks.PLATFORM),
        overrides={"pytorch": indexes["pytorch"].url, "default": indexes["default"].url},
        output=tmp_path / "pylock.toml",
    )
    versions = {p.name: p.version for p in result.packages}
    assert result.nightly == "20261125"
    assert (
        versions["torch"] == "2.16.0.dev20261125+cu130"
        and versions["torchvision"] == "0.31.0.dev20261125+cu130"
    )


def test_no_common_nightly_date(index_server, tmp_path: Path) -> None:
    indexes = stacks.cu130(index_server)
    indexes["pytorch"].add("torchvision", "0.31.0.dev20261101+cu130", tag=stacks.CP312)
    profile = profiles.load_file(nightly_profile(tmp_path, ()))
    with pytest.raises(ResolveError, match="no nightly date has every package"):
        lock.lock(
            profile,
            target=lock.Target(python=stacks.PYTHON, platform=stacks.PLATFORM),
            overrides={"pytorch": indexes["pytorch"].url, "default": indexes["default"].url},
            output=tmp_path / "pylock.toml",
        )


def test_environment_overrides_and_credentials_never_leak(
    index_server, tmp_path: Path, provision_bin: str
) -> None:
    indexes = stacks.cu130(index_server)
    secret_url = indexes["sglang"].url.replace("http://", "http://robot:s3cret-token@")
    env = {"PROVISION_INDEX_SGLANG": secret_url}
    args = [
        a for pair in (("--index", f"{n}={i.url}") for n, i in indexes.items() if n != "sglang") for a in pair
    ]
    done = run_lock(provision_bin, tmp_path, "cu130", *args, env=env)
    assert done.returncode == 0, done.stderr
    lockfile = (tmp_path / "lockfiles" / "pylock.test.toml").read_text()
    assert "s3cret" not in lockfile and "s3cret" not in done.stdout and "s3cret" not in done.stderr
    assert json.loads(done.stdout)["packages"][0]["name"]
    # and an error that involves that URL does not print it either
    index_server.down.add("sglang")
    failed = run_lock(provision_bin, tmp_path, "cu130", *args, env=env)
    assert failed.returncode == 5 and "s3cret" not in failed.stderr and "error:" in failed.stderr


def test_index_down_is_one_line_with_a_hint(index_server, tmp_path: Path, provision_bin: str) -> None:
    indexes = stacks.cu130(index_server)
    index_server.down.add("pytorch")
    done = run_lock(provision_bin, tmp_path, "cu130", *stacks.index_args(indexes))
    assert done.returncode == 5
    first, hint = done.stderr.strip().splitlines()[:2]
    assert first.startswith("error: ") and "/pytorch/simple/torch/" in first and "HTTP 503" in first
    assert hint.startswith("hint: ")


def test_slow_index_times_out_with_bounded_retries(index_server, tmp_path: Path, provision_bin: str) -> None:
    indexes = stacks.cu130(index_server)
    indexes["pytorch"].delay = 3.0
    done = run_lock(
        provision_bin, tmp_path, "cu130", *stacks.index_args(indexes), env={"PROVISION_HTTP_TIMEOUT": "0.5"}
    )
    assert done.returncode == 5 and "no answer within 0.5 s after 3 tries" in done.stderr


def test_package_missing_everywhere(index_server, tmp_path: Path) -> None:
    indexes = stacks.cu130(index_server)
    path = tmp_path / "p.toml"
    path.write_text('schema = 1\nname = "p"\ncuda = "13.0"\n[packages]\nno-such-package = {}\n')
    with pytest.raises(ResolveError, match="no-such-package"):
        lock.lock(
            profiles.load_file(path),
            target=lock.Target(python=stacks.PYTHON, platform=stacks.PLATFORM),
            overrides={"default": indexes["default"].url},
            output=tmp_path / "pylock.toml",
        )


def test_no_wheel_for_this_platform_names_the_tags(index_server, tmp_path: Path) -> None:
    default = index_server.index("default")
    default.add("only-arm", "1.0", tag=f"{stacks.CP}-{stacks.CP}-manylinux_2_28_aarch64")
    path = tmp_path / "p.toml"
    path.write_text('schema = 1\nname = "p"\ncuda = "13.0"\n[packages]\nonly-arm = {}\n')
    with pytest.raises(ProvisionError) as caught:
        lock.lock(
            profiles.load_file(path),
            target=lock.Target(python=stacks.PYTHON, platform=stacks.PLATFORM),
            overrides={"default": default.url},
            output=tmp_path / "pylock.toml",
        )
    assert "only-arm" in caught.value.message and "aarch64" in (caught.value.message + caught.value.hint)


def test_conflicting_pins_name_both_packages(index_server, tmp_path: Path) -> None:
    default = index_server.index("default")
    default.add("app", "1.0", tag=stacks.PY3, requires=("lib==1.0",))
    default.add("lib", "1.0", tag=stacks.PY3)
    default.add("lib", "2.0", tag=stacks.PY3)
    path = tmp_path / "p.toml"
    path.write_text('schema = 1\nname = "p"\ncuda = "13.0"\n[packages]\napp = {}\nlib = "==2.0"\n')
    with pytest.raises(ResolveError) as caught:
        lock.lock(
            profiles.load_file(path),
            target=lock.Target(python=stacks.PYTHON, platform=stacks.PLATFORM),
            overrides={"default": default.url},
            output=tmp_path / "pylock.toml",
        )
    assert "app" in caught.value.message and "lib" in caught.value.message
    assert not (tmp_path / "pylock.toml").exists()


def test_flashinfer_versions_must_agree(index_server, tmp_path: Path) -> None:
    indexes = stacks.cu130(index_server)
    indexes["default"].add("flashinfer-python", "0.6.18", tag=stacks.PY3, requires=("ninja",))
    with pytest.raises(ResolveError, match="FlashInfer packages disagree"):
        lock.lock(
            profiles.load("cu130"),
            target=lock.Target(python=stacks.PYTHON, platform=stacks.PLATFORM),
            overrides={n: i.url for n, i in indexes.items()},
            output=tmp_path / "pylock.toml",
        )


def test_unknown_index_override_and_bad_output_name(tmp_path: Path, provision_bin: str) -> None:
    with pytest.raises(UsageError, match="has no index 'nightly'"):
        lock.effective_indexes(profiles.load("cu130"), {"nightly": "https://x.invalid"})
    with pytest.raises(UsageError, match="expected NAME=URL"):
        lock.parse_overrides(("pytorch",))
    bad = run_provision("lock", "cu130", "-o", str(tmp_path / "lock.toml"))
    assert bad.returncode == 2 and "pylock" in bad.stderr


def test_index_client_reads_pep691_json_and_pep503_html(index_server) -> None:
    from provision.stacks import index, urls

    idx = index_server.index("default")
    idx.add("torch", "2.16.0.dev20261126+cu130", tag=stacks.CP312)
    files = index.project_files(idx.url, "torch")
    assert files[0].filename == f"torch-2.16.0.dev20261126+cu130-{stacks.CP312}.whl" and files[0].sha256
    assert index.project_files(idx.url, "nothing-here") == []
    assert urls.redact("https://u:p@h.example/x") == "https://****@h.example/x"
    with pytest.raises(IndexUnreachable):
        index.project_files("http://127.0.0.1:9/simple", "torch")
