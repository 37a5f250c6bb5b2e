"""Every check's failure path, through the real runner and real payload processes in a real venv; the faults come
from fake torch / sgl_kernel / FlashInfer packages (the hardware seam). The passing paths ran on the H200."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from launch import run_provision
from wheelhouse import build_wheel

from provision.checks import runner, staleness
from provision.envs.records import EnvRecord
from provision.machine import nvmlstart
from provision.machine.facts import Driver, Gpu
from provision.records.details import FlashinferJitDetails, FlashinferTarget
from provision.records.results import CheckResult, overall
from provision.stacks import uvtool

FAKES = Path(__file__).parent.parent / "fakes"
SM120 = [Gpu(index=0, name="Fake RTX PRO 6000", compute_capability="12.0", sm="sm_120")]
SM90 = [Gpu(index=0, name="Fake H200", compute_capability="9.0", sm="sm_90")]


def fake_torch_files() -> dict[str, bytes]:
    read = lambda name: (FAKES / name).read_bytes()  # noqa: E731
    return {
        "torch/__init__.py": read("torch_init.py"),
        "torch/nn/__init__.py": read("torch_nn_init.py"),
        "torch/nn/functional.py": read("torch_nn_functional.py"),
        "torch/distributed/__init__.py": read("torch_distributed.py"),
        "torch/distributed/_symmetric_memory/__init__.py": read("torch_symm.py"),
    }


def make_env(tmp: Path, cubin_version: str) -> Path:
    wheels = tmp / "wheels"
    build_wheel(wheels, "torch", "2.16.0.dev20261126+cu130", files=fake_torch_files())
    build_wheel(
        wheels,
        "sgl-kernel",
        "0.3.21+cu130",
        files={"sgl_kernel/__init__.py": (FAKES / "sgl_kernel_init.py").read_bytes()},
    )
    build_wheel(wheels, "flashinfer-python", "0.6.9", files={"flashinfer/__init__.py": b""})
    build_wheel(wheels, "flashinfer-cubin", cubin_version, files={"flashinfer_cubin/__init__.py": b""})
    build = tmp / "env"
    uvtool.run(["venv", str(build / "venv"), "--python", sys.executable, "--quiet"])
    uvtool.run(
        [
            "pip",
            "install",
            "--python",
            str(build / "venv/bin/python"),
            "--no-index",
            "--find-links",
            str(wheels),
            "--quiet",
            "torch",
            "sgl-kernel",
            "flashinfer-python",
            f"flashinfer-cubin=={cubin_version}",
        ]
    )
    return build


@pytest.fixture(scope="module")
def env(tmp_path_factory) -> Path:
    return make_env(tmp_path_factory.mktemp("checks"), "0.6.9")


def run(build: Path, only: str, gpus=SM120, driver_cuda="13.1", cuda="13.0", **env: str) -> CheckResult:
    meta = EnvRecord(name="env", cuda=cuda, env=env, packages=["torch"], venv=str(build / "venv"))
    (result,) = runner.run(
        build, meta, only=(only,), gpus=gpus, driver=Driver(cuda=driver_cuda, nvml=nvmlstart.OK)
    )
    return result


def test_no_gpu_skips_every_gpu_check_and_passes(env: Path) -> None:
    meta = EnvRecord(name="env", cuda="13.0", env={}, packages=["torch"], venv=str(env / "venv"))
    results = runner.run(env, meta, gpus=[], driver=Driver(nvml=nvmlstart.started("no_driver")))
    by_id = {r.id: r for r in results}
    assert by_id["imports"].status == "pass" and by_id["drift"].status == "pass"
    assert all(
        r.status == "skip" and "no NVIDIA GPU" in r.reason
        for i, r in by_id.items()
        if i not in ("imports", "drift")
    )
    assert overall(results) == "pass"


def test_driver_too_old_for_the_environment(env: Path) -> None:
    result = run(env, "driver", driver_cuda="12.8")
    assert result.status == "fail" and "580.65.06" in result.reason


def test_driver_of_an_older_minor_runs_the_environment_under_minor_version_compatibility(env: Path) -> None:
    result = run(env, "driver", driver_cuda="13.0", cuda="13.2")
    assert result.status == "pass" and "minor-version compatibility" in result.reason
    assert "cudaErrorUnsupportedPtxVersion" in result.reason


@pytest.mark.parametrize(
    ("variables", "status", "words"),
    [
        ({"FAKE_TORCH_CUDA": "12.8"}, "fail", "built for CUDA 12.8"),
        ({"FAKE_TORCH_CUDA": "none"}, "fail", "CPU build"),
        ({"FAKE_TORCH_AVAILABLE": "0"}, "fail", "is_available() is False"),
        ({"FAKE_TORCH_COUNT": "2"}, "fail", "torch sees 2 GPUs, NVML 1"),
        ({"FAKE_TORCH_ARCH": "sm_80 sm_90 sm_100"}, "fail", "no kernels for sm_120"),
        ({"FAKE_TORCH_ARCH": "sm_90a sm_100"}, "fail", "no kernels for sm_120"),
    ],
)
def test_torch_cuda_failures(env: Path, variables: dict, status: str, words: str) -> None:
    result = run(env, "torch-cuda", **variables)
    assert result.status == status and words in result.reason, result


def test_torch_with_only_ptx_for_the_sm_warns(env: Path) -> None:
    result = run(env, "torch-cuda", FAKE_TORCH_ARCH="sm_90 compute_120")
    assert result.status == "warn" and "sm_120 only through PTX compute_120" in result.reason, result


@pytest.mark.skipif(
    shutil.which("gcc") is None, reason="gcc builds the libraries that stand in for libcudart"
)
def test_cuda_libs_catches_a_cu12_cu13_mix(env: Path, tmp_path: Path) -> None:
    libs = []
    for major in ("12", "13"):
        source = tmp_path / "stub.c"
        source.write_text("int cudaRuntimeGetVersion(int* v) { *v = 1; return 0; }\n")
        library = tmp_path / f"libcudart.so.{major}"
        subprocess.run(["gcc", "-shared", "-fPIC", "-o", library, source], check=True)
        libs.append(str(library))
    result = run(env, "cuda-libs", FAKE_TORCH_LOAD=":".join(libs))
    assert result.status == "fail" and "libcudart.so.12 and .so.13 both loaded" in result.reason, result
    single = run(env, "cuda-libs", FAKE_TORCH_LOAD=libs[0])
    assert (
        single.status == "fail"
        and "libcudart.so.12 loaded, but torch is built for CUDA 13.0" in single.reason
    )


@pytest.mark.parametrize(
    ("behaviour", "words"), [("keyerror", "arch table has no entry"), ("p2p", "no peer access")]
)
def test_symmetric_memory_failures_say_why(env: Path, behaviour: str, words: str) -> None:
    result = run(env, "symmetric-memory", FAKE_SYMM=behaviour)
    assert result.status == "fail" and words in result.reason, result


def test_sgl_kernel_abi_mismatch(env: Path) -> None:
    result = run(env, "sgl-kernel")
    assert (
        result.status == "fail" and "undefined symbol" in result.reason and "torch version" in result.reason
    )


def test_flashinfer_packages_that_disagree(tmp_path: Path) -> None:
    mismatched = make_env(tmp_path, "0.6.8")
    result = run(mismatched, "flashinfer-jit")
    assert result.status == "fail" and "flashinfer-cubin 0.6.8 != flashinfer-python 0.6.9" in result.reason


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs the nvcc that FlashInfer's JIT would use")
def test_flashinfer_arch_list_without_this_sm(env: Path) -> None:
    result = run(env, "flashinfer-jit", gpus=SM90, FAKE_TORCH_CAP="9.0", FLASHINFER_CUDA_ARCH_LIST="12.0f")
    assert (
        result.status == "fail" and "FLASHINFER_CUDA_ARCH_LIST=12.0f has nothing for sm_90" in result.reason
    )


def test_flashinfer_without_nvcc(env: Path, tmp_path: Path) -> None:
    result = run(env, "flashinfer-jit", CUDA_HOME=str(tmp_path / "no-toolkit"))
    assert result.status == "fail" and "no nvcc for FlashInfer's JIT" in result.reason


@pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc builds a module linked against libcudart.so.12")
def test_jit_workspace_built_by_another_cuda_major(env: Path, tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    modules = workspace / ".cache/flashinfer/0.6.9/120f/cached_ops/norm"
    script = Path(__file__).parent.parent.parent / "scripts/device/make_stale_module.sh"
    subprocess.run(["bash", str(script), str(modules)], check=True)
    result = run(env, "flashinfer-jit", FLASHINFER_WORKSPACE_BASE=str(workspace))
    assert (
        result.status == "fail"
        and "built for CUDA 12" in result.reason
        and "FLASHINFER_WORKSPACE_BASE" in result.reason
    )
    assert staleness.cudart_majors(modules / "norm.so") == {"12"}


def test_a_hanging_check_is_an_error_with_its_timeout(env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(runner.TIMEOUT_VARIABLE, "3")
    result = run(env, "torch-cuda", FAKE_TORCH_HANG="1")
    assert result.status == "error" and "timed out after 3 s" in result.reason


def test_a_crashing_check_is_an_error_with_its_output(env: Path) -> None:
    result = run(env, "torch-cuda", FAKE_TORCH_CRASH="1")
    assert result.status == "error" and "crashed" in result.reason and result.output_tail is not None


@pytest.mark.parametrize(
    ("answer", "words"),
    [
        ('{"status": "pass", "reason": 5}', "key 'reason' is int 5, expected a string"),
        (
            '{"status": "maybe", "reason": "r"}',
            "key 'status' is 'maybe', expected one of error, fail, pass, skip, warn",
        ),
        (
            '{"status": "pass", "reason": "r", "details": [1]}',
            "key 'details' is list [1], expected an object",
        ),
    ],
)
def test_a_malformed_answer_is_an_error_naming_the_key(env: Path, answer: str, words: str) -> None:
    """A payload's answer is read once, in the runner: one of the wrong shape is an ERROR that says which key."""
    result = run(env, "torch-cuda", FAKE_TORCH_ANSWER=answer)
    assert (
        result.status == "error"
        and "the check's answer is malformed" in result.reason
        and words in result.reason
    ), result
    assert result.output_tail is not None and answer in result.output_tail


