"""Where environments live, and the few atomic steps that change them.

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
import errno
import fcntl
import os
import stat
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO

from provision import log, regular
from provision.atomic import fsync_dir
from provision.atomic import (
    write_atomic as write_atomic,  # re-exported: where callers have always found them
)
from provision.atomic import write_json as write_json
from provision.envs import state as states
from provision.envs.recordfile import lock_file
from provision.errors import EnvError
from provision.names import NAME_RULE as NAME_RULE
from provision.names import check_name as check_name

HOME_VARIABLE = "PROVISION_HOME"
BUILDING = ".building"
RESTORING = ".restoring"  # a build's own lock, held by a restore
FAILED = ".failed"  # a build whose create failed, kept by --keep-failed: never activated


def site_packages(venv: Path) -> Path:
    """The venv's site-packages folder (lib/python3.X/site-packages)."""
    found = sorted(venv.glob("lib/python3*/site-packages"))
    return found[0] if found else venv / "lib" / "site-packages"


def blocking_file(venv: Path) -> Path | None:
    """The first file in `venv` that Python, uv or the checks open and that is a pipe, a socket or a device (they
    would wait on it forever): pyvenv.cfg, site-packages' .pth, sitecustomize and usercustomize files, and every
    file of a .dist-info or .egg-info folder. None when there is none. Entries are judged from the folder listing
    (no stat per file), a link by what it leads to."""
    site = site_packages(venv)
    folders: list[Path | str] = [venv, site]
    try:
        with os.scandir(site) as entries:
            folders += [e.path for e in entries if e.name.endswith((".dist-info", ".egg-info")) and e.is_dir(follow_symlinks=False)]
    except OSError:
        pass
    startup = (".pth", "sitecustomize.py", "usercustomize.py", ".egg-info")
    for folder in folders:
        try:
            with os.scandir(folder) as entries:
                for entry in entries:
                    if folder == venv and entry.name != "pyvenv.cfg" or folder == site and not entry.name.endswith(startup):
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


