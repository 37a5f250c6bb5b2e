"""What a wheel's bytes determine, kept by the wheel's sha256 under `$XDG_CACHE_HOME/provision/`: `scans/` (the SMs
and PTX of each CUDA member), `records/` (the rows of its RECORD), `metadata/` (its METADATA's header
fields, Requires-Dist among them: `profiles new`); `urls/`, keyed by the sha256 of a wheel's URL, holds the sha256 of
the wheel last read from it (what `lock` needs to know before uv has said which file a URL serves); `verdicts/`, keyed
by the sha256 of a set of wheels (their sha256s, URLs and the rules' own source), what lock's conflict gate found in
their RECORDs, so a lock made again with the same wheels reads none of them; `locks/`, keyed by the sha256 of a lock's
packages as provision writes them (uv's text with each package's index put in), that this text parses back as exactly
those packages, so a lock made again that comes out the same is told by comparing text (stacks/locktext); `ahead/`,
keyed by a digest of a `provision lock` command line, its folder and environment, how that lock ran uv last time, so
that made again it starts uv before anything else (stacks/ahead). A wheel named by its sha256 never changes, so what
was read of it once is read from here after: `report --lock`, `lock`'s gates, `adopt` and `scan` of a wheel ask here
first.

An entry is one JSON file named by the sha256 holding its kind, its key and this format's VERSION beside the data;
one that is not exactly that (truncated, damaged, another kind's or another key's, a link, a folder, a pipe, past its
kind's bound) is removed and computed again, never trusted. Entries are written atomically (a temp file renamed in the
kind's folder, held open: nothing is written through a link), and each kind is bounded: past LIMITS bytes the entries
used least recently go (a read touches its entry). Paths are handled with os.path: `scan` of a wheel loads no pathlib.
"""

from __future__ import annotations

import atexit
import contextlib
import errno
import json
import os
import re
import stat
import threading
import time
from typing import Any

from provision import atomic, regular

VERSION = 1
KINDS = ("scans", "records", "metadata", "urls", "verdicts", "locks", "ahead")
# the most each kind's folder holds
LIMITS = {
    "scans": 64 << 20,
    "records": 512 << 20,
    "metadata": 64 << 20,
    "urls": 16 << 20,
    "verdicts": 16 << 20,
    "locks": 4 << 20,
    "ahead": 4 << 20,
}
# one entry: a RECORD may be 64 MiB of CSV
ENTRY_MAX = {
    "scans": 8 << 20,
    "records": 160 << 20,
    "metadata": 8 << 20,
    "urls": 4096,
    "verdicts": 1 << 20,
    "locks": 4096,
    "ahead": 1 << 20,
}
SHA256 = re.compile(r"[0-9a-f]{64}")
# atomic.write_atomic_at's names for an entry being written
TEMP = re.compile(r"\.[0-9a-f]{64}\.\d+\.\d+\.tmp")
TEMP_AGE = 3600.0  # a temp file older than this was left by a writer that was killed
FUTURE_SLACK = 86400.0  # a clock set back by NTP or a time zone's hour: a time this far ahead is still taken


def age(now: float, when: float) -> float:
    """Seconds from `when` (a file's time) to `now`; infinite for a time more than a day ahead of the clock, which was
    no use that happened (a clock wrong when it was written, corrected since, or a time set by hand): such an entry
    was kept by every prune until the clock caught up, years later."""
    return now - when if when - now <= FUTURE_SLACK else float("inf")


# kind -> bytes its folder holds, counted at this process's first write of that kind
_held: dict[str, int] = {}
_lock = threading.Lock()


def root() -> str:
    """provision's cache folder: `$XDG_CACHE_HOME/provision`, else `~/.cache/provision`."""
    return os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "provision"
    )


def folder(kind: str) -> str:
    return os.path.join(root(), kind)