def test_check_command_exit_codes(env: Path, tmp_path: Path, provision_bin: str) -> None:
    import os

    home = tmp_path / "home"
    adopt = run_provision("adopt", "fake", str(env / "venv"), "--no-lock", "--home", str(home))
    assert adopt.returncode == 0, adopt.stderr
    done = run_provision(
        "check",
        "fake",
        "--json",
        "--home",
        str(home),
        env={
            **os.environ,
            "PROVISION_NVML_REPLAY": str(Path(__file__).parent.parent / "data/no-driver.nvml.json"),
        },
    )
    assert done.returncode == 0, done.stdout + done.stderr
    import json

    doc = json.loads(done.stdout)
    assert doc["status"] == "pass" and doc["summary"]["skip"] == 8  # every GPU check, sglang-serve too
    assert {c["id"] for c in doc["checks"]} >= {"driver", "torch-cuda", "symmetric-memory", "flashinfer-jit"}
    replay = {
        **os.environ,
        "PROVISION_NVML_REPLAY": str(Path(__file__).parent.parent / "data/rtx-pro-6000-x8.nvml.json"),
    }
    failing = run_provision("check", "fake", "--only", "sgl-kernel", "--home", str(home), env=replay)
    assert failing.returncode == 1 and "FAIL" in failing.stdout
    usage = run_provision("check", "fake", "--only", "gpu-burn", "--home", str(home))
    assert usage.returncode == 2 and "unknown check" in usage.stderr


