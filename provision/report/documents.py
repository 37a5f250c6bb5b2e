"""Read a recorded `provision probe --json` document: every key it uses checked against the facts' own type hints,
so that a binary, truncated or wrong-typed file is one error naming the file and the key, never a traceback."""

from __future__ import annotations

import functools
import json
import re
import types
import typing
from pathlib import Path
from typing import Any

from provision import regular
from provision.errors import InputError
from provision.machine import facts as machine

HINT = "make one on that machine with: provision probe --json > machine.json"
MAX_BYTES = 64 * 2**20  # a probe document of a 64-GPU machine is well under 1 MB
MAX_STRING = 4096  # a path at most (PATH_MAX); a table folds a longer cell in time that grows with its square
# Values the gates compute with, not only print: their form is checked too (what probe writes).
FORMS = {
    (machine.Driver, "cuda"): (r"\d+\.\d+", "13.0"),
    (machine.Gpu, "compute_capability"): (r"\d+\.\d+", "9.0"),
    (machine.Toolkit, "version"): (r"\d+\.\d+", "13.0"),
}


def load_machine(path: Path) -> machine.MachineFacts:
    """Return the facts recorded in `path`; raise InputError (exit 2) naming the file for anything else."""
    data = _read(path)
    if not isinstance(data, dict) or "gpus" not in data or "driver" not in data:
        raise InputError(f"{path}: not a probe document (no driver/gpus keys)", HINT)
    problem = _problem(machine.MachineFacts, data, "")
    if problem:
        raise InputError(f"{path}: not a probe document ({problem})", HINT)
    return machine.MachineFacts.from_dict(data, source=str(path))


def _read(path: Path) -> Any:
    try:
        raw = regular.read_bytes(path, MAX_BYTES + 1)
    except OSError as exc:
        raise InputError(f"{path}: cannot be read ({exc.strerror or exc})", HINT) from exc
    if len(raw) > MAX_BYTES:
        raise InputError(f"{path}: not a probe document (larger than {MAX_BYTES // 2**20} MB)", HINT)
    try:
        return json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: not a probe document (not UTF-8 text: byte {exc.start})", HINT) from exc
    except (json.JSONDecodeError, RecursionError) as exc:
        raise InputError(f"{path}: not a probe document (not JSON: {str(exc)[:120]})", HINT) from exc


_HINTS: dict[type[Any], dict[str, Any]] = {}


def _hints(cls: type[Any]) -> dict[str, Any]:
    if cls not in _HINTS:
        names = set(cls._fields)
        _HINTS[cls] = {
            k: v for k, v in typing.get_type_hints(cls, vars(machine)).items() if k in names and k != "source"
        }
    return _HINTS[cls]


def _problem(cls: type[Any], data: object, where: str) -> str | None:
    """The first key of `data` whose value does not fit `cls`'s field types, said as `gpus[0].index: ...`."""
    if not isinstance(data, dict):
        return f"{where or 'the document'}: expected an object, got {_kind(data)}"
    required = [name for name in cls._fields if name not in cls._field_defaults]
    missing = [name for name in required if name not in data]
    if missing:
        return f"{where or 'the document'}: no {missing[0]!r} key"
    for name, hint in _hints(cls).items():
        if name in data:
            key = f"{where}.{name}" if where else name
            problem = _fits(hint, data[name], key) or _form(cls, name, data[name], key)
            if problem:
                return problem
    return None


def _form(cls: type[Any], name: str, value: object, where: str) -> str | None:
    form = FORMS.get((cls, name))
    if form is None or value is None or re.fullmatch(form[0], str(value)):
        return None
    return f"{where}: expected a version such as {form[1]}, got {_kind(value)}"


@functools.cache
def _shape(hint: Any) -> tuple[Any, tuple[Any, ...]]:
    return typing.get_origin(hint), typing.get_args(hint)


def _fits(hint: Any, value: object, where: str) -> str | None:
    # asked once per hint: a document of eight GPUs and their bridges asks thousands of times
    origin, args = _shape(hint)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        return _fits(next(a for a in args if a is not type(None)), value, where)
    if _is_record(hint):
        # a missing nested object reads as empty, as MachineFacts.from_dict does with `or {}`
        return None if value is None else _problem(typing.cast(type[Any], hint), value, where)
    if origin is tuple:
        if value is None:
            return None
        if not isinstance(value, list):
            return f"{where}: expected a list, got {_kind(value)}"
        for position, item in enumerate(value):
            problem = (
                _fits(args[0], item, f"{where}[{position}]")
                if item is not None
                else f"{where}[{position}]: expected {'an object' if _is_record(args[0]) else 'a string'}, got null"
            )
            if problem:
                return problem
        return None
    expected = {str: "a string", int: "an integer", bool: "true or false"}[hint]
    if isinstance(value, bool) != (hint is bool) or not isinstance(value, hint):
        return f"{where}: expected {expected}, got {_kind(value)}"
    if isinstance(value, str) and len(value) > MAX_STRING:
        return f"{where}: {len(value)} characters long, and probe writes none over {MAX_STRING}"
    return None


def _is_record(hint: Any) -> bool:
    """One of the facts' records (named tuples), not a plain tuple or a scalar."""
    return isinstance(hint, type) and issubclass(hint, tuple) and hasattr(hint, "_fields")


def _kind(value: object) -> str:
    if value is None:
        return "null"
    text = json.dumps(value)
    return f"{type(value).__name__.replace('dict', 'object').replace('str', 'string')} {text[:40]}"
