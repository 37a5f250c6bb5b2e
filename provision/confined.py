"""Paths confined to one folder: the link on the way to a path that leads out of it. The drift check reads, and restore
moves and writes, only inside the environment; a link out (site-packages itself, a package folder, a file) is named,
never followed."""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from pathlib import Path

from provision.errors import EnvError

Escape = tuple[str, str]  # (the link, where it leads)


class Confinement:
    """Answers, for paths under `root`, whether a link on the way leads out of it; folders are asked once each."""

    def __init__(self, root: Path | str) -> None:
        # as spelled (normalized, not made absolute): the paths asked about are built from the same spelling
        self.root = os.path.normpath(root)
        self.real = os.path.realpath(self.root)
        self._under_root, self._under_real = os.path.join(self.root, ""), os.path.join(self.real, "")
        self._folders: dict[str, Escape | None] = {self.root: None}
        # folders found not to be there: nothing under them is asked of the disk
        self._missing: set[str] = set()

    def inside(self, target: str) -> bool:
        """Whether the resolved `target` is the root or under it."""
        return target == self.real or target.startswith(self._under_real)

    def folder(self, path: str) -> Escape | None:
        """The link, among `path` and the folders above it up to the root, that leads out of the root; None if none
        does, or if `path` is not under the root (what lies outside is the caller's concern, and never opened here)."""
        # the drift check asks once per folder: a normalized path is found before normpath
        if path in self._folders:
            return self._folders[path]
        path = os.path.normpath(path)
        if path in self._folders:
            return self._folders[path]
        if not path.startswith(self._under_root):
            return None
        parent = path.rpartition(os.sep)[0]
        verdict = self.folder(parent)  # under the root, so never "" nor the file system's root
        # nothing is under a folder that is not there: not remembered,
        if verdict is None and parent in self._missing:
            return None  # so that a RECORD's rows in as many folders that are not there cost no memory here
        if verdict is None:
            try:
                link = stat.S_ISLNK(os.lstat(path).st_mode)
            except (FileNotFoundError, NotADirectoryError):
                link = False
                self._missing.add(path)
            except (OSError, ValueError):  # ValueError: a NUL byte (a damaged RECORD's path)
                link = False
            if link and not self.inside(target := os.path.realpath(path)):
                verdict = (path, target)
        self._folders[path] = verdict
        return verdict

    def path(self, path: str, *, also: Callable[[str], bool] | None = None) -> Escape | None:
        """As `folder`, for a file: the file may be a link to where `also` allows (uv's cache, where uv links from)."""
        path = os.path.normpath(path)
        verdict = self.folder(os.path.dirname(path))
        if verdict is None and os.path.islink(path) and path.startswith(self._under_root):
            target = os.path.realpath(path)
            if not self.inside(target) and not (also is not None and also(target)):
                verdict = (path, target)
        return verdict


def refusal(escape: Escape, root: Path | str, what: str, again: str = "the command again") -> EnvError:
    """The error for a link out of the environment: the link, where it leads, and that nothing was changed."""
    link, target = escape
    return EnvError(
        f"{link} is a link to {target}, outside the environment {root}: {what} reads and writes only inside it",
        f"nothing was changed; replace the link with the files it points to (or remove it), then run {again}",
    )
