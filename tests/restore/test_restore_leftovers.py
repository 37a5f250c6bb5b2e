"""What restore makes outside its own folders, and what it leaves when killed: it deletes only what it made, by the
exact names it recorded (BUILD/.restore-made), never a user's folder that merely looks like a staging copy; a killed
restore's copy and subset lock go with the next restore or gc; set-aside folders never collide; a Ctrl-C while start-up
files are moved aside leaves no copy behind; a venv that env.json moved outside the home is refused."""

from __future__ import annotations

import datetime
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import tiny

from provision.envs import drift, restore
from provision.envs.home import Home

TOOL_WITH_ENV = True  # conftest's `tool`: a home with profile tiny served on 127.0.0.1, environment tiny made


build_of = tiny.build_of


@pytest.mark.parametrize("venv_name", ["myvenv", "v*", "v[ab]"])
def test_gc_and_restore_never_delete_a_users_folder_named_like_a_staging_copy(
    tmp_path: Path, provision_bin: str, index_server, venv_name: str
) -> None:
    # the venv it adopts is the only one
    tool = tiny.make_tool(tmp_path, provision_bin, tiny.index(index_server))
    srv = tmp_path / "srv"
    srv.mkdir()
    venv = srv / venv_name
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    # restore sets it aside: it copies
    (drift.site_packages(venv) / "sitecustomize.py").write_text("print('hello')\n")
    dead = subprocess.Popen(["true"])
    dead.wait()
    users = [
        srv / f".{venv_name}.restore-backup",
        srv / f".{venv_name}.restore-{dead.pid}-20261130T000000Z",
        srv / ".vx.restore-1-20261130T000000Z",
        srv / ".va.restore-backup",
    ]
    for folder in users:
        folder.mkdir()
        (folder / "keep.txt").write_text("mine\n")
    tool("adopt", "mine", str(venv))
    tool("gc")
    done = tool("restore", "mine", "--no-checks", "--json", check=False)
    assert done.returncode in (0, 1), done.stderr
    assert json.loads(done.stdout)["set_aside"] == ["sitecustomize.py"]
    tool("gc")
    for folder in users:
        assert (folder / "keep.txt").read_text() == "mine\n", f"{folder} was touched"
    assert sorted(p.name for p in srv.iterdir()) == sorted([venv_name, *(f.name for f in users)])


def test_a_restore_killed_with_9_leaves_names_that_gc_removes_exactly(
    tool: tiny.Tool, tmp_path: Path
) -> None:
    build = build_of(tool)
    site = drift.site_packages(build / "venv")
    (site / "alpha" / "__init__.py").write_text("patched = True\n")
    tool.served.delay = 3.0  # a fresh uv cache: the wheel is fetched, slowly
    earlier = len(tool.served.requests)
    process = tool.popen(
        "restore", "tiny", "--no-checks", env={"UV_CACHE_DIR": str(tmp_path / "fresh-cache")}
    )
    deadline = time.time() + 60
    while time.time() < deadline and len(tool.served.requests) == earlier:
        time.sleep(0.05)
    subset = build / f"pylock.restore-{process.pid}.toml"
    assert subset.exists(), "the subset lock is written before uv asks the index"
    process.send_signal(signal.SIGKILL)
    process.communicate(timeout=30)
    tool.served.delay = 0.0
    staging = [p for p in build.iterdir() if p.name.startswith(".venv.restore-")]
    assert len(staging) == 1 and (build / ".restore-made").exists()
    removed = json.loads(tool("gc", "--json").stdout)["removed"]
    assert any(str(staging[0]) in line for line in removed) and any(
        str(subset) in line for line in removed
    ), removed
    assert not staging[0].exists() and not subset.exists() and not (build / ".restore-made").exists()
    assert (site / "alpha" / "__init__.py").read_text() == "patched = True\n", (
        "the venv itself is left as it was"
    )
    tool("restore", "tiny", "--no-checks")
    assert (site / "alpha" / "__init__.py").read_text() != "patched = True\n"


