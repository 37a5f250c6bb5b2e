"""`lock` says what it knows of the indexes when it knows it: a mirror given for one index that also serves what the
profile takes from the default index is named with the second flag before uv resolves; an index that cannot be
reached gets a hint when the default index has the same build of what the profile takes from it."""

from __future__ import annotations

import socket
from pathlib import Path

import stacks
from launch import run_provision

from provision.stacks import lock, mirrors, profiles


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_mirror_for_one_index_that_serves_the_default_ones_packages_is_said_before_resolving(
    index_server, tmp_path: Path
) -> None:
    mirror = index_server.index("mirror")
    mirror.add("torch", "2.14.1")
    mirror.add("sglang", "0.5.23")  # a full mirror: the default registry's packages too
    path = tmp_path / "p.toml"
    path.write_text(
        'schema = 1\nname = "p"\ncuda = "13.0"\n[indexes]\npytorch = "https://download.pytorch.org/whl/cu130"\n'
        '[packages]\ntorch = { index = "pytorch", version = "==2.14.1" }\nsglang = "==0.5.23"\n'
    )
    profile = profiles.load(str(path))
    indexes = lock.effective_indexes(profile, {"pytorch": mirror.url}, environ={})
    note = mirrors.mirror_note(profile, indexes)
    assert (
        "the mirror given for index pytorch (--index pytorch=... or PROVISION_INDEX_PYTORCH) also serves sglang"
        in note
    )
    assert "--index default=URL or PROVISION_INDEX_DEFAULT" in note and "\n" not in note
    assert (
        mirrors.mirror_note(
            profile,
            lock.effective_indexes(profile, {"pytorch": mirror.url, "default": mirror.url}, environ={}),
        )
        == ""
    )
    only_torch = index_server.index("torchonly")
    only_torch.add("torch", "2.14.1")
    assert (
        mirrors.mirror_note(profile, lock.effective_indexes(profile, {"pytorch": only_torch.url}, environ={}))
        == ""
    )


def test_an_unreachable_pytorch_index_hints_at_the_same_build_on_the_default_index(
    index_server, tmp_path: Path, provision_bin: str
) -> None:
    default = index_server.index("default")
    default.add("torch", "2.14.1+cu130", tag=stacks.PY3)
    profile = tmp_path / "p.toml"
    profile.write_text(
        f'schema = 1\nname = "p"\ncuda = "13.0"\n[indexes]\npytorch = "http://127.0.0.1:{_closed_port()}/whl/cu130"\n'
        f'default = "{default.url}"\n[packages]\ntorch = {{ index = "pytorch", version = "==2.14.1" }}\n'
    )
    done = run_provision(
        "lock",
        str(profile),
        "--python",
        stacks.PYTHON,
        "--platform",
        stacks.PLATFORM,
        "-o",
        str(tmp_path / "pylock.toml"),
        timeout=180,
        cwd=tmp_path,
        env={"UV_CACHE_DIR": str(tmp_path / "uv"), "UV_HTTP_RETRIES": "0"},
    )
    assert done.returncode == 5, done.stderr
    hint = done.stderr.strip().splitlines()[-1]
    assert hint.startswith(
        "hint: index pytorch cannot be reached, but the default index has torch 2.14.1+cu130"
    ), done.stderr
