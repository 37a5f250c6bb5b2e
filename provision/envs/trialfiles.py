"""The files a trial (`provision try --file`) writes over an environment's venv, and putting them back. What a trial
will overwrite is recorded before it is written: the present content of each file is kept in the build folder
(SAVED/<sha256>) and listed in BUILD/.trial-made, and only then is the trial's file written. The trial puts them back
itself when it ends (Ctrl-C included); after a kill -9 the next command on the environment does (`Home.build_of`
calls `recover`), and so does `provision restore NAME`. A trial's file never becomes part of the known-good state:
nothing here touches env.json or the accepted files."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from provision import regular
from provision.atomic import write_atomic
from provision.envs import kept
from provision.errors import EnvError
from provision.stacks.profile_files import MAX_BYTES

MADE = ".trial-made"  # in the build folder: what a trial under way wrote, and where its content was before
LOCK = ".trial.lock"  # held by the trial under way: a leftover journal is one whose trial holds no lock
SAVED = "trial-saved"  # in the build folder: SAVED/<sha256>, a file's content before the trial wrote over it


@dataclass(frozen=True, kw_only=True)
class Written:
    """One file a trial writes: where (relative to site-packages), its content, and what was there before."""

    path: str
    content: bytes
    mode: int = 0o644


@contextlib.contextmanager
def held(build: Path, name: str) -> Iterator[None]:
    """Hold the build's trial lock for a trial: a second trial on the same environment is refused, and no other
    command takes this trial's files for leftovers meanwhile."""
    handle = os.fdopen(regular.open_fd(build / LOCK, os.O_RDWR | os.O_CREAT, follow=False), "r+")
    with handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            raise EnvError(
                f"a trial is under way on {name} (pid {handle.read().strip() or '?'})",
                "wait for it to finish, then run this again",
            ) from None
        handle.truncate(0)
        # who holds it, for one who waits: a full disk holds the lock all the same
        with contextlib.suppress(OSError):
            os.write(handle.fileno(), str(os.getpid()).encode())
        yield


def write(build: Path, venv: Path, site: Path, files: list[Written]) -> None:
    """Keep each target's present content, record them all in MADE, then write the trial's files. Where the copies
    or MADE cannot be written (a full disk, Ctrl-C), the copies made go again: nothing of the trial is in the venv
    yet, and nothing would ever read them."""
    entries = []
    try:
        for file in files:
            target = kept.location(venv, site, file.path)
            saved: str | None = None
            mode = file.mode
            if target.is_file() and not target.is_symlink():
                content, mode = kept.read_in_venv(venv, target, file.path)
                saved = kept.sha256(content)
                write_atomic(build / SAVED / saved, content, 0o600)
            entries.append({"path": file.path, "saved": saved, "mode": mode})
        write_atomic(build / MADE, json.dumps({"pid": os.getpid(), "files": entries}))
    except BaseException:
        # no MADE names them (a trial's leftovers were put back before this one began, under the lock it holds)
        shutil.rmtree(build / SAVED, ignore_errors=True)
        raise
    for file, entry in zip(files, entries, strict=True):  # with the permissions of the file it replaces
        kept.put(venv, site, file.path, file.content, int(entry["mode"] or file.mode))


def put_back(build: Path, venv: Path, site: Path) -> list[str]:
    """Write back what every file of MADE held before the trial (remove one that was not there), byte for byte; the
    paths put back. MADE and the saved copies go once all are back. A damaged entry (a mode that is no permission
    bits, a saved copy gone) is an EnvError naming MADE; a file to remove under a link out of the venv is refused,
    never deleted where the link leads."""
    from provision import confined

    damaged = EnvError(
        f"{build / MADE}: the record of a trial's files is damaged",
        f"remove it (rm {build / MADE}), then put the venv back: provision restore NAME",
    )
    try:
        data = json.loads(regular.read_bytes(build / MADE, 1 << 20, follow=False))
        entries = [e for e in data["files"] if isinstance(e, dict) and isinstance(e.get("path"), str)]
    except FileNotFoundError:
        return []
    except (OSError, ValueError, TypeError, KeyError, RecursionError):
        raise damaged from None
    for entry in entries:
        mode = entry.get("mode")
        if not (
            mode is None or (isinstance(mode, int) and not isinstance(mode, bool) and 0 <= mode <= 0o7777)
        ):
            raise damaged
    outside = confined.Confinement(venv)
    done = []
    for entry in entries:
        target = kept.location(venv, site, entry["path"])
        saved = entry.get("saved")
        if isinstance(saved, str):
            try:
                content = regular.read_bytes(build / SAVED / saved, MAX_BYTES + 1, follow=False)
            except OSError as exc:
                raise EnvError(
                    f"{build / SAVED / saved}: the saved copy of {entry['path']} cannot be read "
                    f"({exc.strerror or exc})",
                    "put the venv back from its lock: provision restore NAME",
                ) from None
            if kept.sha256(content) != saved:
                raise EnvError(
                    f"{build / SAVED / saved}: the saved copy of {entry['path']} was changed",
                    "put the venv back from its lock: provision restore NAME",
                )
            kept.put(venv, site, entry["path"], content, int(entry.get("mode") or 0o644))
        elif target.is_file() or target.is_symlink():
            escape = outside.folder(str(target.parent))
            if escape is not None:
                raise confined.refusal(escape, venv, f"removing the trial's {entry['path']}")
            target.unlink()
        done.append(entry["path"])
    (build / MADE).unlink(missing_ok=True)
    shutil.rmtree(build / SAVED, ignore_errors=True)
    return done


def leftover(build: Path) -> bool:
    """Whether a trial that is no longer running left its files in the venv."""
    if not os.path.lexists(build / MADE):
        return False
    try:
        handle = os.fdopen(regular.open_fd(build / LOCK, os.O_RDONLY, follow=False), "r")
    except OSError:
        return True
    with handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError:
            return False  # the trial is running: its files are its own
        fcntl.flock(handle, fcntl.LOCK_UN)
        return True


def under_way(build: Path) -> bool:
    """Whether a running trial has its files in the venv now (`accept` must not take them for known-good)."""
    return os.path.lexists(build / MADE) and not leftover(build)


def recover(build: Path) -> list[str]:
    """Put back what a trial killed mid-way left (nothing when none did, or the trial still runs); the paths."""
    if not leftover(build):
        return []
    from provision.envs import records
    from provision.envs.sites import site_packages
    from provision.log import info

    venv = records.read(build).venv_path(build).resolve()
    done = put_back(build, venv, site_packages(venv))
    if done:
        info(f"put back {len(done)} file(s) a trial left in {venv} when it was stopped: {', '.join(done)}")
    return done