def resolve(home: Path | None = None) -> Path:
    """--home, else PROVISION_HOME, else $XDG_DATA_HOME/provision (~/.local/share/provision)."""
    if home is None and os.environ.get(HOME_VARIABLE):
        home = Path(os.environ[HOME_VARIABLE])
    if home is None:
        data = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
        home = Path(data) / "provision"
    home = home.expanduser().absolute()
    if home.exists() and not home.is_dir():  # every command, reading or writing, stops here alike (exit 7)
        raise EnvError(f"{home} is a file, not a folder: it cannot be provision's home",
                       "choose another --home (or PROVISION_HOME), or move that file away")
    return home


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
        with self.writing("make its folders"):
            for folder in (self.builds, self.envs, self.locks):
                folder.mkdir(parents=True, exist_ok=True)

    @contextlib.contextmanager
    def writing(self, what: str) -> Iterator[None]:
        """Turn a failure to write in HOME (read-only, no rights, a file where a folder belongs, a full disk) into
        one EnvError that names it and what to do."""
        try:
            yield
        except OSError as exc:
            where = f" ({exc.filename})" if exc.filename else ""
            if exc.errno == errno.ENOSPC:
                hint = "free space on that disk and run it again; nothing active was changed"
            elif exc.errno in (errno.ENOTDIR, errno.EEXIST, errno.EISDIR):
                hint = f"{self.root} must be provision's own folder: move what is in the way, or set PROVISION_HOME (or --home) elsewhere"
            else:
                hint = f"make {self.root} writable, or set PROVISION_HOME (or --home) to a folder you can write"
            raise EnvError(f"cannot {what} in {self.root}: {exc.strerror or exc}{where}", hint) from exc

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """Hold HOME's lock: a second process waits (and says so) rather than interleaving changes."""
        self.ensure()
        with self.writing("take its lock"):  # never through a link: the pid would be written wherever it leads
            handle = os.fdopen(lock_file(self.root / ".lock"), "r+")  # closed by _holding, after the body

        def wait(pid: str) -> None:
            log.info(f"waiting for another provision process working on {self.root} (pid {pid})")

        with _holding(handle, wait):
            yield

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
            raise EnvError(f"{name} is being restored (pid {pid})", "wait for that restore to finish, then run this again")

        with _holding(handle, refuse):
            yield

    def restorer(self, build: Path) -> str | None:
        """The pid of a restore holding `build` now, else None (remove, gc and --replace must not pull it away)."""
        try:
            handle = _own_file(build / RESTORING, os.O_RDONLY, "r")  # a pipe there must not block remove or gc
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
        if not self.envs.is_dir():
            return []
        return sorted(p.name for p in self.envs.iterdir() if p.is_symlink() and NAME_RULE.match(p.name))

    def build_of(self, name: str) -> Path:
        link = self.envs / check_name(name)
        if not link.is_symlink():
            known = ", ".join(self.names()) or "none yet"
            raise EnvError(f"no environment named {name!r} in {self.root}", f"known: {known}; make one with provision create PROFILE")
        return (self.envs / os.readlink(link)).resolve()

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

    def delete_build(self, build: Path) -> None:
        """Remove one of HOME's build folders; anything outside builds/ is refused, never deleted."""
        if not self.owns(build):
            raise EnvError(f"{build} is not a build folder of {self.root}; provision deletes nothing outside its home",
                           f"remove it yourself if it is really unused, or fix the link in {self.envs}")
        remove_tree(build.resolve())

    def active(self) -> str | None:
        try:
            return Path(os.readlink(self.active_link)).name
        except OSError:
            return None

    def point(self, link: Path, target: str, *, sync: bool = True) -> None:
        """Make `link` point at `target` in one atomic rename: a reader sees the old or the new, never neither. With
        `sync` off the caller syncs the folder (once, after a rename of its own beside it)."""
        with self.writing(f"point {link.name} at {target}"):
            if link.is_dir() and not link.is_symlink():
                self._set_aside(link)
            temp = link.with_name(f".{link.name}.{os.getpid()}.{time.monotonic_ns()}.tmp")
            os.symlink(target, temp)
            try:
                os.replace(temp, link)
            except BaseException:
                temp.unlink(missing_ok=True)
                raise
        if sync:
            fsync_dir(link.parent)

    def _set_aside(self, folder: Path) -> None:
        """A real folder where provision keeps a link (made by hand or by another tool): moved aside, never deleted,
        so that the link can be made and nothing in it is lost."""
        import datetime

        stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
        aside = folder.with_name(f"{folder.name}.set-aside-{stamp}-{os.getpid()}")
        os.rename(folder, aside)
        log.info(f"{folder} was a folder, not provision's link: moved to {aside}")

    def activate(self, name: str) -> None:
        if (self.build_of(name) / FAILED).exists():
            raise EnvError(f"{name!r} is a failed build kept for inspection (create --keep-failed); it is never activated",
                           f"look into {self.build_of(name)}, then provision remove {name} (or provision gc)")
        python = self.build_of(name) / "venv" / "bin" / "python"
        if not python.exists():
            raise EnvError(f"environment {name!r} has no python at {python} (its venv is gone)",
                           f"rebuild it: provision create PROFILE --name {name} --replace, or provision remove {name}")
        history = self.state().activated(name)  # a broken state.json stops here, before the active pointer moves
        before = self.active_link.readlink() if self.active_link.is_symlink() else None
        with self.writing("write state.json"):  # a full disk stops here too: written and synced beside it, not in place
            staged = states.stage(self.root, history)
        moved = False
        try:
            self.point(self.active_link, f"envs/{name}", sync=False)
            moved = True
            with self.writing("write state.json"):
                os.replace(staged, states.path(self.root))
        except BaseException:
            staged.unlink(missing_ok=True)
            if moved and before is not None:  # the history could not be put in place: the pointer goes back too
                with contextlib.suppress(OSError, EnvError):
                    self.point(self.active_link, str(before))
            raise
        fsync_dir(self.root)  # the pointer and state.json live in one folder: one sync makes both renames durable

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
    return EnvError(f"{path} is not a file provision wrote (a link, a pipe or a device)",
                    f"remove it (rm {path}), then run {again} again; nothing was changed")


@contextlib.contextmanager
def _holding(handle: IO[str], busy: Callable[[str], None]) -> Iterator[None]:
    """flock `handle` for the block, writing our pid in it; when another holds it, `busy(its pid)` first (it may
    raise), then wait. The handle is closed afterwards."""
    with handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno not in (errno.EAGAIN, errno.EACCES):
                raise
            handle.seek(0)
            busy(handle.read().strip() or "?")
            fcntl.flock(handle, fcntl.LOCK_EX)
        handle.seek(0)
        handle.truncate()
        handle.write(str(os.getpid()))
        handle.flush()
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


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
