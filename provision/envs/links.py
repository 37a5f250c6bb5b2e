"""HOME's lock and its links, on plain str paths (os.path, no pathlib): where the home is, its lock, what a name and the
active pointer lead to, pointing a link in one atomic rename, and activating a name (history included). The one
implementation of each: `Home` (home.py) calls these with its root, and `switch` and `rollback` (active.py) call them
directly, so that an emergency switch loads neither pathlib nor the rest of home.py (docs/performance.md)."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import time
from typing import IO, TYPE_CHECKING

from provision import log
from provision.atomic import fsync_dir
from provision.envs import state as states
from provision.envs.recordfile import lock_file
from provision.errors import EnvError
from provision.names import NAME_RULE, check_name

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

HOME_VARIABLE = "PROVISION_HOME"
FAILED = ".failed"  # a build whose create failed, kept by --keep-failed: never activated


def absolute(path: str) -> str:
    """`path` with ~ expanded, made absolute against the working folder and spelled as pathlib spells it ("." parts and
    repeated or trailing slashes dropped, ".." kept: through a link it does not mean the folder above)."""
    path = os.path.expanduser(path)
    if not path.startswith("/"):
        path = os.path.join(os.getcwd(), path)
    lead = "//" if path.startswith("//") and not path.startswith("///") else "/"
    return lead + "/".join(part for part in path.split("/") if part not in ("", "."))


def name_of(target: str) -> str:
    """The last part of a link's target, as pathlib's `.name` reads it ("envs/a/" and "envs/a/." are "a")."""
    parts = [part for part in target.split("/") if part not in ("", ".")]
    return parts[-1] if parts else ""


def resolve(home: str | os.PathLike[str] | None = None) -> str:
    """--home, else PROVISION_HOME, else $XDG_DATA_HOME/provision (~/.local/share/provision)."""
    if home is None and os.environ.get(HOME_VARIABLE):
        home = os.environ[HOME_VARIABLE]
    if home is None:
        data = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
        home = os.path.join(data, "provision")
    root = absolute(os.fspath(home))
    # every command, reading or writing, stops here alike (exit 7)
    if os.path.exists(root) and not os.path.isdir(root):
        raise EnvError(
            f"{root} is a file, not a folder: it cannot be provision's home",
            "choose another --home (or PROVISION_HOME), or move that file away",
        )
    return root


@contextlib.contextmanager
def writing(root: str, what: str) -> Iterator[None]:
    """Turn a failure to write in HOME (read-only, no rights, a file where a folder belongs, a full disk) into one
    EnvError that names it and what to do."""
    try:
        yield
    except OSError as exc:
        written = exc.filename2 or exc.filename  # of a copy, a rename or a link: the one being written
        where = f" ({written})" if written else ""
        if exc.errno == errno.ENOSPC:
            hint = "free space on that disk and run it again; nothing active was changed"
        elif exc.errno in (errno.ENOTDIR, errno.EEXIST, errno.EISDIR):
            hint = f"{root} must be provision's own folder: move what is in the way, or set PROVISION_HOME (or --home) elsewhere"
        else:
            hint = f"make {root} writable, or set PROVISION_HOME (or --home) to a folder you can write"
        raise EnvError(f"cannot {what} in {root}: {exc.strerror or exc}{where}", hint) from exc


def ensure(root: str) -> None:
    """HOME's folders: builds/, envs/ and locks/."""
    with writing(root, "make its folders"):
        for folder in ("builds", "envs", "locks"):
            os.makedirs(os.path.join(root, folder), exist_ok=True)


@contextlib.contextmanager
def locked(root: str) -> Iterator[None]:
    """Hold HOME's lock: a second process waits (and says so) rather than interleaving changes."""
    ensure(root)
    with writing(root, "take its lock"):  # never through a link: the pid would be written wherever it leads
        handle = os.fdopen(lock_file(os.path.join(root, ".lock")), "r+")  # closed by holding, after the body

    def wait(pid: str) -> None:
        log.info(f"waiting for another provision process working on {root} (pid {pid})")

    with holding(handle, wait):
        yield


