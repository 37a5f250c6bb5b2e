"""Files of an environment's known-good state beside its lock (accepted ones, a profile's [files]): where a path a user
gives lies in the venv, the copy of each kept in the build folder by its sha256, and writing one back into a venv.
Nothing here reads or writes through a link that leads out of the venv, or waits on a pipe."""

from __future__ import annotations

import contextlib
import hashlib
import os
import stat
from collections.abc import Iterable, Iterator
from pathlib import Path

from provision import confined, regular
from provision.atomic import write_atomic
from provision.envs.records import KeptFile
from provision.errors import EnvError, InputError, UsageError
from provision.stacks.profile_files import (  # one bound for accepted and profile files
    MAX_BYTES,
    read_small,
    unreadable,
)

STORE = "accepted"  # in the build folder: STORE/<sha256>, the content of every accepted or profile file


def sha256(content: bytes) -> str:
    return hashlib.sha256(content).hexdigest()


def key_of(venv: Path, site: Path, given: str) -> str:
    """The path of `given` (absolute, or relative to site-packages) as drift names it: relative to site-packages,
    normalized; a path that leaves the venv is a UsageError."""
    inside = os.path.join(os.path.normpath(venv), "")
    target = os.path.normpath(given if os.path.isabs(given) else os.path.join(site, given))
    # named through a link to the venv ($HOME/envs/NAME/venv)
    if not target.startswith(inside) and "\0" not in given:
        target = os.path.join(os.path.realpath(os.path.dirname(target)), os.path.basename(target))
    if "\0" in given or not target.startswith(inside):
        raise UsageError(
            f"{given}: not a file in the environment's venv {venv}",
            "give a path relative to its site-packages, or an absolute path inside the venv",
        )
    return os.path.relpath(target, site)


def location(venv: Path, site: Path, key: str) -> Path:
    """Where the kept file `key` lives in the venv; a recorded path that would leave it is an EnvError (a damaged
    or planted env.json is never followed out)."""
    target = os.path.normpath(os.path.join(site, key))
    if os.path.isabs(key) or not target.startswith(os.path.join(os.path.normpath(venv), "")):
        raise EnvError(
            f"the kept file {key!r} lies outside the venv {venv}",
            "remove it from the environment's env.json (provision accept NAME --drop PATH), or recreate it",
        )
    return Path(target)


def read_in_venv(venv: Path, path: Path, shown: str) -> tuple[bytes, int]:
    """The content and permission bits of the regular file `path` in the venv; a link out of the venv on the way,
    a pipe, a folder or no file at all is an InputError naming `shown` (nothing is read through it): the path was
    given on the command line, and what it names turned out wrong when read."""
    escape = confined.Confinement(venv).path(str(path))
    if escape is not None:
        raise InputError(
            f"{shown}: {escape[0]} is a link to {escape[1]}, outside the environment {venv}",
            "only a file inside the venv can be accepted; replace the link with the file itself",
        )
    try:
        found = read_small(path)
    except OSError as exc:
        raise InputError(
            f"{shown} {unreadable(exc)}", "accept a regular file of the environment's venv"
        ) from exc
    if found is None:
        raise InputError(
            f"{shown}: larger than {MAX_BYTES >> 20} MiB", "accept patches and start-up files, not libraries"
        )
    return found


# What a kept file's mode may keep in a venv: never set-user-ID, set-group-ID or sticky bits, nor write bits for the
# group or others (pack.py strips the same from what it ships)
SAFE_BITS = 0o755


def keep(build: Path, content: bytes, mode: int) -> str:
    """Keep `content` in the build folder (once per content); return its sha256. A copy there that is no longer that
    content (changed, a link, a folder) is written anew: accepting the file again repairs it."""
    digest = sha256(content)
    escape = confined.Confinement(build).folder(str(build / STORE))
    if escape is not None:  # the copies are written there: never where a link leads
        raise confined.refusal(escape, build, "keeping an accepted file")
    copy = build / STORE / digest
    if _holds(copy, digest) is None:
        if copy.is_dir() and not copy.is_symlink():
            import shutil

            shutil.rmtree(copy)
        write_atomic(copy, content, mode & SAFE_BITS | 0o644)
    return digest


