"""The pyproject.toml `provision lock` hands uv, written as text: tomlkit (its imports are slow) is then not loaded
before uv starts. The document has one shape: [project] of strings and a list of strings, [tool.uv.sources] of inline
tables of strings and booleans, [[tool.uv.index]] tables; every key and string is written as a TOML basic string."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any


def dumps(doc: Mapping[str, Any]) -> str:
    """`doc` ({"project": ..., "tool": {"uv": {"sources": ..., "index": [...], "workspace": {...}}}}) as TOML that
    reads back equal."""
    lines = ["[project]", *(f"{_key(k)} = {_value(v)}" for k, v in doc["project"].items())]
    uv = doc.get("tool", {}).get("uv", {})
    if uv.get("sources"):
        lines += [
            "",
            "[tool.uv.sources]",
            *(f"{_key(name)} = {_value(source)}" for name, source in uv["sources"].items()),
        ]
    for index in uv.get("index", []):
        lines += ["", "[[tool.uv.index]]", *(f"{_key(k)} = {_value(v)}" for k, v in index.items())]
    if "workspace" in uv:
        lines += [
            "",
            "[tool.uv.workspace]",
            *(f"{_key(k)} = {_value(v)}" for k, v in uv["workspace"].items()),
        ]
    return "\n".join(lines) + "\n"


def _key(text: str) -> str:
    return _string(text)


def _string(text: str) -> str:
    # JSON's escapes (\" \\ \b \f \n \r \t \uXXXX) are TOML's; DEL must be escaped in TOML and is not in JSON
    return json.dumps(text, ensure_ascii=False).replace("\x7f", "\\u007f")


def _value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return _string(value)
    if isinstance(value, list):
        return "[" + ", ".join(_value(item) for item in value) + "]"
    if isinstance(value, Mapping):
        return "{ " + ", ".join(f"{_key(k)} = {_value(v)}" for k, v in value.items()) + " }"
    raise TypeError(f"uvproject: {type(value).__name__} is not written")
