"""The files the PCI reading asks the kernel for (sysfs, /proc/cmdline): read live, recorded, or replayed.

Three questions, each answered by the kernel or by an OSError: the bytes of a file (`read`, at most `limit`), where a
link leads (`resolve`, `os.path.realpath` with strict=True) and what a folder holds (`listdir`). `Recorder` writes
every answer down, errors by their errno, so that `Replay` gives the same reading back: a path the recording lacks
answers as the kernel would for a file that is not there (ENOENT), never with something invented.
"""

from __future__ import annotations

import errno
import os
from typing import Any, Protocol

READ_LIMIT = 4096  # PCIe configuration space is 4 KB; every other file read here is a line


class Files(Protocol):
    def read(self, path: str, limit: int = READ_LIMIT) -> bytes: ...

    def resolve(self, path: str) -> str: ...

    def listdir(self, path: str) -> list[str]: ...


class Live:
    """This machine's own files."""

    def read(self, path: str, limit: int = READ_LIMIT) -> bytes:
        from provision import regular

        # a pipe planted where a file belongs is refused, not waited on
        return regular.read_bytes(path, limit)

    def resolve(self, path: str) -> str:
        return os.path.realpath(path, strict=True)

    def listdir(self, path: str) -> list[str]:
        return sorted(os.listdir(path))


class Recorder:
    """Answer from `files` and write every answer down, in the order asked."""

    def __init__(self, files: Files) -> None:
        self._files = files
        self.entries: list[dict[str, Any]] = []

    def _note(self, op: str, path: str, fn: Any) -> Any:
        entry: dict[str, Any] = {"op": op, "path": path}
        try:
            result = fn()
        except OSError as exc:
            entry["error"] = exc.errno or errno.EIO
            self.entries.append(entry)
            raise
        if isinstance(result, bytes):
            # configuration space is mostly zeros past its capabilities: the zeros at the end are counted, not spelt
            kept = result.rstrip(b"\0")
            entry.update(hex=kept.hex(), length=len(result))
        else:
            entry["result"] = result
        self.entries.append(entry)
        return result

    def read(self, path: str, limit: int = READ_LIMIT) -> bytes:
        return bytes(self._note("read", path, lambda: self._files.read(path, limit)))

    def resolve(self, path: str) -> str:
        return str(self._note("resolve", path, lambda: self._files.resolve(path)))

    def listdir(self, path: str) -> list[str]:
        return list(self._note("listdir", path, lambda: self._files.listdir(path)))


class RecordingError(ValueError):
    """The recording's `sysfs` list is not one this version reads."""


class Replay:
    """Answer from a recording's `sysfs` entries; anything not recorded is a file that is not there."""

    def __init__(self, entries: object) -> None:
        if entries is None:
            entries = []
        if not isinstance(entries, list):
            raise RecordingError("'sysfs' is not a list")
        self._answers: dict[tuple[str, str], dict[str, Any]] = {}
        for number, entry in enumerate(entries):
            if not (
                isinstance(entry, dict)
                and entry.get("op") in ("read", "resolve", "listdir")
                and isinstance(entry.get("path"), str)
                and _answer_ok(entry)
            ):
                raise RecordingError(
                    f"sysfs[{number}] is not {{op: read|resolve|listdir, path, and its answer or an errno}}"
                )
            self._answers.setdefault((entry["op"], entry["path"]), entry)

    def _answer(self, op: str, path: str) -> dict[str, Any]:
        entry = self._answers.get((op, path))
        if entry is None:
            raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), path)
        if "error" in entry:
            code = int(entry["error"])
            raise OSError(code, os.strerror(code), path)
        return entry

    def read(self, path: str, limit: int = READ_LIMIT) -> bytes:
        entry = self._answer("read", path)
        data = bytes.fromhex(entry["hex"])
        return (data + b"\0" * (int(entry["length"]) - len(data)))[:limit]

    def resolve(self, path: str) -> str:
        return str(self._answer("resolve", path)["result"])

    def listdir(self, path: str) -> list[str]:
        return [str(name) for name in self._answer("listdir", path)["result"]]


def _answer_ok(entry: dict[str, Any]) -> bool:
    if "error" in entry:
        return isinstance(entry["error"], int) and not isinstance(entry["error"], bool)
    if entry["op"] == "read":
        text, length = entry.get("hex"), entry.get("length")
        if not (isinstance(text, str) and isinstance(length, int) and 0 <= length <= READ_LIMIT):
            return False
        try:
            return len(bytes.fromhex(text)) <= length
        except ValueError:
            return False
    if entry["op"] == "resolve":
        return isinstance(entry.get("result"), str)
    return isinstance(entry.get("result"), list) and all(isinstance(n, str) for n in entry["result"])
