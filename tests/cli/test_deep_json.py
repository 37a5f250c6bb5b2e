"""JSON nested past Python's recursion limit, wherever provision reads JSON that something else printed or wrote: a
check payload's answer (and the inventory's), a baseline command's output, the wheel cache's `checked` stamp and the
nvcc memory. json.loads raises RecursionError there, not ValueError: each was an internal error (exit 3, a
traceback's last line); each is now what any other unreadable answer is. A child's output tail (error messages, a
check's output_tail, env.json) is bounded in characters too: the baseline's 600 KB line was printed whole."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import tiny

DEEP = '{"a":' * 100_000 + "1" + "}" * 100_000  # one line, starts with "{": what the readers look for


def test_a_check_whose_environment_prints_deep_json_is_an_error_of_that_check(
    tmp_path: Path, provision_bin: str, index_server
) -> None:
    """A sitecustomize in the checked environment prints DEEP last in every process: the inventory's answer and the
    imports check's answer are both that line."""
    tool = tiny.tool_with_env(tmp_path, provision_bin, tiny.index(index_server))
    site = next(Path(tool.envs()["tiny"]["path"], "venv", "lib").glob("python3*/site-packages"))
    (site / "sitecustomize.py").write_text(f"import atexit\natexit.register(print, {DEEP!r})\n")
    done = tool("check", "tiny", "--only", "imports", "--json", check=False)
    assert done.returncode == 1 and "internal error" not in done.stderr and "Traceback" not in done.stderr, (
        done.stderr
    )
    (result,) = json.loads(done.stdout)["checks"]
    assert (result["id"], result["status"]) == ("imports", "error") and "crashed" in result["reason"], result


def test_a_baseline_printing_deep_json_has_no_figure_and_says_so(
    tmp_path: Path, provision_bin: str, index_server
) -> None:
    tool = tiny.make_tool(tmp_path, provision_bin, tiny.index(index_server))
    code = (
        "print('{\"a\":' * 100_000 + '1' + '}' * 100_000)"  # DEEP, made by the command (argv holds 128 KiB)
    )
    tiny.profile(
        tool.profiles,
        "deep",
        extra=(
            f'[baseline]\ncommand = ["python", "-c", {json.dumps(code)}]\n'
            'json_key = "a.a"\nunit = "tok/s"\nbetter = "higher"\ntimeout = 60\n'
        ),
    )
    tool.create("deep", "--no-checks")
    done = tool("baseline", "deep", check=False)
    said = done.stderr[-2000:]  # not the whole output when this fails: DEEP is 600 KB
    assert done.returncode == 7 and "internal error" not in done.stderr and "Traceback" not in done.stderr, (
        said
    )
    assert "the baseline failed (no figure in its output)" in done.stderr, said
    assert len(done.stderr) < 6000, f"{len(done.stderr):,} characters: the output's tail is not bounded"


def test_a_deep_checked_stamp_in_the_wheel_cache_is_a_damaged_entry(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from provision.stacks import wheelcache

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    sha = "0" * 64
    place = wheelcache.folder() / sha
    place.mkdir(parents=True)
    (place / "x-1.0-py3-none-any.whl").write_bytes(b"not the wheel of that sha256")
    (place / "checked").write_text(DEEP)
    # removed, as damage is
    assert wheelcache.cached(sha, "x-1.0-py3-none-any.whl") is None and not place.exists()


def test_a_deep_nvcc_memory_is_forgotten(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from provision.report import compiler

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    compiler.memory_file().parent.mkdir(parents=True)
    compiler.memory_file().write_text(DEEP)
    assert compiler._remembered("anything") is None


def test_an_nvcc_memory_of_another_shape_is_forgotten(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A list where a mapping is kept: read as nothing remembered, and written over when nvcc answers."""
    from provision.report import compiler

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    compiler.memory_file().parent.mkdir(parents=True)
    compiler.memory_file().write_text("[1, 2]")
    assert compiler._remembered("anything") is None
