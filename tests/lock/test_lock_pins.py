"""`provision lock` names the known pair in one line when real uv cannot resolve it: sglang-kernel 0.4.10's exact
torch==2.14.1 against a torch the profile asks (a bare torch is 2.15.0 on CUDA 13.2), and SGLang 0.5.23 beside vLLM
0.34.0 (torch 2.14.1 / 2.14.0, flashinfer-python 0.7.2 / 0.7.3). The wheels carry those exact pins (knowledge.toml
[[pin]]), served on 127.0.0.1."""

from __future__ import annotations

from pathlib import Path

import pytest
import stacks
from launch import run_provision
from wheelhouse import Index

from provision.errors import ResolveError
from provision.stacks import lock, profiles


@pytest.fixture
def default(index_server) -> Index:
    index = index_server.index("default")
    index.add("sglang-kernel", "0.4.10", tag=stacks.PY3, requires=("torch==2.14.1",))
    index.add(
        "sglang",
        "0.5.23",
        tag=stacks.PY3,
        requires=("torch==2.14.1", "flashinfer-python==0.7.2", "sglang-kernel==0.4.10"),
    )
    index.add("vllm", "0.34.0", tag=stacks.PY3, requires=("torch==2.14.0", "flashinfer-python==0.7.3"))
    for version in ("2.14.0", "2.14.1", "2.15.0"):
        index.add("torch", version, tag=stacks.PY3)
    for version in ("0.7.2", "0.7.3"):
        index.add("flashinfer-python", version, tag=stacks.PY3)
    return index


def fails(tmp_path: Path, packages: str, indexes: dict[str, str]) -> ResolveError:
    path = tmp_path / "p.toml"
    named = "".join(f'{n} = "{u}"\n' for n, u in indexes.items() if n != "default")
    path.write_text(f'schema = 1\nname = "p"\ncuda = "13.0"\n[indexes]\n{named}[packages]\n{packages}')
    with pytest.raises(ResolveError) as caught:
        lock.lock(
            profiles.load_file(path),
            target=lock.Target(python=stacks.PYTHON, platform=stacks.PLATFORM),
            overrides=indexes,
            output=tmp_path / "pylock.toml",
        )
    assert not (tmp_path / "pylock.toml").exists()
    return caught.value


@pytest.mark.parametrize("torch", ['"==2.15.0"', '">=2.15"'])
def test_sglang_kernel_and_another_torch_name_the_pair_and_the_matching_torch(
    default: Index, tmp_path: Path, torch: str
) -> None:
    error = fails(tmp_path, f"sglang-kernel = {{}}\ntorch = {torch}\n", {"default": default.url})
    assert error.message.startswith(
        f"sglang-kernel and torch{torch.strip(chr(34))} cannot be resolved together: "
    )
    assert "pins torch==2.14.1 exactly" in error.message and "\n" not in error.message
    assert "pin torch==2.14.1" in error.hint


def test_sglang_kernel_with_torch_bound_to_an_index_of_2_15_only(
    index_server, default: Index, tmp_path: Path
) -> None:
    """The CUDA 13.2 torch index has no 2.14.1: the profile asks no version, the index decides it."""
    cu132 = index_server.index("cu132")
    cu132.add("torch", "2.15.0+cu132", tag=stacks.PY3)
    error = fails(
        tmp_path,
        'sglang-kernel = {}\ntorch = { index = "cu132" }\n',
        {"default": default.url, "cu132": cu132.url},
    )
    assert error.message.startswith("sglang-kernel and ") and "pins torch==2.14.1 exactly" in error.message, (
        error.message
    )


@pytest.mark.parametrize("pins", [("", ""), ('"==0.5.23"', '"==0.34.0"')])
def test_sglang_and_vllm_in_one_profile_say_separate_environments(
    default: Index, tmp_path: Path, pins: tuple[str, str]
) -> None:
    sglang, vllm = (pin or "{}" for pin in pins)
    error = fails(tmp_path, f"sglang = {sglang}\nvllm = {vllm}\n", {"default": default.url})
    assert (
        error.message.startswith("vllm and sglang cannot be resolved together: ")
        and "cannot share one environment" in error.message
    )
    assert "separate environments" in error.hint


def test_vllm_against_another_torch_alone_is_not_called_an_sglang_conflict(
    default: Index, tmp_path: Path
) -> None:
    error = fails(tmp_path, 'vllm = {}\ntorch = "==2.15.0"\n', {"default": default.url})
    assert "sglang" not in error.message.lower() and error.message.startswith("the pins cannot all hold: ")


def test_the_cli_prints_one_line_and_exits_6(default: Index, tmp_path: Path, provision_bin: str) -> None:
    folder = tmp_path / "profiles"
    folder.mkdir()
    (folder / "mixed.toml").write_text(
        'schema = 1\nname = "mixed"\ncuda = "13.0"\n[packages]\nsglang = {}\nvllm = {}\n'
    )
    done = run_provision(
        "lock",
        "mixed",
        "--platform",
        stacks.PLATFORM,
        "--python",
        stacks.PYTHON,
        "--index",
        f"default={default.url}",
        "-o",
        tmp_path / "pylock.mixed.toml",
        env={"PROVISION_PROFILES": str(folder)},
        cwd=tmp_path,
    )
    assert done.returncode == 6, done.stderr
    error = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(error) == 1 and "vllm and sglang cannot be resolved together" in error[0]
    assert any(
        line.startswith("hint:") and "separate environments" in line for line in done.stderr.splitlines()
    )
