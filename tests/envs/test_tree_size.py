"""An environment's size (`envs`, adopt's and create's record): every file under it counted once, a link as a link,
a link to a folder neither counted nor walked into (as os.walk sorts it), a FIFO or a dangling link as what lstat
says; read with scandir's entries, the answer of os.walk and lstat."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from provision.envs.inventory import tree_size


def _walked(path: Path) -> int:
    total = 0
    for folder, _dirs, files in os.walk(path):
        for file in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(folder, file)).st_size
    return total


def test_a_tree_of_every_kind_is_counted_as_os_walk_and_lstat_count_it(tmp_path: Path) -> None:
    root = tmp_path / "venv"
    (root / "lib" / "site-packages" / "pkg" / "sub").mkdir(parents=True)
    (root / "bin").mkdir()
    (root / "lib" / "site-packages" / "pkg" / "a.py").write_bytes(b"x" * 1000)
    (root / "lib" / "site-packages" / "pkg" / "sub" / "b.so").write_bytes(b"y" * 70_000)
    # a link to a file elsewhere: the link's own size
    (root / "bin" / "python").symlink_to("/usr/bin/python3")
    (root / "lib64").symlink_to("lib")  # a link to a folder: not walked into, not counted
    (root / "gone").symlink_to(root / "nowhere")  # dangling
    os.mkfifo(root / "fifo")
    (root / "empty").mkdir()
    expected = _walked(root)
    assert tree_size(root) == expected
    assert expected == 1000 + 70_000 + len("/usr/bin/python3") + len(str(root / "nowhere"))
    assert tree_size(tmp_path / "not-there") == 0


def test_links_whose_targets_cannot_be_looked_up_are_counted_as_links(tmp_path: Path) -> None:
    # is_dir() on these raises (ELOOP, ENOTDIR) where a dangling link's answers False: os.walk counts them as files
    root = tmp_path / "venv"
    root.mkdir()
    (root / "a").symlink_to("b")
    (root / "b").symlink_to("a")
    (root / "self").symlink_to("self")
    (root / "file").write_bytes(b"z" * 10)
    (root / "through-a-file").symlink_to("file/x")
    (root / "up").symlink_to("..")  # a link to its parent: a folder, never walked into
    expected = _walked(root)
    assert expected == 10 + len("b") + len("a") + len("self") + len("file/x")
    assert tree_size(root) == expected


def test_a_socket_and_names_that_are_not_utf8_are_counted(tmp_path: Path) -> None:
    import socket

    root = tmp_path / "venv"
    root.mkdir()
    odd = os.fsencode(root) + b"/caf\xe9-\xff"
    os.mkdir(odd)
    with open(odd + b"/\x80.py", "wb") as file:
        file.write(b"q" * 33)
    listener = socket.socket(socket.AF_UNIX)
    try:
        listener.bind(str(root / "s"))
        expected = _walked(root)
        assert expected == 33
        assert tree_size(root) == expected
    finally:
        listener.close()


def test_nesting_deeper_than_recursion_and_path_max_neither_crashes_nor_hangs(tmp_path: Path) -> None:
    # 5,000 folders: os.walk of 3.11 recurses once a folder; past PATH_MAX neither can open the folder, so both
    # count what lies above it
    root = tmp_path / "venv"
    root.mkdir()
    fd = os.open(root, os.O_RDONLY)
    try:
        for depth in range(5000):
            os.mkdir("d", dir_fd=fd)
            with open(os.open("f", os.O_WRONLY | os.O_CREAT, dir_fd=fd), "wb") as file:
                file.write(b"x" * (depth % 7))
            inner = os.open("d", os.O_RDONLY, dir_fd=fd)
            os.close(fd)
            fd = inner
    finally:
        os.close(fd)
    try:
        size = tree_size(root)
    finally:
        _remove_deep(root, 5000)
    # every "d/" is 2 bytes: the folders whose path fits in PATH_MAX (4096) are read, the rest are not
    readable = (4096 - len(str(root))) // 2
    assert sum(d % 7 for d in range(readable - 2)) <= size <= sum(d % 7 for d in range(readable + 1))


def _remove_deep(root: Path, depth: int) -> None:
    # shutil.rmtree recurses once a folder too: down the chain of "d" and back up by "..", one handle held at a time
    fd = os.open(root, os.O_RDONLY)
    for _ in range(depth):
        inner = os.open("d", os.O_RDONLY, dir_fd=fd)
        os.close(fd)
        fd = inner
    for _ in range(depth):
        outer = os.open("..", os.O_RDONLY, dir_fd=fd)
        os.close(fd)
        fd = outer
        os.rmdir("d", dir_fd=fd)
        os.unlink("f", dir_fd=fd)
    os.close(fd)


def test_a_folder_that_vanishes_or_becomes_a_file_while_walked_is_skipped(
    tmp_path: Path, monkeypatch
) -> None:
    import shutil

    root = tmp_path / "venv"
    (root / "keep").mkdir(parents=True)
    (root / "keep" / "k").write_bytes(b"k" * 5)
    (root / "gone" / "deep").mkdir(parents=True)
    (root / "gone" / "deep" / "g").write_bytes(b"g" * 7)
    (root / "swapped").mkdir()
    real = os.scandir

    def scandir(path: str):  # the tree changes between the listing of its root and the walk of its folders
        if path == str(root):
            listing = list(real(path))
            shutil.rmtree(root / "gone")
            (root / "swapped").rmdir()
            (root / "swapped").write_bytes(b"s" * 3)
            return contextlib.nullcontext(iter(listing))
        return real(path)

    monkeypatch.setattr(os, "scandir", scandir)
    assert tree_size(root) == 5
