"""Where environments live, and the few atomic steps that change them. The lock, the links and activation are
links.py's, on str paths (switch and rollback call them without this module); `Home` gives them Paths.

    HOME/
      .lock                   serializes every process that changes HOME (fcntl)
      state.json              {"history": [names activated, oldest first]}
      builds/NAME-STAMP/      one build: venv/ (or a link to an adopted venv), env.json, .building while unfinished
      envs/NAME -> ../builds/NAME-STAMP     what a name means: swapped by one atomic rename
      active -> envs/NAME                   the active environment: HOME/active/venv/bin/python is a stable path
      locks/                  locks made by `create`, reused when profile, indexes, Python and platform match
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from provision import regular
from provision.atomic import (
    write_atomic as write_atomic,  # re-exported: where callers have always found them
)
from provision.atomic import write_json as write_json
from provision.envs import links
from provision.envs import state as states
from provision.envs.links import FAILED as FAILED
from provision.envs.links import HOME_VARIABLE as HOME_VARIABLE
from provision.envs.sites import site_packages as site_packages  # defined below home, which trialfiles reads
from provision.errors import EnvError
from provision.names import NAME_RULE as NAME_RULE
from provision.names import check_name as check_name

BUILDING = ".building"
RESTORING = ".restoring"  # a build's own lock, held by a restore


def present_site_packages(venv: Path) -> Path:
    """`site_packages(venv)`, which must be there: a venv that is gone (deleted, moved, a mount not there today) is an
    EnvError, never read as an empty one (a lock made of it, or a restore into it, would lose what it held)."""
    site = site_packages(venv)
    if not site.is_dir():
        raise EnvError(
            f"{venv} has no site-packages ({site.relative_to(venv)} is missing): the venv is gone, or is no venv",
            "put the venv back (a mount that is not there?), or remove the environment: provision remove NAME",
        )
    return site


def blocking_file(venv: Path) -> Path | None:
    """The first file in `venv` that Python, uv or the checks open and that is a pipe, a socket or a device (they
    would wait on it forever): pyvenv.cfg, site-packages' .pth, sitecustomize and usercustomize files, and every
    file of a .dist-info or .egg-info folder. None when there is none. Entries are judged from the folder listing
    (no stat per file), a link by what it leads to."""
    site = site_packages(venv)
    folders: list[Path | str] = [venv, site]
    try:
        with os.scandir(site) as entries:
            folders += [
                e.path
                for e in entries
                if e.name.endswith((".dist-info", ".egg-info")) and e.is_dir(follow_symlinks=False)
            ]
    except OSError:
        pass
    startup = (".pth", "sitecustomize.py", "usercustomize.py", ".egg-info")
    for folder in folders:
        try:
            with os.scandir(folder) as entries:
                for entry in entries:
                    if (
                        folder == venv
                        and entry.name != "pyvenv.cfg"
                        or folder == site
                        and not entry.name.endswith(startup)
                    ):
                        continue
                    if not _plain_file(entry):
                        return Path(entry.path)
        except OSError:
            continue
    return None


def _plain_file(entry: os.DirEntry[str]) -> bool:
    """Whether opening `entry` cannot block: a regular file, a folder, or a link to one (or to nothing)."""
    if entry.is_file(follow_symlinks=False) or entry.is_dir(follow_symlinks=False):
        return True
    if not entry.is_symlink():
        return False
    try:
        mode = os.stat(entry.path).st_mode
    except OSError:  # a dangling link or a loop: nothing to wait on
        return True
    return stat.S_ISREG(mode) or stat.S_ISDIR(mode)


def blocking_reason(path: Path) -> str:
    return f"{path} is not a regular file (a pipe, a socket or a device): Python, uv and the checks would wait on it forever"


def resolve(home: str | os.PathLike[str] | None = None) -> Path:
    """--home, else PROVISION_HOME, else $XDG_DATA_HOME/provision (~/.local/share/provision): links.resolve."""
    return Path(links.resolve(home))


class Home:
    """One home of environments, at `root` (a plain class: `switch` must not pay for generating a dataclass)."""

    __slots__ = ("root",)

    def __init__(self, root: Path) -> None:
        self.root = root

    def __repr__(self) -> str:
        return f"Home({str(self.root)!r})"

    @property
    def builds(self) -> Path:
        return self.root / "builds"

    @property
    def envs(self) -> Path:
        return self.root / "envs"

    @property
    def locks(self) -> Path:
        return self.root / "locks"

    @property
    def active_link(self) -> Path:
        return self.root / "active"

    def ensure(self) -> None:
        links.ensure(str(self.root))

    def writing(self, what: str) -> contextlib.AbstractContextManager[None]:
        """Turn a failure to write in HOME (read-only, no rights, a file where a folder belongs, a full disk) into
        one EnvError that names it and what to do."""
        return links.writing(str(self.root), what)

    def locked(self) -> contextlib.AbstractContextManager[None]:
        """Hold HOME's lock: a second process waits (and says so) rather than interleaving changes."""
        return links.locked(str(self.root))

    @contextlib.contextmanager
    def restoring(self, build: Path, name: str) -> Iterator[None]:
        """Hold `build`'s own lock through a restore (minutes when a wheel must be fetched), so that HOME's lock is
        free meanwhile: a switch or rollback in an emergency never waits for a restore."""
        with self.writing(f"take {name}'s restore lock"):
            try:
                handle = _own_file(build / RESTORING, os.O_RDWR | os.O_CREAT, "r+")
            except OSError as exc:
                if not regular.refusal(exc):
                    raise
                raise not_ours(build / RESTORING, f"provision restore {name}") from None

        def refuse(pid: str) -> None:
            raise EnvError(
                f"{name} is being restored (pid {pid})",
                "wait for that restore to finish, then run this again",
            )

        with links.holding(handle, refuse):
            yield

    def restorer(self, build: Path) -> str | None:
        """The pid of a restore holding `build` now, else None (remove, gc and --replace must not pull it away)."""
        try:
            # a pipe there must not block remove or gc
            handle = _own_file(build / RESTORING, os.O_RDONLY, "r")
        except OSError:
            return None
        with handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except OSError:
                return handle.read().strip() or "?"
            fcntl.flock(handle, fcntl.LOCK_UN)
            return None

    # --- names and the active pointer -------------------------------------------------------------

    def names(self) -> list[str]:
        return links.names(str(self.root))

    def build_of(self, name: str) -> Path:
        """The build `name` points at; what a trial killed mid-way left in its venv is put back first (trialfiles)."""
        build = Path(links.build_of(str(self.root), name))
        if os.path.lexists(build / ".trial-made"):
            from provision.envs import trialfiles

            trialfiles.recover(build)
        return build

    def referenced(self) -> set[Path]:
        """Every build some link in envs/ points at, whatever the link's name: what gc and remove must keep."""
        found = set()
        for link in self.envs.iterdir() if self.envs.is_dir() else []:
            if link.is_symlink():
                with contextlib.suppress(OSError, RuntimeError):
                    found.add((self.envs / os.readlink(link)).resolve())
        return found

    def owns(self, build: Path) -> bool:
        """Whether `build` is one of HOME's own build folders (never something a link points at elsewhere)."""
        try:
            return build.resolve(strict=True).parent == self.builds.resolve()
        except (OSError, RuntimeError):
            return False

    def own_folders(self) -> None:
        """builds/, envs/ and locks/ as HOME's own folders, before gc or remove deletes anything in them: one that is a
        link is refused (what it leads to is not HOME's: gc would delete the folders, links and files it finds there)."""
        for folder in (self.builds, self.envs, self.locks):
            if folder.is_symlink():
                raise EnvError(
                    f"{folder} is a link to {os.readlink(folder)}, not a folder of {self.root}: "
                    "provision deletes nothing outside its home",
                    f"replace the link with a folder of its own (move what provision made into {folder}), "
                    "or set PROVISION_HOME (or --home) to the home it belongs to; nothing was removed",
                )

    def delete_build(self, build: Path) -> None:
        """Remove one of HOME's build folders; anything outside builds/ is refused, never deleted."""
        if not self.owns(build):
            raise EnvError(
                f"{build} is not a build folder of {self.root}; provision deletes nothing outside its home",
                f"remove it yourself if it is really unused, or fix the link in {self.envs}",
            )
        remove_tree(build.resolve())

    def active(self) -> str | None:
        return links.active(str(self.root))

    def point(self, link: Path, target: str, *, sync: bool = True) -> None:
        """Make `link` point at `target` in one atomic rename (links.point)."""
        links.point(str(self.root), str(link), target, sync=sync)

    def activate(self, name: str) -> None:
        """Make `name` active, history included (links.activate: the one way, used by switch and rollback too)."""
        links.activate(str(self.root), name)

    def named_or_active(self, name: str | None, command: str) -> tuple[str, Path]:
        """(name, its build) for `name`, else for the active environment; `command` is what to run with a name."""
        name = name or self.active()
        if name is None:
            raise EnvError("no environment is active", f"name one: {command} NAME")
        return name, self.build_of(name)

    def state(self) -> states.State:
        return states.read(self.root)