def get(kind: str, key: str) -> Any:
    """The data kept for the wheel of sha256 `key`, None when there is none that checks (a bad one is removed)."""
    if kind not in LIMITS or not SHA256.fullmatch(key):
        return None
    held = open_folder(kind, create=False)
    if held is None:
        return None
    try:
        try:
            fd = os.open(key, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=held)
        except FileNotFoundError:
            return None
        except OSError:  # ELOOP: a link where an entry belongs
            _discard(held, kind, key)
            return None
        raw = b""
        # a folder, a pipe, another user's: no entry
        if stat.S_ISREG(os.fstat(fd).st_mode) and _trusted(fd, key):
            with os.fdopen(fd, "rb") as handle:
                raw = handle.read(ENTRY_MAX[kind] + 1)
        else:
            os.close(fd)
        entry = _parsed(raw, kind, key)
        if entry is None:
            _discard(held, kind, key)
            return None
        with contextlib.suppress(OSError):
            # used now: the last to go when the kind is bounded
            os.utime(key, dir_fd=held, follow_symlinks=False)
        return entry
    finally:
        os.close(held)


def has(kind: str, keys: list[str]) -> bool:
    """Whether an entry of this kind lies there for every key (a regular file, not read: `get` checks it when it is
    read), each touched as `get` touches what it reads."""
    held = open_folder(kind, create=False) if kind in LIMITS else None
    if held is None:
        return not keys
    try:
        for key in keys:
            if not SHA256.fullmatch(key):
                return False
            try:
                if not stat.S_ISREG(os.stat(key, dir_fd=held, follow_symlinks=False).st_mode):
                    return False
                os.utime(key, dir_fd=held, follow_symlinks=False)
            except OSError:
                return False
        return True
    finally:
        os.close(held)


def _parsed(raw: bytes, kind: str, key: str) -> Any:
    if not raw or len(raw) > ENTRY_MAX[kind]:
        return None
    try:
        entry = json.loads(raw)
    except (ValueError, RecursionError):  # RecursionError: nested past the limit
        return None
    if (
        not isinstance(entry, dict)
        or entry.get("kind") != kind
        or entry.get("key") != key
        or entry.get("version") != VERSION
    ):
        return None
    return entry.get("data")


class Encoded:
    """An entry of `kind` encoded before its key is known (a RECORD read while uv resolves, its sha256 said after):
    its JSON up to the key's value, and from the quote that closes it. `put` puts the key between. (A plain class:
    `probe` loads this module for its cache folder, and no dataclasses.)"""

    __slots__ = ("head", "kind", "tail")

    def __init__(self, kind: str, head: bytes, tail: bytes) -> None:
        self.kind, self.head, self.tail = kind, head, tail


def encoded(kind: str, data: Any) -> Encoded:
    """`data` as the entry `put` writes, its key left out."""
    text = json.dumps(
        {"kind": kind, "key": "", "version": VERSION, "data": data}, separators=(",", ":")
    ).encode()
    head, _, tail = text.partition(b'"key":""')  # the first: "kind" before it is one of KINDS
    return Encoded(kind, head + b'"key":"', b'"' + tail)


def put(kind: str, key: str, data: Any, *, at: str | None = None) -> None:
    """Keep `data` (or an entry `encoded` before) for the wheel of sha256 `key` (in the cache folder `at`, root()
    unless given); a cache that cannot be written is no error (it is computed again)."""
    _put_all(kind, [(key, data)], at)


def _put_all(kind: str, entries: list[tuple[str, Any]], at: str | None) -> None:
    """`put` of each (key, data), the kind's folder opened once for all of them."""
    texts = [(key, text) for key, data in entries if (text := _text(kind, key, data)) is not None]
    if not texts:
        return
    try:
        held = open_folder(kind, create=True, at=at)
    except OSError:
        return
    if held is None:
        return
    try:
        for key, text in texts:
            with contextlib.suppress(OSError):
                try:
                    # checked on every read: a torn one is recomputed
                    atomic.write_atomic_at(held, key, text, sync=False)
                except OSError as exc:
                    if exc.errno not in (errno.EISDIR, errno.ENOTEMPTY, errno.EEXIST):
                        raise
                    _discard(held, kind, key)  # a folder where the entry belongs: rename cannot replace it
                    atomic.write_atomic_at(held, key, text, sync=False)
                _bound(held, kind, len(text))
    finally:
        os.close(held)


