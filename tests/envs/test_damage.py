"""A damaged home and bad input: each is one error line and hint with its exit code, never a traceback, and the
active environment stays as it was. Disk full is injected here (a fake ENOSPC, raised where provision stages a file);
a real one, a small tmpfs filled (tests/fulldisk.py), is attacked beside each command (test_attack17_*)."""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
import tiny


def one_error(done: subprocess.CompletedProcess[str], code: int, *words: str) -> None:
    lines = done.stderr.strip().splitlines()
    assert done.returncode == code and "Traceback" not in done.stderr, done.stderr
    assert lines[-2].startswith("error: ") and lines[-1].startswith("hint: "), done.stderr
    assert all(w in done.stderr for w in words), done.stderr


def test_a_home_that_is_a_file_or_has_a_folder_for_its_lock(tool: tiny.Tool, tmp_path: Path) -> None:
    a_file = tmp_path / "home-file"
    a_file.write_text("")
    for args in (("create", "tiny", "--python", tiny.PY), ("switch", "x"), ("gc",), ("envs",)):
        one_error(
            tool(*args, check=False, env={"PROVISION_HOME": str(a_file)}),
            7,
            "is a file, not a folder",
            str(a_file),
        )
        # --home, before or after the command, says the same (it was a click usage error, exit 2, and envs listed nothing)
        one_error(tool("--home", str(a_file), *args, check=False), 7, "is a file, not a folder", str(a_file))
        one_error(tool(*args, "--home", str(a_file), check=False), 7, "is a file, not a folder", str(a_file))
    (tool.home / ".lock").mkdir(parents=True)
    one_error(tool.create("tiny", check=False), 7, "cannot take its lock", ".lock")
    if os.geteuid() != 0:  # root writes into a read-only folder anyway
        readonly = tmp_path / "readonly"
        readonly.mkdir(mode=0o500)
        one_error(
            tool("gc", check=False, env={"PROVISION_HOME": str(readonly / "home")}),
            7,
            "cannot make its folders",
        )


def test_active_as_a_real_folder_is_set_aside_and_switch_repairs_it(tool: tiny.Tool) -> None:
    tool.create("tiny", "--no-checks")
    os.unlink(tool.home / "active")
    (tool.home / "active").mkdir()
    (tool.home / "active" / "notes.txt").write_text("mine")
    tool("switch", "tiny")
    assert os.readlink(tool.home / "active") == "envs/tiny"
    (aside,) = tool.home.glob("active.set-aside-*")
    assert (aside / "notes.txt").read_text() == "mine"


def enospc(*_args: object, **_kwargs: object) -> None:
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), "state.json")


def test_disk_full_on_switch_rollback_and_create_changes_nothing(
    tool: tiny.Tool, monkeypatch: pytest.MonkeyPatch
) -> None:
    from provision import atomic
    from provision.commands import create as creating
    from provision.envs import active
    from provision.envs import home as homes
    from provision.errors import EnvError
    from provision.stacks import profiles

    tool.create("tiny", "--name", "a", "--no-checks")
    tool.create("tiny", "--name", "b", "--no-checks")
    for key, value in tool.env().items():
        monkeypatch.setenv(key, value)
    where = homes.Home(tool.home)
    builds = tool.builds()
    monkeypatch.setattr(atomic, "stage", enospc)  # every file provision writes is staged there first
    for attempt in (
        lambda: active.switch(str(tool.home), "a"),
        lambda: active.rollback(str(tool.home)),
        lambda: creating.create(where, profiles.load("tiny"), name="c", python=tiny.PY, checks=False),
    ):
        with pytest.raises(EnvError) as caught:
            attempt()
        assert "No space left on device" in caught.value.message and "free space" in caught.value.hint
        assert where.active() == "b" and os.readlink(tool.home / "active") == "envs/b"
    assert tool.builds() == builds


