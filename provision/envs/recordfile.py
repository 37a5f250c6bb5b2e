"""One JSON record file of provision's own, read the one way: `load` (not JSON, a pipe, a link: a RecordError naming
the file), `Fields` (typed access: a key of the wrong type is a RecordError naming file and key), the schema version,
and `lock_file` for the lock files beside them. Shared by env.json (records.py) and state.json (state.py), and kept
free of their record classes so that `switch` and `rollback` load none of them."""

from __future__ import annotations

import json
import os
from typing import Any

from provision import regular
from provision.errors import EnvError

SCHEMA_VERSION = 1

JSONObject = dict[str, Any]


class RecordError(EnvError):
    """A record file that is not JSON, or has a key of the wrong type."""


def fix_hint(path: str | os.PathLike[str]) -> str:
    return f"fix or remove that key in {path} (written by hand, or by a newer provision?), or recreate the environment"


class Fields:
    """Typed access to one JSON object of a record file: every wrong type is a RecordError naming file and key."""

    def __init__(self, path: str | os.PathLike[str], data: object, where: str = "") -> None:
        if not isinstance(data, dict):
            raise RecordError(
                f"{path}: {where or 'the file'} is {type(data).__name__}, expected an object", fix_hint(path)
            )
        self.path, self.data, self.where = path, data, where

    def _get(self, key: str, types: tuple[type, ...], default: Any, what: str) -> Any:
        value = self.data.get(key)
        if value is None:
            return default
        if not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
            name = f"{self.where}.{key}" if self.where else key
            raise RecordError(
                f"{self.path}: key {name!r} is {type(value).__name__} {json.dumps(value)[:60]}, expected {what}",
                fix_hint(self.path),
            )
        return value

    def text(self, key: str) -> str | None:
        value: str | None = self._get(key, (str,), None, "a string")
        return value

    def flag(self, key: str) -> bool:
        return bool(self._get(key, (bool,), False, "true or false"))

    def number(self, key: str) -> float | None:
        value = self._get(key, (int, float), None, "a number")
        return None if value is None else float(value)

    def integer(self, key: str) -> int | None:
        value: int | None = self._get(key, (int,), None, "an integer")
        return value

    def mapping(self, key: str) -> JSONObject | None:
        value: JSONObject | None = self._get(key, (dict,), None, "an object")
        return value

    def strings(self, key: str) -> list[str]:
        values: list[Any] = self._get(key, (list,), [], "a list of strings")
        if not all(isinstance(v, str) for v in values):
            raise RecordError(
                f"{self.path}: key {key!r} holds a non-string, expected a list of strings",
                fix_hint(self.path),
            )
        return list(values)

    def objects(self, key: str) -> list[Fields]:
        values: list[Any] = self._get(key, (list,), [], "a list of objects")
        return [
            Fields(self.path, value, f"{self.where + '.' if self.where else ''}{key}[{i}]")
            for i, value in enumerate(values)
        ]

    def version(self) -> int:
        version = self.integer("schema_version") or 1
        if version > SCHEMA_VERSION:
            raise RecordError(
                f"{self.path}: schema_version {version} is newer than this provision reads ({SCHEMA_VERSION})",
                "upgrade provision: pip install -U cuda-provision",
            )
        return version


def load(path: str | os.PathLike[str]) -> object | None:
    """The JSON in `path`, None when there is no file; a file that is not JSON is a RecordError."""
    try:
        # a pipe would block every command; a link may lead anywhere
        text = regular.read_text(path, follow=False, errors="replace")
    except FileNotFoundError:
        return None
    except OSError as exc:
        if regular.refusal(exc):
            raise RecordError(
                f"{path}: not a file provision wrote (a link, a pipe or a device)",
                f"remove it (rm {path}) or put provision's own file back; nothing was changed",
            ) from None
        raise RecordError(f"{path}: cannot be read ({exc.strerror})", "check its permissions") from exc
    try:
        data: object = json.loads(text, parse_int=_integer)
    except json.JSONDecodeError as exc:
        raise RecordError(f"{path}: not JSON (line {exc.lineno}: {exc.msg})", fix_hint(path)) from exc
    except RecursionError:  # json's C scanner on nesting past the recursion limit: no record provision wrote
        raise RecordError(f"{path}: not JSON provision wrote (nested too deeply)", fix_hint(path)) from None
    except ValueError as exc:  # _integer's refusal
        raise RecordError(f"{path}: not JSON provision wrote ({exc})", fix_hint(path)) from None
    return data


def _integer(text: str) -> int:
    """A JSON integer of a record: no count, size or time provision writes has 20 digits; a longer one would overflow
    every float() and division after it (and past 4,300 digits int() itself refuses it)."""
    if len(text) > 20:
        raise ValueError(f"the integer {text[:12]}... of {len(text)} digits is out of range")
    return int(text)


def lock_file(path: str | os.PathLike[str]) -> int:
    """A descriptor of the lock file `path`, made if missing, never through a link (it would make or write a file
    wherever the link leads) nor waiting on a pipe: either is an EnvError naming it (exit 7)."""
    import errno

    try:
        return regular.open_fd(path, os.O_RDWR | os.O_CREAT, follow=False)
    except OSError as exc:
        if exc.errno not in (errno.ELOOP, errno.EINVAL):
            raise
        raise EnvError(
            f"{path} is not a file provision wrote (a link, a pipe or a device): it is never followed",
            f"remove it (rm {path}), then run the command again",
        ) from None