def _text(kind: str, key: str, data: Any) -> bytes | None:
    """The entry's bytes; None for a kind or key that is none, or an entry past its kind's bound."""
    if kind not in LIMITS or not SHA256.fullmatch(key):
        return None
    if isinstance(data, Encoded):
        if data.kind != kind:
            return None
        text = data.head + key.encode() + data.tail
    else:
        text = json.dumps(
            {"kind": kind, "key": key, "version": VERSION, "data": data}, separators=(",", ":")
        ).encode()
    return text if len(text) <= ENTRY_MAX[kind] else None


_later: list[tuple[str, str, str, Any]] = []  # what put_later was given: (cache folder, kind, key, data)
_later_guard = threading.Lock()


def put_later(kind: str, key: str, data: Any) -> None:
    """`put`, when `settle` comes: a lock's 207 RECORDs are 414 entries, written at its end in one go rather than
    one by one among the reads and the judging (writer threads beside them, each file's syscalls waiting for the
    interpreter, took longer than the judging itself). A process that ends settles first."""
    with _later_guard:
        _later.append((root(), kind, key, data))  # the cache folder as it is now: the environment may change


def settle() -> None:
    """Write every entry given to put_later (in this thread; one that cannot be written is computed again later)."""
    while True:
        with _later_guard:
            given = list(_later)
            _later.clear()
        if not given:
            return
        batches: dict[tuple[str, str], list[tuple[str, Any]]] = {}
        for at, kind, key, data in given:
            batches.setdefault((at, kind), []).append((key, data))
        for (at, kind), entries in batches.items():  # each kind's folder opened once
            with contextlib.suppress(Exception):  # a cache that cannot be written is no error
                _put_all(kind, entries, at)


atexit.register(settle)


def discard(kind: str, key: str) -> None:
    """Remove an entry its reader found of the wrong shape."""
    held = open_folder(kind, create=False) if kind in LIMITS and SHA256.fullmatch(key) else None
    if held is not None:
        try:
            _discard(held, kind, key)
        finally:
            os.close(held)


def open_folder(kind: str, *, create: bool, at: str | None = None) -> int | None:
    """A descriptor of the kind's folder, opened without following a link; a link or a file there is removed (and,
    with `create`, a folder made in its place). None where there is none, or where the cache's folder or the kind's is
    another user's or writable by others (`untrusted`): nothing there is read or written."""
    base = _open_root(create=create, at=at)
    if base is None:
        return None
    try:
        for _ in range(3):
            try:
                held = os.open(kind, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=base)
            except FileNotFoundError:
                if not create:
                    return None
            except OSError as exc:
                if exc.errno not in (errno.ELOOP, errno.ENOTDIR):
                    raise
                with contextlib.suppress(FileNotFoundError):
                    # a link or a file named like the folder: never followed, never written through
                    os.unlink(kind, dir_fd=base)
                if not create:
                    return None
            else:
                if _trusted(held, os.path.join(at or root(), kind)):
                    return held
                os.close(held)
                return None
            with contextlib.suppress(FileExistsError):  # a concurrent writer made it
                os.mkdir(kind, 0o700, dir_fd=base)
        return None
    finally:
        os.close(base)


def _open_root(*, create: bool, at: str | None = None) -> int | None:
    """A descriptor of provision's cache folder (`at`, else root(); it may be a link: a bigger disk is the user's), None
    where there is none or it is not trusted."""
    path = at or root()
    try:
        base = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    except FileNotFoundError:
        if not create:
            return None
        os.makedirs(path, mode=0o700, exist_ok=True)
        base = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    # a file where the folder belongs (or above it): no cache, said once; every lock failed on it, exit 3
    except NotADirectoryError:
        _unused(path, "not a folder", "remove it or set XDG_CACHE_HOME to a folder of your own")
        return None
    if _trusted(base, path):
        return base
    os.close(base)
    return None