def test_a_history_that_cannot_be_put_in_place_moves_the_pointer_back(
    tool: tiny.Tool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """switch writes state.json beside it first and renames it after the pointer: when that rename fails, the pointer
    goes back and the staged file is gone (both live in HOME, made durable by one folder sync)."""
    from provision.envs import active
    from provision.errors import EnvError

    tool.create("tiny", "--name", "a", "--no-checks")
    tool.create("tiny", "--name", "b", "--no-checks")
    history = (tool.home / "state.json").read_text()
    real_replace = os.replace

    def failing(source: str | Path, target: str | Path) -> None:
        if Path(target).name == "state.json":
            raise OSError(errno.EIO, os.strerror(errno.EIO), str(target))
        real_replace(source, target)

    monkeypatch.setattr(os, "replace", failing)
    with pytest.raises(EnvError, match="cannot write state.json"):
        active.switch(str(tool.home), "a")
    assert os.readlink(tool.home / "active") == "envs/b" and (tool.home / "state.json").read_text() == history
    assert sorted(p.name for p in tool.home.iterdir() if p.name.startswith(".")) == [".lock"]


def test_ctrl_c_just_after_the_build_folder_is_made_removes_it(
    tool: tiny.Tool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The window the CI found: a Ctrl-C between the mkdir of the build and the cleanup's try left the folder."""
    from provision.commands import create as creating
    from provision.envs import home as homes
    from provision.envs import lifecycle
    from provision.stacks import profiles

    tool.create("tiny", "--name", "a", "--no-checks")
    for key, value in tool.env().items():
        monkeypatch.setenv(key, value)
    where = homes.Home(tool.home)
    builds = tool.builds()
    real_write_text = Path.write_text

    def interrupted(path: Path, *args: object, **kwargs: object) -> int:
        if path.name == lifecycle.BUILDING:
            raise KeyboardInterrupt  # the signal lands while the new folder is being marked as building
        return real_write_text(path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(Path, "write_text", interrupted)
    with pytest.raises(KeyboardInterrupt):
        creating.create(where, profiles.load("tiny"), name="c", python=tiny.PY, checks=False)
    assert tool.builds() == builds and where.active() == "a"


def test_a_link_mode_uv_does_not_know_is_one_line_naming_uv_link_mode(tool: tiny.Tool) -> None:
    tool.create("tiny", "--name", "a", "--no-checks")
    builds = tool.builds()
    done = tool(
        "create", "tiny", "--name", "b", "--python", tiny.PY, check=False, env={"UV_LINK_MODE": "bogus"}
    )
    one_error(
        done,
        2,
        "UV_LINK_MODE='bogus' (how uv links files into a venv) is not one of uv's link modes",
        "unset UV_LINK_MODE",
    )
    assert tool.builds() == builds


def test_disk_full_on_check_is_one_line(
    tool: tiny.Tool, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from provision.cli.main import main
    from provision.envs import records

    tool.create("tiny")
    before = (Path(tool.envs()["tiny"]["path"]) / "env.json").read_text()
    monkeypatch.setattr(records, "write_json", enospc)
    with pytest.raises(SystemExit) as exited:
        main(["check", "tiny", "--home", str(tool.home)])
    err = capsys.readouterr().err
    assert (
        exited.value.code == 3
        and "error: No space left on device: state.json" in err
        and "hint: free space" in err
    )
    assert (Path(tool.envs()["tiny"]["path"]) / "env.json").read_text() == before


def test_bad_values_are_one_line(tool: tiny.Tool, tmp_path: Path) -> None:
    one_error(
        tool("create", "tiny", "--python", str(tmp_path), check=False), 2, "a folder, not an interpreter"
    )
    one_error(
        tool("lock", "tiny", check=False, env={"PROVISION_HTTP_TIMEOUT": "abc"}),
        2,
        "PROVISION_HTTP_TIMEOUT='abc'",
    )
    one_error(
        tool("lock", "tiny", check=False, env={"PROVISION_HTTP_TIMEOUT": "-1"}), 2, "PROVISION_HTTP_TIMEOUT"
    )
    for size in ("inf", "nan", "-5", "0"):
        one_error(tool("bench", "allreduce", "-b", size, check=False), 2, "is not a size")
    done = tool("probe", "--venv", str(tmp_path / "nonexistent"), check=False)
    assert done.returncode == 2 and "does not exist" in done.stderr and "Traceback" not in done.stderr


def test_the_builtin_baseline_without_a_gpu_is_one_line(tool: tiny.Tool) -> None:
    from provision.machine import nvml

    if nvml.read(nvml.load_library()).gpus:
        pytest.skip("this machine has a GPU")
    tool.create("tiny")
    one_error(tool("baseline", "tiny", check=False), 7, "has no NVIDIA GPU")


def test_check_only_keeps_the_full_runs_other_verdicts(tool: tiny.Tool) -> None:
    tool.create("tiny")
    meta_path = Path(tool.envs()["tiny"]["path"]) / "env.json"
    meta = json.loads(meta_path.read_text())
    meta["checks_required"] = ["imports", "driver"]
    meta_path.write_text(json.dumps(meta))
    tool("check", "tiny", check=False)
    full = {r["id"]: r["status"] for r in json.loads(meta_path.read_text())["checks"]["results"]}
    tool("check", "tiny", "--only", "imports", check=False)
    after = {r["id"]: r["status"] for r in json.loads(meta_path.read_text())["checks"]["results"]}
    assert {"imports", "driver"} <= set(full) and after == full


def test_a_wrapper_nvcc_on_path_is_the_same_toolkit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from provision.machine import toolkits

    if shutil.which("cc") is None:
        pytest.skip("no C compiler to make a real nvcc binary")
    real = tmp_path / "cuda-12.8" / "bin" / "nvcc"
    real.parent.mkdir(parents=True)
    source = tmp_path / "nvcc.c"
    source.write_text(
        "#include <stdio.h>\n#include <string.h>\nint main(int c, char **v) {\n"
        ' if (c > 1 && !strcmp(v[1], "--version")) puts("Cuda compilation tools, release 12.8, V12.8.93");\n'
        ' else if (c > 1 && !strcmp(v[1], "--list-gpu-code")) puts("sm_90 sm_120");\n'
        ' else puts("compute_90 compute_120");\n return 0; }\n'
    )
    subprocess.run(["cc", "-o", str(real), str(source)], check=True)
    wrapper = tmp_path / "usr" / "bin" / "nvcc"
    wrapper.parent.mkdir(parents=True)
    wrapper.write_text(f'#!/bin/sh\nexec {real} "$@"\n')
    wrapper.chmod(0o755)
    monkeypatch.setenv("CUDA_HOME", str(real.parent.parent))
    monkeypatch.setenv("PATH", f"{wrapper.parent}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.delenv("CUDA_PATH", raising=False)
    found, _ = toolkits.find()
    mine = [t for t in found if t.full_version == "12.8.93"]
    assert len(mine) == 1 and mine[0].nvcc == str(real) and mine[0].found_by[:2] == ("CUDA_HOME", "PATH")
