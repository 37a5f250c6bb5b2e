"""The imports check on a machine without a driver: a module whose import fails only for want of libcuda.so.1 (the
driver's own library, as sgl_kernel's extension needs it) is a SKIP with that reason; any other failure still FAILs,
and so does the same failure where libcuda.so.1 loads. Where sglang is installed, its server entry point is imported
too. Real payload processes in a real venv; libcuda.so.1 is a stub built with the C compiler where a driver is wanted."""

from __future__ import annotations

import ctypes
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from wheelhouse import build_wheel

from provision.checks import runner
from provision.envs.records import EnvRecord
from provision.machine import nvmlstart
from provision.machine.facts import Driver
from provision.records.results import CheckResult
from provision.stacks import uvtool

NEEDS_DRIVER = (
    b"import ctypes\nctypes.CDLL('libcuda.so.1')  # what an extension linked to libcuda meets at import\n"
)


def no_driver() -> bool:
    try:
        ctypes.CDLL("libcuda.so.1")
    except OSError:
        return True
    return False


pytestmark = pytest.mark.skipif(
    not no_driver(), reason="this machine has an NVIDIA driver: the SKIP needs one without"
)


@pytest.fixture(scope="module")
def build(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("imports")
    wheels = tmp / "wheels"
    build_wheel(wheels, "sgl-kernel", "0.4.10", files={"sgl_kernel/__init__.py": NEEDS_DRIVER})
    build_wheel(
        wheels,
        "flashinfer-python",
        "0.7.2",
        files={
            "flashinfer/__init__.py": b"",  # and a stray build helper,
            "build_backend.py": b"raise SystemExit('a build ran at import')\n",
            "flashinfer_python-0.7.2.dist-info/top_level.txt": b"build_backend\nflashinfer\n",
        },
    )
    build_wheel(wheels, "broken", "1.0", files={"broken/__init__.py": b"import no_such_module_anywhere\n"})
    build_wheel(
        wheels,
        "claims-libcuda",
        "1.0",
        files={
            "claims_libcuda/__init__.py": b"raise ImportError('libcuda.so.1: cannot open shared object file')\n"
        },
    )
    build_wheel(
        wheels,
        "sglang",
        "0.5.23",
        files={
            "sglang/__init__.py": b"",
            "sglang/launch_server.py": b"import sglang.srt.server_args\n",
            "sglang/srt/__init__.py": b"",
            "sglang/srt/server_args.py": b"",
            "sglang/srt/entrypoints/__init__.py": b"",
            "sglang/srt/entrypoints/http_server.py": b"import os\nif os.environ.get('BREAK_SERVER'):\n    raise RuntimeError('uvloop missing')\n",
        },
    )
    out = tmp / "env"
    uvtool.run(["venv", str(out / "venv"), "--python", sys.executable, "--quiet"])
    uvtool.run(
        [
            "pip",
            "install",
            "--python",
            str(out / "venv/bin/python"),
            "--no-index",
            "--find-links",
            str(wheels),
            "--quiet",
            "sgl-kernel",
            "flashinfer-python",
            "broken",
            "claims-libcuda",
            "sglang",
        ]
    )
    return out


def imports(build: Path, packages: list[str], **env: str) -> CheckResult:
    meta = EnvRecord(name="env", cuda="13.0", env=env, packages=packages, venv=str(build / "venv"))
    (result,) = runner.run(
        build, meta, only=("imports",), gpus=[], driver=Driver(nvml=nvmlstart.started("no_driver"))
    )
    return result


def test_without_a_driver_libcuda_alone_is_a_skip_and_sglang_server_is_imported(build: Path) -> None:
    result = imports(build, ["sglang", "flashinfer-python", "sgl-kernel"])
    modules = (result.details.to_json() if result.details else {})["modules"]
    assert result.status == "pass", result
    assert (
        modules["sglang"]["status"] == modules["flashinfer"]["status"] == "pass"
        and "build_backend" not in modules
    )
    assert (
        modules["sgl_kernel"]["status"] == "skip" and "needs libcuda.so.1" in modules["sgl_kernel"]["reason"]
    )
    assert "skipped sgl_kernel (sgl-kernel): they need libcuda.so.1" in result.reason
    assert (
        modules["sglang.launch_server"]["status"]
        == modules["sglang.srt.entrypoints.http_server"]["status"]
        == "pass"
    )
    broken = imports(build, ["sglang"], BREAK_SERVER="1")  # the server's own import fails: a FAIL, naming it
    assert (
        broken.status == "fail"
        and "sglang (sglang.srt.entrypoints.http_server): RuntimeError: uvloop missing" in broken.reason
    )
    # sglang installed, though the profile does not name it: its server is imported
    only = imports(build, ["sgl-kernel"])
    assert only.status == "pass" and (only.details.to_json() if only.details else {})["imported"] == [
        "sglang.launch_server",
        "sglang.srt.entrypoints.http_server",
    ]


def test_any_other_failure_fails_and_so_does_libcuda_where_the_driver_loads(
    build: Path, tmp_path: Path
) -> None:
    failed = imports(build, ["broken", "sgl-kernel"])
    assert failed.status == "fail" and "ModuleNotFoundError" in failed.reason
    assert (failed.details.to_json() if failed.details else {})["modules"]["sgl_kernel"]["status"] == "skip"
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        pytest.skip("no C compiler for the libcuda.so.1 stub")
    (tmp_path / "stub.c").write_text("int cuInit(unsigned int flags) { return 0; }\n")
    subprocess.run(
        [compiler, "-shared", "-fPIC", "-o", str(tmp_path / "libcuda.so.1"), str(tmp_path / "stub.c")],
        check=True,
    )
    with_driver = imports(build, ["claims-libcuda", "sgl-kernel"], LD_LIBRARY_PATH=str(tmp_path))
    modules = (with_driver.details.to_json() if with_driver.details else {})["modules"]
    assert with_driver.status == "fail" and modules["claims_libcuda"]["status"] == "fail"
    assert modules["sgl_kernel"]["status"] == "pass"  # libcuda.so.1 loads: the import goes through