def test_a_restore_in_the_same_second_as_a_killed_ones_set_aside_sets_its_files_aside(
    tool: tiny.Tool,
) -> None:
    build = build_of(tool)
    site = drift.site_packages(build / "venv")
    (site / "sitecustomize.py").write_text("print('hello')\n")
    now = datetime.datetime.now(datetime.timezone.utc)
    # what a restore killed after its set-aside left, in every second this test may run
    for second in range(-2, 30):
        stamp = (now + datetime.timedelta(seconds=second)).strftime("%Y%m%dT%H%M%SZ")
        aside = build / restore.ASIDE / stamp
        aside.mkdir(parents=True)
        os.link(site / "sitecustomize.py", aside / "sitecustomize.py")  # cp -al: the same inode as the venv's
    done = tool("restore", "tiny", "--no-checks", "--json", check=False)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["drift_after"]["status"] == "pass"
    assert not (site / "sitecustomize.py").exists()


def test_ctrl_c_while_start_up_files_are_moved_aside_leaves_no_copy(
    tool: tiny.Tool, monkeypatch: pytest.MonkeyPatch
) -> None:
    build = build_of(tool)
    site = drift.site_packages(build / "venv")
    (site / "sitecustomize.py").write_text("print('hello')\n")
    (site / "zz-experiment.pth").write_text("import os\n")
    real_move = shutil.move
    moved: list[str] = []

    def interrupted_move(source: str, target: str) -> object:
        if moved:
            raise KeyboardInterrupt  # Ctrl-C after the first file is moved, before the next one (injected)
        moved.append(source)
        return real_move(source, target)

    monkeypatch.setattr(shutil, "move", interrupted_move)
    monkeypatch.setenv("PROVISION_HOME", str(tool.home))
    with pytest.raises(KeyboardInterrupt):
        restore.restore(Home(tool.home), "tiny")  # envs/restore.py: the venv put back, no checks after it
    assert moved
    assert (site / "sitecustomize.py").exists() and (site / "zz-experiment.pth").exists()
    leftovers = (
        [p for p in (build / restore.ASIDE).rglob("*") if p.is_file()]
        if (build / restore.ASIDE).exists()
        else []
    )
    assert leftovers == [], "a copy of a file still in the venv was left set aside"
    assert not [p for p in build.iterdir() if p.name.startswith(".venv.restore-")]


def test_restore_refuses_a_built_environment_whose_env_json_names_a_venv_outside_the_home(
    tool: tiny.Tool, tmp_path: Path
) -> None:
    build = build_of(tool)
    outside = tmp_path / "outside-venv"
    shutil.copytree(build / "venv", outside, symlinks=True)
    (drift.site_packages(outside) / "alpha" / "__init__.py").write_text("theirs = True\n")
    (drift.site_packages(outside) / "sitecustomize.py").write_text("print('theirs')\n")
    data = json.loads((build / "env.json").read_text())
    data["venv"] = str(outside)
    (build / "env.json").write_text(json.dumps(data))
    for extra in (("--dry-run",), ()):
        done = tool("restore", "tiny", "--no-checks", *extra, check=False)
        assert done.returncode == 7 and "Traceback" not in done.stderr, done.stderr
        assert f"names the venv {outside}" in done.stderr and "\nhint: " in done.stderr
    assert (drift.site_packages(outside) / "alpha" / "__init__.py").read_text() == "theirs = True\n"
    assert (drift.site_packages(outside) / "sitecustomize.py").exists()
    assert not [p for p in tmp_path.iterdir() if ".restore-" in p.name]


def test_a_planted_restore_record_deletes_nothing_but_this_venvs_own_staging_names(
    tool: tiny.Tool, tmp_path: Path
) -> None:
    build = build_of(tool)
    elsewhere = [
        tmp_path / "srv" / ".other.restore-1-20261130T000000Z",
        tmp_path / "srv" / "important",
        build / ".other.restore-1-20261130T000000Z",
        tmp_path / ".venv.restore-1-20261130T000000Z",
    ]
    for folder in elsewhere:
        folder.mkdir(parents=True)
        (folder / "keep.txt").write_text("mine\n")
    (build / restore.MADE).write_text(json.dumps({"pid": 1, "made": [str(p) for p in elsewhere]}))
    tool("gc")
    for folder in elsewhere:
        assert (folder / "keep.txt").read_text() == "mine\n", (
            f"{folder} was deleted on a planted record's word"
        )