_warned: set[str] = set()  # the untrusted folders already said in this process


def _trusted(fd: int, path: str) -> bool:
    """Whether the folder or entry open at `fd` is this user's alone; a folder that is not is said once, on stderr."""
    why = regular.foreign(os.fstat(fd))
    if why is None:
        return True
    if stat.S_ISDIR(os.fstat(fd).st_mode):
        _unused(path, why, "make it yours alone (chown, chmod go-w) or remove it")
    return False


def _unused(path: str, why: str, what_to_do: str) -> None:
    """Say once, on stderr, that the cache folder at `path` is not used, why, and what to do."""
    if path in _warned:
        return
    _warned.add(path)
    from provision import log

    log.say(
        f"warning: {path} is {why}: provision's cache there is neither read nor written (what it would answer is "
        f"computed again); {what_to_do}\n"
    )


def _discard(held: int, kind: str, name: str) -> None:
    try:
        os.unlink(name, dir_fd=held)
    except FileNotFoundError:
        pass
    except OSError as exc:
        if exc.errno not in (errno.EISDIR, errno.EPERM):
            raise
        import shutil  # a folder where an entry belongs (rare): removed whole, links inside it never followed

        shutil.rmtree(os.path.join(folder(kind), name), ignore_errors=True)


def _bound(held: int, kind: str, added: int) -> None:
    """Keep the kind's folder under LIMITS: counted once per process, then by what this process adds."""
    with _lock:
        if kind not in _held:
            _held[kind] = sum(size for _, _, size in _entries(held))
        else:
            _held[kind] += added
        if _held[kind] <= LIMITS[kind]:
            return
        total, now = _held[kind], time.time()
        # the least recently used first; one dated more than a day ahead of the clock counts as the oldest (as gc
        # counts it: `age`), else it outlived every entry used since, until the clock caught up
        for _, name, size in sorted(_entries(held), key=lambda entry: (-age(now, entry[0]), entry[1])):
            if total <= LIMITS[kind] * 3 // 4:
                break
            _discard(held, kind, name)
            total -= size
        _held[kind] = total


def _entries(held: int) -> list[tuple[float, str, int]]:
    """(mtime, name, size) of every regular file in the folder."""
    found = []
    with os.scandir(held) as listing:
        for entry in listing:
            try:
                status = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if stat.S_ISREG(status.st_mode):
                found.append((status.st_mtime, entry.name, status.st_size))
    return found


def usage(kind: str) -> tuple[int, int]:
    """(entries, bytes) the kind's folder holds."""
    held = open_folder(kind, create=False)
    if held is None:
        return 0, 0
    try:
        found = _entries(held)
    finally:
        os.close(held)
    return len(found), sum(size for _, _, size in found)


def prune(kind: str, *, older_than: float | None, everything: bool = False) -> tuple[int, int]:
    """Remove the kind's entries not used for `older_than` seconds (all with `everything`), what is no entry (a link,
    a folder, a foreign name) and temp files killed writers left: (count, bytes) removed."""
    held = open_folder(kind, create=False)
    if held is None:
        return 0, 0
    now, count, size = time.time(), 0, 0
    try:
        with os.scandir(held) as listing:
            names = [(entry.name, entry.stat(follow_symlinks=False)) for entry in listing]
        for name, status in names:
            old = age(now, status.st_mtime)
            regular = stat.S_ISREG(status.st_mode)
            if TEMP.fullmatch(name):
                stale = old > TEMP_AGE
            elif regular and SHA256.fullmatch(name):
                stale = everything or (older_than is not None and old > older_than)
            else:
                stale = True
            if stale:
                try:
                    _discard(held, kind, name)
                except OSError:  # a read-only cache: it stays, and is not said to be removed
                    continue
                count, size = count + 1, size + (status.st_size if regular else 0)
    finally:
        os.close(held)
    with _lock:
        _held.pop(kind, None)
    return count, size
