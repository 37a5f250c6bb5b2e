"""A lock made again starts its uv first. `provision lock` spends about 70 ms before uv runs (the interpreter, click,
packaging, the profile read and checked, the lock's key) and uv then resolves for about a second, most of it asking
the indexes whether their pages changed: the lock's whole overhead over a bare `uv pip compile`. So the `provision`
script, before it imports anything else, looks for what the same command line run in the same folder with the same
environment last did (`remember`, in wheelfacts' `ahead/`, keyed by a digest of the three): where the files it read
are as they were (their size, times and inode), it
starts that uv at once, in a work folder of lock's shape, with the same files and environment. When the command comes
to run uv, it `claim`s that process only if it is exactly what it would start itself: the same arguments, the same
environment, the same files in its work folder, byte for byte. Anything else (the profile changed, an index variable
set, a record damaged or planted) kills it and runs uv as always, so what is started ahead can make a lock sooner but
never another one. An ahead start nobody claims (an error before uv, Ctrl-C) is killed and its folder removed at exit;
a kill -9 takes it down too (it dies with provision) and the next lock removes its folder (lock._work_folder).

The environment is part of the key, never of the record's trust: a variable set since (a uv setting provision does not
honour, an index of another) is another key, so a uv started ahead never sees a variable this command line did not
vet before. A record holds no secret: a uv whose environment carries an index's or a git host's user name or password
is never remembered (its record is removed), nor one whose index URLs, command line or work files hold what provision
shows as **** (a password, a query token, a token-like path segment: log.redact); of the environment the record keeps
only what provision set (the index URLs, as a lock writes them) and the names it took out.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import subprocess

KIND = "ahead"  # wheelfacts' kind
WORK_PREFIX = "provision-lock-"  # lock's work folders: a killed one's is removed by the next lock
# the variables that carry credentials (uvtool.index_options, gitauth.variables): a uv given any is not remembered
_SECRET_SUFFIXES = ("_USERNAME", "_PASSWORD")
_SECRET_PREFIXES = ("PROVISION_GIT_", "GIT_CONFIG_")


class _Pending:
    """The uv started ahead: its process, its work folder, and exactly what it was started with."""

    __slots__ = ("argv", "child", "env", "files", "folder")

    def __init__(
        self,
        child: subprocess.Popen[str],
        folder: str,
        argv: list[str],
        env: dict[str, str],
        files: dict[str, bytes],
    ) -> None:
        self.child, self.folder, self.argv, self.env, self.files = child, folder, argv, env, files


_key: str | None = None  # this process's command line and folder, where it is a lock
_command: tuple[str, list[str]] = ("", [])  # that folder and command line
_pending: _Pending | None = None
_seen: Any = None  # the record read for this command line


def start(argv: Sequence[str]) -> None:
    """The `provision` script's first step: for a command line that may be a lock, start the uv its record names, where
    every file that record read is as it was. Never fails: a record that cannot be used is no record."""
    global _key, _command, _pending, _seen
    if "lock" not in argv:
        return
    import json
    import subprocess

    try:
        cwd = os.getcwd()
    except OSError:
        return
    _command = (cwd, list(argv))
    # the environment too: a uv started ahead gets no variable this command did not vet before (uvtool.environment)
    _key = _digest(json.dumps([cwd, list(argv), sorted(os.environ.items())]).encode())
    from provision import wheelfacts

    try:
        record = _seen = wheelfacts.get(KIND, _key)
        planned = _planned(record, cwd, list(argv))
        if planned is not None:
            _pending = _started(*planned)
    except (OSError, ValueError, TypeError, KeyError, AttributeError, subprocess.SubprocessError):
        _pending = None


def _digest(data: bytes) -> str:
    """The key of `data`: 64 hex digits (a wheelfacts key's shape) of BLAKE2b, by CPython's own (what hashlib gives as
    blake2b). hashlib loads OpenSSL first, 2-3 ms before any uv starts, which a lock made the first time spends once
    uv runs (lock.Preferences.same_key)."""
    try:
        from _blake2 import blake2b
    # a Python built without its own BLAKE2 (hashlib's blake2b is then OpenSSL's, which takes no digest_size)
    except ImportError:
        import hashlib

        return hashlib.sha256(data).hexdigest()
    return blake2b(data, digest_size=32).hexdigest()


def _planned(
    record: Any, cwd: str, argv: list[str]
) -> tuple[list[str], dict[str, str], dict[str, bytes]] | None:
    """The uv, environment and work files a record names, where it is whole and every file it read is unchanged."""
    if not isinstance(record, dict) or record.get("cwd") != cwd or record.get("argv") != argv:
        return None
    uv, changed, removed = record["uv"], record["set"], record["unset"]
    if not (isinstance(uv, list) and uv and all(isinstance(a, str) for a in uv) and os.path.isabs(uv[0])):
        return None
    if not isinstance(changed, dict) or not all(isinstance(v, str) for v in changed.values()):
        return None
    if not isinstance(removed, list) or not all(isinstance(n, str) for n in removed):
        return None
    inputs = record["inputs"]
    if not isinstance(inputs, dict) or any(_signature(path) != seen for path, seen in inputs.items()):
        return None
    files: dict[str, bytes] = {}
    for name, content in record["files"].items():
        if os.path.basename(name) != name or name in ("", ".", "..") or not isinstance(content, dict):
            return None
        if "text" in content:
            files[name] = content["text"].encode()
        else:
            files[name] = _read(content["input"])
            if _signature(content["input"]) != inputs[content["input"]]:
                return None
    env = {name: value for name, value in os.environ.items() if name not in removed} | changed
    return uv, env, files


def _started(argv: list[str], env: dict[str, str], files: dict[str, bytes]) -> _Pending:
    import atexit
    import tempfile

    from provision import proc

    folder = tempfile.mkdtemp(prefix=f"{WORK_PREFIX}{os.getpid()}-")
    try:
        for name, data in files.items():
            with open(os.path.join(folder, name), "xb") as handle:
                handle.write(data)
        pending = _Pending(proc.start(argv, env=env, cwd=folder), folder, argv, env, files)
    except BaseException:
        import shutil

        shutil.rmtree(folder, ignore_errors=True)
        raise
    atexit.register(_abandon)
    return pending


def claim(argv: Sequence[str], env: Mapping[str, str], cwd: str | os.PathLike[str]) -> _Pending | None:
    """The uv started ahead, where it is exactly argv with env on the files in `cwd` (a folder beside its own, so that
    a path relative to it means the same); else None, and that uv is killed. Asked once: what comes later starts its
    own."""
    global _pending
    pending, _pending = _pending, None
    if pending is None:
        return None
    from provision import log

    same = (
        os.path.dirname(os.path.abspath(cwd)) == os.path.dirname(pending.folder)
        and list(argv) == pending.argv
        and dict(env) == pending.env
        and _files(cwd) == pending.files
    )
    if not same:
        _end(pending)
        log.debug(
            "the uv started ahead is not the one this lock runs (what it was started with changed): ended"
        )
        return None
    log.debug(
        f"uv was started ahead, in {pending.folder}, by the record of this command line: its answer is taken"
    )
    return pending


def taken(pending: _Pending, cwd: str | os.PathLike[str]) -> None:
    """Once the uv claimed ended: what it wrote in its folder is moved into `cwd`, as if it had run there."""
    import shutil

    try:
        for name in os.listdir(pending.folder):
            shutil.move(os.path.join(pending.folder, name), os.path.join(cwd, name))
    finally:
        shutil.rmtree(pending.folder, ignore_errors=True)


def remember(
    argv: Sequence[str],
    env: Mapping[str, str],
    files: Mapping[str, bytes],
    *,
    inputs: Sequence[str | os.PathLike[str]],
    from_inputs: Mapping[str, str | os.PathLike[str]],
) -> None:
    """Keep the uv the same command line, run again in the same folder, will run (argv, env, its work `files`, and
    those that are the bytes of one of its `inputs` then: `from_inputs`), beside the signature of each file the command
    reads (`inputs`: the profile, the lock in place). Nothing is kept for a uv given credentials, nor where what the
    record would say holds a URL's secret, nor outside the `provision` script's lock; a record that says what is there
    already is not written again."""
    if _key is None:
        return
    from provision import log, wheelfacts

    changed = {name: value for name, value in env.items() if os.environ.get(name) != value}
    credentials = any(
        name.endswith(_SECRET_SUFFIXES) or name.startswith(_SECRET_PREFIXES) for name in changed
    )
    # what the record would say besides uv's variables: the command line may name an index uv is not given (--index
    # twice for one name, the first with its password), and the work files name git sources
    said = [*changed.values(), *_command[1], *(data.decode(errors="replace") for data in files.values())]
    # a URL with a password, a query token or a token in its path: what provision never writes
    if credentials or any(log.redact(text) != text for text in said):
        wheelfacts.discard(KIND, _key)
        return
    kept: dict[str, dict[str, str]] = {
        name: {"input": os.path.abspath(path)} for name, path in from_inputs.items()
    }
    for name, data in files.items():
        try:
            kept[name] = {"text": data.decode()}
        except UnicodeDecodeError:
            return
    record = {
        "cwd": _command[0],
        "argv": _command[1],
        "uv": list(argv),
        "set": changed,
        "unset": sorted(name for name in os.environ if name not in env),
        "inputs": {os.path.abspath(path): _signature(path) for path in inputs},
        "files": kept,
    }
    if record != _seen:
        wheelfacts.put(KIND, _key, record)


def _files(folder: str | os.PathLike[str]) -> dict[str, bytes]:
    found = {}
    with os.scandir(folder) as listing:
        for entry in listing:
            found[entry.name] = _read(entry.path)
    return found


def _read(path: str) -> bytes:
    from provision import regular

    return regular.read_bytes(path, 64 << 20, follow=False)


def _signature(path: str | os.PathLike[str]) -> list[int] | None:
    """What tells a file changed without reading it (regular.stamp_of; None: none). Of the file a link leads to: a
    profile kept as a link (into a dotfiles repository) is edited there, and the link's own times never change."""
    from provision import regular

    try:
        return regular.stamp_of(os.stat(path))
    except OSError:
        return None


def _end(pending: _Pending) -> None:
    import shutil

    from provision import proc

    if pending.child.poll() is None:
        pending.child.kill()
    proc.wait(pending.child, 30)
    for stream in (pending.child.stdout, pending.child.stderr):
        if stream is not None:
            stream.close()
    shutil.rmtree(pending.folder, ignore_errors=True)


def _abandon() -> None:
    """At exit: a uv started ahead that no lock claimed is killed, its folder removed."""
    global _pending
    pending, _pending = _pending, None
    if pending is not None:
        _end(pending)
