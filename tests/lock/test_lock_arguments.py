"""`provision lock` refuses, before uv runs, a --python that is not a version (exit 2) and an index URL with '[' or ']'
outside an IPv6 host: in a profile the profile check's exit 4, on the command line a usage error (exit 2)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from conftest import ROOT
from launch import run_provision


def lock(provision_bin: str, profiles: Path, tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run_provision(
        "lock",
        *args,
        "-o",
        str(tmp_path / "pylock.toml"),
        timeout=60,
        env={**os.environ, "PROVISION_PROFILES": str(profiles)},
    )


def one_line(done: subprocess.CompletedProcess[str], code: int, *words: str) -> None:
    lines = done.stderr.strip().splitlines()
    assert done.returncode == code and len(lines) == 2 and "Traceback" not in done.stderr, done.stderr
    assert all(word in lines[0] for word in words), done.stderr


@pytest.mark.parametrize("python", ["abc", "3", "3.x", "3.12abc", "../3.12"])
def test_a_python_that_is_not_a_version(provision_bin: str, tmp_path: Path, python: str) -> None:
    one_line(
        lock(provision_bin, ROOT / "profiles", tmp_path, "cu130", "--python", python),
        2,
        "--python",
        repr(python),
    )
    assert not (tmp_path / "pylock.toml").exists()


@pytest.mark.parametrize(
    "url", ["http://host/sim[ple", "http://host/simple]", "http://host/s?x=[1]", "http://ex[ample.com/simple"]
)
def test_brackets_outside_an_ipv6_host(provision_bin: str, tmp_path: Path, url: str) -> None:
    profiles = tmp_path / "profiles"
    profiles.mkdir()
    (profiles / "b.toml").write_text(
        f'schema = 1\nname = "b"\ncuda = "13.0"\n[indexes]\nx = "{url}"\n[packages]\nalpha = {{index = "x"}}\n'
    )
    shown = url.split("?")[0]  # query values are shown as **** (they may be tokens)
    one_line(lock(provision_bin, profiles, tmp_path, "b"), 4, "indexes.x", shown)
    one_line(
        lock(provision_bin, ROOT / "profiles", tmp_path, "cu130", "--index", f"default={url}"),
        2,
        "--index default",
        shown,
    )


@pytest.mark.parametrize(
    "name",
    [
        "pylock.toml",
        "pylock.cu130.toml",
        "pylock.a-b_c.toml",
        "pylock..toml",
        "pylock.a.b.toml",
        "pylock.toml.bak",
        "Pylock.toml",
        "pylock.cu130.TOML",
        "xpylock.toml",
        "pylock.\n.toml",
        "pylock.x.toml\n",
        "lock.toml",
        "pylock.é.toml",
    ],
)
def test_the_lock_name_rule_is_packagings(name: str) -> None:
    """`lock -o` is checked before uv starts without loading packaging.pylock: the rule is packaging's all the same."""
    from packaging.pylock import is_valid_pylock_path

    from provision.stacks import lockfile

    assert lockfile.is_lock_name(Path("/some/folder") / name) == is_valid_pylock_path(
        Path("/some/folder") / name
    )


def test_uvs_input_reads_back_as_written() -> None:
    """The pyproject.toml uv resolves is written as text (no tomlkit before uv starts): whatever a profile's path,
    repository or index name holds, TOML reads back exactly the document (quotes, backslashes, newlines, DEL, any
    Unicode: JSON's surrogate pairs would be refused by TOML)."""
    from provision import toml
    from provision.stacks import uvproject

    odd = "a\"b\\c\nd\te\x7ff\x01g é 😀 'h' [i] = j"
    doc = {
        "project": {
            "name": "provision-lock",
            "version": "0",
            "dependencies": ["torch==2.11.0", f"x @ file:///{odd}", odd],
        },
        "tool": {
            "uv": {
                "sources": {
                    "torch": {"index": "pytorch"},
                    odd: {"path": odd, "editable": True},
                    "g": {"git": f"https://example.invalid/{odd}", "rev": odd},
                },
                "index": [
                    {"name": "pytorch", "url": "https://example.invalid/whl", "explicit": True},
                    {"name": odd, "url": odd, "explicit": False},
                ],
            }
        },
    }
    assert toml.loads(uvproject.dumps(doc)) == doc
    assert toml.loads(uvproject.dumps({"project": {"name": "p", "version": "0", "dependencies": []}})) == {
        "project": {"name": "p", "version": "0", "dependencies": []}
    }


def test_uvs_input_binds_to_the_default_index_only_where_another_could_answer(tmp_path: Path) -> None:
    """uv resolves a package bound by [tool.uv.sources] one request after another (3 wheels: 0.16 s against 0.09 s):
    a profile whose only index is the default one gets no binding (uv has no other index to take from), one with a
    named index keeps it, so that a package of the default index never comes from the named one."""
    from provision import toml
    from provision.stacks import lock, profiles

    path = tmp_path / "two.toml"
    path.write_text(
        'schema = 1\nname = "two"\ncuda = "13.0"\npython = "3.12"\n[indexes]\n'
        'pytorch = "https://example.invalid/whl/cu130"\n[packages]\nnumpy = "==2.3.0"\n'
        'torch = { version = "==2.11.0", index = "pytorch" }\n'
    )
    profile = profiles.load_file(path)
    alone = {"default": "https://example.invalid/simple"}
    both = {"pytorch": "https://example.invalid/whl/cu130", "default": "https://example.invalid/simple"}
    bound = toml.loads(lock._project(profile, {}, both))["tool"]["uv"]["sources"]
    assert bound == {"numpy": {"index": "default"}, "torch": {"index": "pytorch"}}
    one = tmp_path / "one.toml"
    one.write_text(
        'schema = 1\nname = "one"\ncuda = "13.0"\npython = "3.12"\n[packages]\nnumpy = "==2.3.0"\n'
    )
    assert "sources" not in toml.loads(lock._project(profiles.load_file(one), {}, alone))["tool"]["uv"]