@contextlib.contextmanager
def holding(handle: IO[str], busy: Callable[[str], None]) -> Iterator[None]:
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
        # who holds it, for one who waits: a full disk holds the lock all the same
        with contextlib.suppress(OSError):
            os.write(handle.fileno(), str(os.getpid()).encode())
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def names(root: str) -> list[str]:
    """The environments' names: the links in envs/ that follow the name rule."""
    envs = os.path.join(root, "envs")
    if not os.path.isdir(envs):
        return []
    with os.scandir(envs) as entries:
        return sorted(e.name for e in entries if e.is_symlink() and NAME_RULE.match(e.name))


def build_of(root: str, name: str) -> str:
    """The build folder `name` leads to (resolved); an EnvError naming the known ones when there is no such name."""
    link = os.path.join(root, "envs", check_name(name))
    if not os.path.islink(link):
        known = ", ".join(names(root)) or "none yet"
        raise EnvError(
            f"no environment named {name!r} in {root}",
            f"known: {known}; make one with provision create PROFILE",
        )
    return os.path.realpath(os.path.join(root, "envs", os.readlink(link)))


def active(root: str) -> str | None:
    """The active environment's name, None when nothing is active."""
    try:
        return name_of(os.readlink(os.path.join(root, "active")))
    except OSError:
        return None


def point(root: str, link: str, target: str, *, sync: bool = True) -> None:
    """Make `link` point at `target` in one atomic rename: a reader sees the old or the new, never neither. With `sync`
    off the caller syncs the folder (once, after a rename of its own beside it)."""
    folder, base = os.path.split(link)
    with writing(root, f"point {base} at {target}"):
        if os.path.isdir(link) and not os.path.islink(link):
            _set_aside(link)
        temp = os.path.join(folder, f".{base}.{os.getpid()}.{time.monotonic_ns()}.tmp")
        os.symlink(target, temp)
        try:
            os.replace(temp, link)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(temp)
            raise
    if sync:
        fsync_dir(folder)


def _set_aside(folder: str) -> None:
    """A real folder where provision keeps a link (made by hand or by another tool): moved aside, never deleted, so that
    the link can be made and nothing in it is lost."""
    import datetime

    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    aside = f"{folder}.set-aside-{stamp}-{os.getpid()}"
    os.rename(folder, aside)
    log.info(f"{folder} was a folder, not provision's link: moved to {aside}")


def usable(build: str) -> bool:
    """Whether a build's venv is there to activate: its python exists."""
    return os.path.exists(os.path.join(build, "venv", "bin", "python"))


def activate(root: str, name: str) -> None:
    """Point HOME/active at `name` and add it to the history: state.json is staged beside the pointer, the pointer
    moved, then state.json renamed over; when that fails the pointer goes back. One folder sync makes both durable."""
    build = build_of(root, name)
    if os.path.exists(os.path.join(build, FAILED)):
        raise EnvError(
            f"{name!r} is a failed build kept for inspection (create --keep-failed); it is never activated",
            f"look into {build}, then provision remove {name} (or provision gc)",
        )
    if not usable(build):
        python = os.path.join(build, "venv", "bin", "python")
        raise EnvError(
            f"environment {name!r} has no python at {python} (its venv is gone)",
            f"rebuild it: provision create PROFILE --name {name} --replace, or provision remove {name}",
        )
    # a broken state.json stops here, before the active pointer moves
    history = states.read(root).activated(name)
    link = os.path.join(root, "active")
    before = os.readlink(link) if os.path.islink(link) else None
    # a full disk stops here too: written and synced beside it, not in place
    with writing(root, "write state.json"):
        staged = states.stage(root, history)
    moved = False
    try:
        point(root, link, f"envs/{name}", sync=False)
        moved = True
        with writing(root, "write state.json"):
            os.replace(staged, states.path(root))
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(staged)
        if moved and before is not None:  # the history could not be put in place: the pointer goes back too
            with contextlib.suppress(OSError, EnvError):
                point(root, link, before)
        raise
    fsync_dir(root)  # the pointer and state.json live in one folder: one sync makes both renames durable
