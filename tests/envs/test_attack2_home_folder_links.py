"""HOME's builds/, envs/ or locks/ replaced by a link to a folder outside the home: gc deleted every folder it found
there (each read as a build no name points at), every dangling link and every unreadable `pylock.*.toml`, and remove
deleted the folder a name led to through it. Both now refuse (exit 7, the link named) and delete nothing."""

from __future__ import annotations

from pathlib import Path

import pytest
from launch import run_provision


def outside_folder(tmp_path: Path) -> Path:
    outside = tmp_path / "outside"
    (outside / "precious").mkdir(parents=True)
    (outside / "precious" / "data").write_text("keep me")
    (outside / "pylock.mine.toml").write_text("not a lock, but mine")
    (outside / "dangling").symlink_to(tmp_path / "nowhere")
    return outside


@pytest.mark.parametrize("folder", ["builds", "envs", "locks"])
def test_gc_with_a_home_folder_linked_out_deletes_nothing_there(tmp_path: Path, folder: str) -> None:
    outside, home = outside_folder(tmp_path), tmp_path / "home"
    home.mkdir()
    (home / folder).symlink_to(outside)
    before = sorted(p.name for p in outside.iterdir())
    done = run_provision("gc", env={"PROVISION_HOME": str(home)})
    assert sorted(p.name for p in outside.iterdir()) == before, done.stderr
    assert (outside / "precious" / "data").read_text() == "keep me"
    assert done.returncode == 7 and "Traceback" not in done.stderr, done.stderr
    assert f"error: {home / folder} is a link to {outside}" in done.stderr and "\nhint: " in done.stderr


def test_remove_through_a_builds_link_out_deletes_nothing_there(tmp_path: Path) -> None:
    outside, home = outside_folder(tmp_path), tmp_path / "home"
    (home / "envs").mkdir(parents=True)
    (home / "builds").symlink_to(outside)
    (home / "envs" / "victim").symlink_to("../builds/precious")
    done = run_provision("remove", "victim", env={"PROVISION_HOME": str(home)})
    assert (outside / "precious" / "data").read_text() == "keep me", done.stderr
    assert done.returncode == 7 and "Traceback" not in done.stderr, done.stderr
    assert f"{home / 'builds'} is a link to {outside}" in done.stderr


def test_gc_passes_over_a_folder_named_like_a_temporary_file(tmp_path: Path) -> None:
    """A folder `.notes.tmp` in HOME (or envs/) is no temporary file of provision's: gc stopped at it with exit 3
    ("Is a directory") and never cleaned the rest; now it is left as it is and gc goes on."""
    home = tmp_path / "home"
    for folder in (home / ".notes.tmp", home / "envs" / ".x.1.2.tmp"):
        folder.mkdir(parents=True)
        (folder / "kept").write_text("mine")
    (home / "envs" / ".active.123.456.tmp").symlink_to("envs/nowhere")  # what a killed point() leaves
    done = run_provision("gc", env={"PROVISION_HOME": str(home)})
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    assert (home / ".notes.tmp" / "kept").read_text() == "mine" and (
        home / "envs" / ".x.1.2.tmp" / "kept"
    ).exists()
    assert (
        not (home / "envs" / ".active.123.456.tmp").is_symlink() and "envs/.active.123.456.tmp" in done.stderr
    )


def test_gc_passes_over_a_folder_named_like_a_cached_lock(tmp_path: Path) -> None:
    """locks/pylock.x.toml a folder: gc read it as an unreadable lock and stopped at unlinking it (exit 3, Is a
    directory); now it is left as it is, and the unreadable lock beside it is still dropped."""
    home = tmp_path / "home"
    (home / "locks" / "pylock.x.toml").mkdir(parents=True)
    (home / "locks" / "pylock.x.toml" / "kept").write_text("mine")
    (home / "locks" / "pylock.y.toml").write_text("not a lock")
    done = run_provision("gc", env={"PROVISION_HOME": str(home)})
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    assert (home / "locks" / "pylock.x.toml" / "kept").read_text() == "mine"
    assert (
        not (home / "locks" / "pylock.y.toml").exists() and "locks/pylock.y.toml (unreadable)" in done.stderr
    )


def test_create_in_a_home_whose_builds_is_linked_out_builds_nothing_there(
    tmp_path: Path, index_server, provision_bin: str
) -> None:
    """create collects leftovers first, as gc does: it refuses the same link before anything is made."""
    import tiny

    tool = tiny.make_tool(tmp_path, provision_bin, tiny.index(index_server))
    outside = outside_folder(tmp_path)
    tool.home.mkdir()
    (tool.home / "builds").symlink_to(outside)
    before = sorted(p.name for p in outside.iterdir())
    done = tool.create("tiny", "--no-checks", check=False)
    assert done.returncode == 7 and f"{tool.home / 'builds'} is a link to {outside}" in done.stderr, (
        done.stderr
    )
    assert sorted(p.name for p in outside.iterdir()) == before