def _own_file(path: Path, flags: int, mode: str) -> IO[str]:
    """`path` opened without following a link and without blocking; OSError (ELOOP, EINVAL) unless it is a regular
    file: a .restoring or .lock that is a link must not lead the pid written into it to a file elsewhere, nor a pipe
    hang."""
    return regular.open_file(path, flags, mode, follow=False)


def not_ours(path: Path, again: str) -> EnvError:
    """The refusal of a file of provision's own that is a link, a pipe or a device: nothing was changed."""
    return EnvError(
        f"{path} is not a file provision wrote (a link, a pipe or a device)",
        f"remove it (rm {path}), then run {again} again; nothing was changed",
    )


@contextlib.contextmanager
def deferred_interrupt() -> Iterator[list[int]]:
    """Hold Ctrl-C until the block ends, so that a step once begun (a swap) is finished; the list says if one came."""
    import signal
    import threading

    caught: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield caught
        return
    previous = signal.signal(signal.SIGINT, lambda number, _frame: caught.append(number))
    try:
        yield caught
    finally:
        signal.signal(signal.SIGINT, previous)


def remove_tree(path: Path) -> None:
    """Remove a build folder; an adopted venv behind a link is never followed."""
    if path.is_symlink():
        path.unlink()
    elif path.exists():
        import shutil

        shutil.rmtree(path, ignore_errors=True)
