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
    (root / "bin" / "python").symlink_to(
        "/usr/bin/python3"
    )  # a link to a file elsewhere: the link's own size
    (root / "lib64").symlink_to("lib")  # a link to a folder: not walked into, not counted
    (root / "gone").symlink_to(root / "nowhere")  # dangling
    os.mkfifo(root / "fifo")
    (root / "empty").mkdir()
    expected = _walked(root)
    assert tree_size(root) == expected
    assert expected == 1000 + 70_000 + len("/usr/bin/python3") + len(str(root / "nowhere"))
    assert tree_size(tmp_path / "not-there") == 0