def test_the_check_view_decides_the_exit_code_and_renders_tables_json_and_markdown(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from provision.views import checks as views
    from provision.views.render import render

    warned = [
        CheckResult(id="drift", title="t", status="warn", reason="1 modified", seconds=0.25),
        CheckResult(id="driver", title="t", status="pass", reason="ok"),
    ]
    assert views.checks("e", warned).exit_code == 0 and views.checks("e", warned, strict=True).exit_code == 1
    failed = CheckResult(
        id="torch-cuda", title="t", status="fail", reason="a | b", output_tail="Traceback: boom"
    )
    shown = views.checks("e", [*warned, failed])
    assert shown.exit_code == 1 and shown.document is not None
    assert shown.document["summary"] == {"pass": 1, "warn": 1, "fail": 1, "skip": 0, "error": 0, "total": 3}
    assert shown.document["checks"][2] == {
        "id": "torch-cuda",
        "title": "t",
        "status": "fail",
        "reason": "a | b",
        "output_tail": "Traceback: boom",
        "seconds": 0.0,
    }
    assert render(shown, "markdown") == 1
    markdown = capsys.readouterr().out
    assert "| torch-cuda | **FAIL** | 0.0 | a \\| b |" in markdown and "Traceback: boom" in markdown
    assert render(shown, "json") == 1 and json.loads(capsys.readouterr().out)["status"] == "fail"


def test_flashinfer_target_cubins_name_a_damaged_build_instead_of_crashing(tmp_path: Path) -> None:
    """A module the JIT left truncated (ELF magic, then nothing) or removed before it was read: the check fails naming
    it, never a traceback out of `check` (the scan of each built module was unguarded)."""
    truncated = tmp_path / "norm.so"
    truncated.write_bytes(b"\x7fELF\x02\x01\x01")
    for built in (truncated, tmp_path / "gone.so"):
        passed = CheckResult(
            id="flashinfer-jit",
            status="pass",
            reason="built",
            details=FlashinferJitDetails(target=FlashinferTarget(built=[str(built)])),
        )
        result = staleness.verify_target_cubins(passed, "9.0a")
        assert result.status == "fail" and str(built) in result.reason and "not read" in result.reason, result


@pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc builds a module linked against libcudart.so.12")
def test_jit_workspace_module_with_a_damaged_dynamic_section_is_read_past(tmp_path: Path) -> None:
    """A module in the workspace whose DT_NEEDED points far past its string table (a damaged file): pyelftools raises
    ValueError from seek, which escaped the ELFError/OSError guard and ended `check` with a traceback."""
    from elftools.elf.elffile import ELFFile

    modules = tmp_path / "norm"
    subprocess.run(
        [
            "bash",
            str(Path(__file__).parent.parent.parent / "scripts/device/make_stale_module.sh"),
            str(modules),
        ],
        check=True,
    )
    library = modules / "norm.so"
    with library.open("rb") as handle:
        dynamic = ELFFile(handle).get_section_by_name(".dynamic")
        start, size = dynamic["sh_offset"], dynamic["sh_size"]
    data = bytearray(library.read_bytes())
    # DT_NEEDED
    needed = [at for at in range(start, start + size, 16) if int.from_bytes(data[at : at + 8], "little") == 1]
    assert needed
    for at in needed:
        data[at + 8 : at + 16] = (2**64 - 256).to_bytes(8, "little")
    library.write_bytes(bytes(data))
    assert staleness.cudart_majors(library) == set()
