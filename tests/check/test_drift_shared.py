"""A path that two distributions install is one `shared` finding naming both and whose bytes are on disk, never judged
against whichever RECORD was read last; `check --strict` exits 1 on it (a WARN). Real venvs built by uv from the tests'
index, adopted without a lock."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from launch import run_provision

from provision.envs import drift
from provision.stacks import uvtool

PY = sys.executable


def uv_venv(tmp_path: Path, url: str, *requirements: str) -> Path:
    """A venv made by uv itself (not by provision), with `requirements` installed from the index at `url`."""
    venv = tmp_path / "srv" / "venv"
    cache = {"UV_CACHE_DIR": str(tmp_path / "uv-cache")}
    uvtool.run(["venv", str(venv), "--python", PY, "--quiet"], env=cache)
    uvtool.run(
        [
            "pip",
            "install",
            "--python",
            str(venv / "bin" / "python"),
            "--quiet",
            "--default-index",
            url,
            *requirements,
        ],
        env=cache,
    )
    return venv


def provision(binary: str, tmp_path: Path, *args: str, index: str = "") -> subprocess.CompletedProcess[str]:
    variables = {
        "PROVISION_HOME": str(tmp_path / "home"),
        "UV_CACHE_DIR": str(tmp_path / "uv-cache"),
        "PROVISION_INDEX_DEFAULT": index,
    }
    return run_provision(*args, timeout=120, env=variables)


def test_a_path_two_distributions_install_is_one_shared_finding_saying_whose_bytes_are_on_disk(
    tmp_path: Path, index_server, provision_bin: str
) -> None:
    served = index_server.index("main")
    served.add(
        "cuda-python",
        "12.6.0",
        files={"cuda/bindings/driver.py": b"VERSION = '12.6'\n", "nvidia/__init__.py": b""},
    )
    served.add(
        "cuda-bindings",
        "13.0.0",
        files={"cuda/bindings/driver.py": b"VERSION = '13.0'\n", "nvidia/__init__.py": b""},
    )
    venv = uv_venv(tmp_path, served.url, "cuda-python==12.6.0", "cuda-bindings==13.0.0")
    assert provision(provision_bin, tmp_path, "adopt", "old", str(venv), index=served.url).returncode == 0
    shared = drift.site_packages(venv) / "cuda" / "bindings" / "driver.py"
    winner = "cuda-bindings" if "13.0" in shared.read_text() else "cuda-python"

    def findings() -> list[dict]:
        done = provision(provision_bin, tmp_path, "check", "old", "--only", "drift", "--json")
        assert done.returncode == 0, done.stderr  # a WARN: exit 0 without --strict
        (result,) = json.loads(done.stdout)["checks"]
        assert result["status"] == "warn"
        return result["details"]["findings"]

    (finding,) = findings()  # nvidia/__init__.py, the same empty file in both, is no finding
    assert finding["kind"] == "shared" and finding["path"] == "cuda/bindings/driver.py"
    assert finding["distributions"] == ["cuda-bindings", "cuda-python"] and finding["on_disk"] == winner
    assert (
        finding["found"]
        and "cuda-bindings sha256=" in finding["expected"]
        and "cuda-python sha256=" in finding["expected"]
    )

    shared.write_text("VERSION = 'patched'\n")
    (finding,) = findings()
    assert finding["kind"] == "shared" and finding["on_disk"] is None
    strict = provision(provision_bin, tmp_path, "check", "old", "--only", "drift", "--strict", "--json")
    assert strict.returncode == 1
    reason = json.loads(strict.stdout)["checks"][0]["reason"]
    assert "shared cuda/bindings/driver.py (cuda-bindings and cuda-python: neither's bytes)" in reason


def test_check_strict_exits_0_when_nothing_warns_and_1_on_drift(
    tmp_path: Path, index_server, provision_bin: str
) -> None:
    served = index_server.index("main")
    served.add("alpha", "1.0")
    venv = uv_venv(tmp_path, served.url, "alpha==1.0")
    assert provision(provision_bin, tmp_path, "adopt", "old", str(venv), index=served.url).returncode == 0
    assert provision(provision_bin, tmp_path, "check", "old", "--only", "drift", "--strict").returncode == 0
    (drift.site_packages(venv) / "zz-experiment.pth").write_text("import os\n")
    assert provision(provision_bin, tmp_path, "check", "old", "--only", "drift").returncode == 0
    done = provision(provision_bin, tmp_path, "check", "old", "--only", "drift", "--strict", "--json")
    assert done.returncode == 1 and json.loads(done.stdout)["status"] == "warn"


def test_restore_dry_run_exits_as_restore_would_and_never_claims_a_lock_it_lacks(
    tmp_path: Path, provision_bin: str
) -> None:
    from wheelhouse import build_wheel

    wheel = build_wheel(tmp_path / "wheels", "sglang", "0.5.0")  # installed from a file: no index has it
    venv = tmp_path / "srv" / "venv"
    uvtool.run(["venv", str(venv), "--python", PY, "--quiet"])
    uvtool.run(["pip", "install", "--python", str(venv / "bin" / "python"), "--quiet", str(wheel)])
    assert provision(provision_bin, tmp_path, "adopt", "old", str(venv), "--no-lock").returncode == 0
    clean = provision(provision_bin, tmp_path, "restore", "old", "--dry-run")
    assert clean.returncode == 0 and "nothing differs from its lock" not in clean.stdout
    assert "nothing differs from its RECORDs" in clean.stdout
    (drift.site_packages(venv) / "sglang" / "__init__.py").write_text("patched = True\n")
    dry = provision(provision_bin, tmp_path, "restore", "old", "--dry-run", "--json")
    assert dry.returncode == 1 and json.loads(dry.stdout)["not_restorable"] == ["sglang"]
    assert provision(provision_bin, tmp_path, "restore", "old", "--no-checks").returncode == 1


def test_a_conflict_the_lock_recorded_leaves_an_untouched_build_drift_clean(
    tmp_path: Path, index_server
) -> None:
    """flashinfer-python 0.7.2 and torch-c-dlpack-ext 0.1.5 both install a top-level build_backend.py: `lock` sees it
    (its conflict warning) and records it; drift then judges an untouched build by that record (PASS with a note,
    `check --strict` exit 0), and a real change of that file is still found, with no promise that restore fixes it."""
    served = index_server.index("main")
    served.ranges = True  # as the default registry: lock reads the RECORDs by range requests
    served.add("stack", "1.0", requires=("flashy==1.0", "dlpacky==1.0"))
    served.add("flashy", "1.0", files={"flashy/__init__.py": b"", "build_backend.py": b"# flashy's\n"})
    served.add("dlpacky", "1.0", files={"dlpacky/__init__.py": b"", "build_backend.py": b"# dlpacky's\n"})
    profiles = tmp_path / "profiles"
    profiles.mkdir()
    (profiles / "both.toml").write_text(
        'schema = 1\nname = "both"\ncuda = "13.0"\n[packages]\nstack = "==1.0"\n'
    )
    env = {
        "PROVISION_HOME": str(tmp_path / "home"),
        "PROVISION_PROFILES": str(profiles),
        "PROVISION_INDEX_DEFAULT": served.url,
        "UV_CACHE_DIR": str(tmp_path / "uv-cache"),
        "XDG_CACHE_HOME": str(tmp_path / "xdg"),
    }
    created = run_provision(
        "create", "both", "--python", PY, "--no-checks", "--no-activate", env=env, timeout=180
    )
    assert created.returncode == 0, created.stderr
    strict = run_provision("check", "both", "--only", "drift", "--strict", "--json", env=env, timeout=120)
    (result,) = json.loads(strict.stdout)["checks"]
    assert strict.returncode == 0 and result["status"] == "pass", result
    assert (
        "build_backend.py is shared by dlpacky and flashy (recorded in the lock when it was made)"
        in result["reason"]
    )
    venv = next((tmp_path / "home" / "builds").iterdir()) / "venv"
    (drift.site_packages(venv) / "build_backend.py").write_text("# edited\n")
    edited = run_provision("check", "both", "--only", "drift", "--strict", "--json", env=env, timeout=120)
    (result,) = json.loads(edited.stdout)["checks"]
    assert edited.returncode == 1 and result["details"]["findings"][0]["kind"] == "shared"
    assert (
        "restore puts it back" not in result["reason"]
        and "restore leaves build_backend.py as it is" in result["reason"]
    )
