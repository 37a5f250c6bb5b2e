"""A lock's text as provision writes it: a header line, uv's own output with provision's keys put in (each package's
`index`, `created-by`: `packages_text`), then the [tool.provision] table. tomlkit takes seconds to write two hundred
packages anew, so uv's text is edited where that reads back as exactly what provision means (checked by parsing it,
once: the proof is kept in `locks/` by the text's sha256), else the whole document is written by tomlkit.

A lock made again whose uv output and stamp are those of the lock in place leaves that lock as it is, byte for byte
(`unchanged`): proven by comparing text, not by parsing and writing it again."""

from __future__ import annotations

import json
import re
from typing import Any

from provision import __version__, toml, wheelfacts

CREATED_BY = "provision (uv pip compile)"
_BLOCK = "\n[[packages]]\n"
_CREATED_BY_LINE = re.compile(r"^created-by = .*$", re.MULTILINE)


def header(profile: str, rebuild: str) -> str:
    return f"# PEP 751 lock of profile {profile!r}, written by provision {__version__}. Rebuild: {rebuild}\n"


def packages_text(written: str, packages: list[dict[str, Any]]) -> str | None:
    """uv's text `written` with `created-by` provision's and each package's `index` (as `packages` holds it, in uv's
    order) put after its version, ending in a blank line; None where uv's text is not of the shape this edits (a [tool]
    table of its own, not one block per package)."""
    blocks = written.split(_BLOCK)
    if not written or "[tool" in written or len(blocks) != len(packages) + 1:
        return None
    out = [_CREATED_BY_LINE.sub(lambda _: f"created-by = {json.dumps(CREATED_BY)}", blocks[0], count=1)]
    for package, block in zip(packages, blocks[1:], strict=True):
        lines = block.split("\n")
        if "index" in package and not any(line.startswith("index = ") for line in lines[:4]):
            at = next((i + 1 for i, line in enumerate(lines[:3]) if line.startswith("version = ")), 1)
            lines.insert(at, f"index = {json.dumps(package['index'])}")
        out.append("\n".join(lines))
    return _BLOCK.join(out).rstrip("\n") + "\n\n"


def dumps(raw: dict[str, Any], written: str) -> str:
    """The lock as TOML (its header aside): `packages_text` and [tool] written by tomlkit, where that parses back as
    exactly `raw` (the proof kept for `unchanged`), else the whole of `raw` written by tomlkit."""
    import tomlkit  # a lock is written: create --lock reads one and writes none

    head = packages_text(written, raw.get("packages", []))
    if head is not None:
        text = head + tomlkit.dumps({"tool": raw.get("tool", {})})
        try:
            same = toml.loads(text) == raw
        except toml.TOMLDecodeError:
            same = False
        if same:
            wheelfacts.put_later("locks", _key(head), _PROOF)
            return text
    return tomlkit.dumps(raw)


def proven(previous: str, written: str, packages: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The [tool] table of the lock in place (`previous`, whose TOML gave `packages`), where its text after the header
    is `packages_text(written, packages)` (proven once to parse back as uv's packages with those indexes) followed by
    nothing but that table; None otherwise. Where it is, `packages` are exactly what uv wrote in `written`, with the
    indexes the lock in place gives them: the lock made again starts from them instead of parsing uv's text."""
    first, newline, body = previous.partition("\n")
    head = packages_text(written, packages)
    if not newline or not first.startswith("#") or head is None or not body.startswith(head):
        return None
    rest = body[len(head) :]
    if not rest.startswith("[tool") or wheelfacts.get("locks", _key(head)) != _PROOF:
        return None
    try:
        table = toml.loads(rest)
    except toml.TOMLDecodeError:
        return None
    return table if set(table) == {"tool"} else None


def unchanged(
    previous: str, header_line: str, head: str | None, tool: dict[str, Any], kept: dict[str, Any]
) -> bool:
    """Whether the lock in place, `proven` with its [tool] table `kept`, is exactly what would be written now
    (`header_line`, `head` = packages_text, and a [tool] table reading as `tool`), its `created` time aside: then it
    is left as it is."""
    if head is None or not previous.startswith(header_line + head):
        return False  # the header, or an index the packages are attributed to, differs
    created = kept.get("tool", {}).get("provision", {}).get("created")
    return isinstance(created, str) and kept == {
        "tool": {**tool, "provision": {**tool.get("provision", {}), "created": created}}
    }


_PROOF = {"reads_back": True}


def _key(head: str) -> str:
    """The proof's key: the text's sha256 with the provision that edited it (a later one may edit otherwise)."""
    import hashlib  # loaded once uv runs: the lock's way to uv loads none

    return hashlib.sha256(f"{__version__}\n{head}".encode()).hexdigest()
