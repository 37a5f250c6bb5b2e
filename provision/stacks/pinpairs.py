"""The known pair behind a lock that cannot resolve, named in one line with what to do: a package whose exact pins
the rest of the profile contradicts (knowledge.toml [[pin]]: sglang-kernel 0.4.10 and torch 2.14.1, vLLM 0.34.0
beside SGLang 0.5.23), read from uv's explanation of why no solution exists."""

from __future__ import annotations

import re
from typing import Any

from provision import knowledge
from provision.errors import ResolveError

_SPEC = r"((?:==|>=|<=|~=|!=|<|>)[0-9][\w.+!*]*)"


def named(text: str) -> ResolveError | None:
    """The one-line error for uv's `text` when a [[pin]] row explains it, else None (uv's own explanation stands)."""
    found = [hit for row in knowledge.tables()["pin"] if (hit := _explains(row, text))]
    if not found:
        return None
    # "SGLang and vLLM" before a torch pin alone
    row, partner = max(found, key=lambda hit: "conflicts_with" in hit[0])
    return ResolveError(
        f"{row['package']} and {partner} cannot be resolved together: {row['why']}", str(row["fix"])
    )


def _explains(row: dict[str, Any], text: str) -> tuple[dict[str, Any], str] | None:
    """(row, what contradicts it) where uv's text names the row's package at a version the row covers (or at none:
    "all versions of sglang-kernel") and a requirement of the row that something else contradicts."""
    versions = [v.rstrip(".") for v in _mentions(row["package"], text) if v is not None]
    if _mentions(row["package"], text) == [] or (versions and not any(_covered(row, v) for v in versions)):
        return None
    partners = [name for name in row.get("conflicts_with", []) if _mentions(name, text)]
    if "conflicts_with" in row and not partners:
        return None
    for requirement in str(row["requires"]).split(", "):
        name, _, version = requirement.partition("==")
        others = sorted({f"{name}{spec.rstrip('.')}" for spec in _specs(name, text)} - {requirement})
        if requirement in text and (others or f"no version of {requirement}" in text):
            return row, partners[0] if partners else others[
                0
            ] if others else f"{name} (its index has no {version})"
    return None


def _mentions(name: str, text: str) -> list[str | None]:
    """Each place uv's text names the distribution `name` (not a longer name that starts with it), with the version
    it pins there (`==X`) or None."""
    pattern = rf"(?<![\w.-]){re.escape(name)}(?![\w-])(?:==([0-9][\w.+!]*))?"
    return [m.group(1) for m in re.finditer(pattern, text, flags=re.IGNORECASE)]


def _specs(name: str, text: str) -> list[str]:
    return re.findall(rf"(?<![\w.-]){re.escape(name)}{_SPEC}", text, flags=re.IGNORECASE)


def _covered(row: dict[str, Any], version: str) -> bool:
    return knowledge.pin_for(str(row["package"]), version) is not None
