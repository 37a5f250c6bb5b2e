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
import dataclasses
import errno
import fcntl
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from provision import log
from provision.atomic import fsync_dir
from provision.atomic import (
    write_atomic as write_atomic,  # re-exported: where callers have always found them
)
from provision.atomic import write_json as write_json
from provision.envs import records
from provision.errors import EnvError

HOME_VARIABLE = "PROVISION_HOME"
BUILDING = ".building"


def resolve(home: Path | None = None) -> Path:
    """--home, else PROVISION_HOME, else $XDG_DATA_HOME/provision (~/.local/share/provision)."""
    if home is None and os.environ.get(HOME_VARIABLE):
        home = Path(os.environ[HOME_VARIABLE])
    if home is None:
        data = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
        home = Path(data) / "provision"
    return home.expanduser().absolute()


@dataclass(frozen=True)
class Home:
    root: Path

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
        for folder in (self.builds, self.envs, self.locks):
            folder.mkdir(parents=True, exist_ok=True)

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """Hold HOME's lock: a second process waits (and says so) rather than interleaving changes."""
        self.ensure()
        with open(self.root / ".lock", "a+") as handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as exc:
                if exc.errno not in (errno.EAGAIN, errno.EACCES):
                    raise
                handle.seek(0)
                log.info(f"waiting for another provision process working on {self.root} (pid {handle.read().strip() or '?'})")
                fcntl.flock(handle, fcntl.LOCK_EX)
            handle.seek(0)
            handle.truncate()
            handle.write(str(os.getpid()))
            handle.flush()
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    # --- names and the active pointer -------------------------------------------------------------

    def names(self) -> list[str]:
        if not self.envs.is_dir():
            return []
        return sorted(p.name for p in self.envs.iterdir() if p.is_symlink() and not p.name.startswith("."))

    def build_of(self, name: str) -> Path:
        link = self.envs / name
        if not link.is_symlink():
            known = ", ".join(self.names()) or "none yet"
            raise EnvError(f"no environment named {name!r} in {self.root}", f"known: {known}; make one with provision create PROFILE")
        return (self.envs / os.readlink(link)).resolve()

    def named_or_active(self, name: str | None, command: str) -> tuple[str, Path]:
        """(name, its build) for `name`, else for the active environment; `command` is what to run with a name."""
        name = name or self.active()
        if name is None:
            raise EnvError("no environment is active", f"name one: {command} NAME")
        return name, self.build_of(name)

    def active(self) -> str | None:
        try:
            return Path(os.readlink(self.active_link)).name
        except OSError:
            return None

    def point(self, link: Path, target: str) -> None:
        """Make `link` point at `target` in one atomic rename: a reader sees the old or the new, never neither."""
        temp = link.with_name(f".{link.name}.{os.getpid()}.{time.monotonic_ns()}.tmp")
        os.symlink(target, temp)
        try:
            os.replace(temp, link)
        except BaseException:
            temp.unlink(missing_ok=True)
            raise
        fsync_dir(link.parent)

    def activate(self, name: str) -> None:
        self.build_of(name)  # must exist
        state = self.state()  # a broken state.json stops here, before the active pointer moves
        self.point(self.active_link, f"envs/{name}")
        records.write_state(self.root, dataclasses.replace(state, history=[*state.history, name][-100:]))

    def state(self) -> records.State:
        return records.read_state(self.root)


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_tree(path: Path) -> None:
    """Remove a build folder; an adopted venv behind a link is never followed."""
    if path.is_symlink():
        path.unlink()
    elif path.exists():
        import shutil

        shutil.rmtree(path, ignore_errors=True)
