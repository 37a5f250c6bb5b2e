"""Typed reading of JSON objects, shared by every record of records/ (results and details read through it): a key of
the wrong type is a MalformedResult naming it."""

from __future__ import annotations

from typing import Any, Literal, TypeAlias

from provision import status as statuses
from provision.status import Status

JSONObject = dict[str, Any]
JSONValue: TypeAlias = (
    "None | bool | int | float | str | list[JSONValue] | dict[str, JSONValue]"  # JSON as read
)
Better = Literal["higher", "lower"]


class MalformedResult(ValueError):
    """A payload's answer or a stored record with a key missing or of the wrong type; the message names the key."""


class Reader:
    """Typed access to one JSON object: a key of the wrong type is a MalformedResult naming it (`where.key`)."""

    def __init__(self, data: object, where: str = "") -> None:
        if not isinstance(data, dict):
            raise MalformedResult(f"{where or 'the answer'} is {type(data).__name__}, expected an object")
        self.data: dict[str, JSONValue] = data
        self.where = where

    def name(self, key: str) -> str:
        return f"{self.where}.{key}" if self.where else key

    def _get(self, key: str, types: tuple[type, ...], what: str, required: bool) -> JSONValue:
        """The key's value, None when absent or null; one of another type than `types` is a MalformedResult."""
        value = self.data.get(key)
        if value is None:
            if required:
                raise MalformedResult(f"key {self.name(key)!r} is missing, expected {what}")
            return None
        if not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
            import json

            shown = json.dumps(value, default=str)[:60]
            raise MalformedResult(
                f"key {self.name(key)!r} is {type(value).__name__} {shown}, expected {what}"
            )
        return value

    def text(self, key: str, *, required: bool = False) -> str | None:
        value = self._get(key, (str,), "a string", required)
        return value if isinstance(value, str) else None

    def number(self, key: str, *, required: bool = False) -> float | None:
        value = self._get(key, (int, float), "a number", required)
        return float(value) if isinstance(value, (int, float)) else None

    def integer(self, key: str, *, required: bool = False) -> int | None:
        value = self._get(key, (int,), "an integer", required)
        return value if isinstance(value, int) else None

    def flag(self, key: str) -> bool | None:
        value = self._get(key, (bool,), "true or false", False)
        return value if isinstance(value, bool) else None

    def mapping(self, key: str) -> dict[str, JSONValue] | None:
        value = self._get(key, (dict,), "an object", False)
        return value if isinstance(value, dict) else None

    def numbers(self, key: str) -> dict[str, float] | None:
        """An object of numbers (a pattern's figures); None when absent."""
        found = self.mapping(key)
        if found is None:
            return None
        figures = {
            k: float(v) for k, v in found.items() if isinstance(v, (int, float)) and not isinstance(v, bool)
        }
        if len(figures) != len(found):
            raise MalformedResult(f"key {self.name(key)!r} holds a value that is not a number")
        return figures

    def integers(self, key: str) -> dict[str, int] | None:
        """An object of integers (counts); None when absent."""
        found = self.mapping(key)
        if found is None:
            return None
        counts = {k: v for k, v in found.items() if isinstance(v, int) and not isinstance(v, bool)}
        if len(counts) != len(found):
            raise MalformedResult(f"key {self.name(key)!r} holds a value that is not an integer")
        return counts

    def strings(self, key: str) -> list[str] | None:
        values = self._get(key, (list,), "a list of strings", False)
        if not isinstance(values, list):
            return None
        texts = [v for v in values if isinstance(v, str)]
        if len(texts) != len(values):
            raise MalformedResult(f"key {self.name(key)!r} holds a value that is not a string")
        return texts

    def text_mapping(self, key: str) -> dict[str, str] | None:
        found = self.mapping(key)
        if found is None:
            return None
        texts = {k: v for k, v in found.items() if isinstance(v, str)}
        if len(texts) != len(found):
            raise MalformedResult(f"key {self.name(key)!r} holds a value that is not a string")
        return texts

    def objects(self, key: str) -> list[Reader]:
        values = self._get(key, (list,), "a list of objects", False)
        return [
            Reader(value, f"{self.name(key)}[{i}]")
            for i, value in enumerate(values if isinstance(values, list) else [])
        ]

    def status(self, key: str = "status", allowed: frozenset[Status] = statuses.CHECK_STATUSES) -> Status:
        value = self.text(key, required=True)
        if not statuses.known(value) or value not in allowed:
            raise MalformedResult(
                f"key {self.name(key)!r} is {value!r}, expected one of {', '.join(sorted(allowed))}"
            )
        return value

    def rest(self, known: set[str]) -> dict[str, JSONValue]:
        """The keys this version does not know, kept as they were."""
        return {k: v for k, v in self.data.items() if k not in known}

    def absent(self, keys: tuple[str, ...]) -> frozenset[str]:
        """Which of `keys` the object lacks: a record read from an older file is written back without them."""
        return frozenset(k for k in keys if k not in self.data)


def written(document: JSONObject, absent: frozenset[str]) -> JSONObject:
    return {k: v for k, v in document.items() if k not in absent} if absent else document


DRIFT_KINDS = ("modified", "missing", "shared", "unowned", "extra", "other-version", "other-source")


def drift_counts(fields: Reader, key: str = "counts") -> dict[str, int] | None:
    """A drift `counts` object in DRIFT_KINDS' order (env.json keeps its keys sorted), a kind this version does not
    know after them; None when absent."""
    counts = fields.integers(key)
    return None if counts is None else {**{k: counts[k] for k in DRIFT_KINDS if k in counts}, **counts}