@contextlib.contextmanager
def kept_for(build: Path, contents: Iterable[tuple[bytes, int]]) -> Iterator[None]:
    """Keep each (content, mode) in the build folder for the block that lists them (env.json). Where keeping one
    fails, or the block does (a full disk, Ctrl-C), the copies made here go again, and STORE with them when it was
    made here: a failed accept leaves the build folder as it was, with no copy that nothing lists."""
    store = build / STORE
    store_made = not os.path.lexists(store)
    made: list[Path] = []
    try:
        for content, mode in contents:
            # a copy there already is another file's too, or mended here: never removed
            fresh = not os.path.lexists(store / sha256(content))
            digest = keep(build, content, mode)
            if fresh:
                made.append(store / digest)
        yield
    except BaseException:
        for copy in made:
            copy.unlink(missing_ok=True)
        if store_made:
            with contextlib.suppress(OSError):
                store.rmdir()
        raise


def _holds(copy: Path, digest: str) -> tuple[bytes, int] | None:
    """(content, permission bits) of the regular file `copy` (not through a link) when it is no larger than MAX_BYTES
    and its sha256 is `digest`; None otherwise. Its size is asked first: a 3 GiB (sparse) file is never read; the rest
    is read and hashed in blocks, no further than the bound. OSError when it cannot be opened."""
    try:
        with os.fdopen(regular.open_fd(copy, follow=False), "rb") as handle:
            status = os.fstat(handle.fileno())
            if status.st_size > MAX_BYTES:
                return None
            found, blocks, total = hashlib.sha256(), [], 0
            while (block := handle.read(1 << 20)) and total <= MAX_BYTES:
                found.update(block)
                blocks.append(block)
                total += len(block)
    except OSError:
        return None
    if total > MAX_BYTES or found.hexdigest() != digest:
        return None
    return b"".join(blocks), stat.S_IMODE(status.st_mode)


def same_file(path: Path, content: bytes) -> bool:
    """Whether the regular file at `path` (not through a link) holds exactly `content`: sizes compared before a byte
    is read, so a huge file there is not read."""
    held = _holds(path, sha256(content))
    return held is not None and held[0] == content


def kept_content(build: Path, kept: KeptFile) -> tuple[bytes, int]:
    """The kept copy of `kept` and its permission bits; an EnvError when it is gone or no longer that content."""
    copy = build / STORE / kept.sha256
    try:
        os.stat(copy, follow_symlinks=False)
        held = _holds(copy, kept.sha256)
    except OSError as exc:
        raise EnvError(
            f"{copy}: the kept copy of {kept.path} cannot be read ({exc.strerror})",
            "accept the file again (provision accept NAME PATH) or drop it (--drop PATH)",
        ) from exc
    if held is None:
        raise EnvError(
            f"{copy}: the kept copy of {kept.path} was changed since it was kept",
            "accept the file again (provision accept NAME PATH) or drop it (--drop PATH)",
        )
    return held


def put(venv: Path, site: Path, key: str, content: bytes, mode: int) -> None:
    """Write `content` at `key` in the venv whose site-packages is `site`, atomically, as a new file (a hard-linked
    copy's other links keep theirs); a link out of the venv on the way is refused."""
    target = location(venv, site, key)
    escape = confined.Confinement(venv).folder(str(target.parent))
    if escape is not None:
        raise confined.refusal(escape, venv, f"writing {key}")
    write_atomic(target, content, mode & SAFE_BITS)


def drop_unused(build: Path, kept: list[KeptFile]) -> None:
    """Remove the copies in the build folder that no kept file names any more."""
    used = {k.sha256 for k in kept}
    folder = build / STORE
    for copy in folder.iterdir() if folder.is_dir() and not folder.is_symlink() else []:
        if copy.name not in used and len(copy.name) == 64:
            copy.unlink(missing_ok=True)
