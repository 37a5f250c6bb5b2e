"""A wheel's scan kept by its sha256 in provision's `scans/` cache (provision/wheelfacts.py): for each member with
device code, what the driver can load and the relocatable copy beside it; the members that could not be read, with
why; how many members were looked at. What `report --lock` and `scan` of a wheel read instead of inflating it again."""

from __future__ import annotations

from collections import Counter
from typing import Any

from provision import wheelfacts
from provision.scan import fatbin

KIND = "scans"
Members = list[tuple[str, fatbin.Code]]  # member name (inside the wheel) -> its code
Problems = list[tuple[str, str]]  # member name -> why it was not read


def keep(sha256: str, scanned: int, members: Members, problems: Problems, source: str) -> None:
    """Keep the scan of the wheel with this sha256 (`source`: where its bytes were read, for whoever looks)."""
    wheelfacts.put(
        KIND,
        sha256,
        {
            "scanned": scanned,
            "from": source,
            "problems": [list(p) for p in problems],
            "members": [[name, _counts(code.loadable), _counts(code.relocatable)] for name, code in members],
        },
    )


def load(sha256: str) -> tuple[int, Members, Problems] | None:
    """The kept scan of the wheel with this sha256; None when there is none, or one of another shape (removed)."""
    data = wheelfacts.get(KIND, sha256)
    if data is None:
        return None
    try:
        scanned = data["scanned"]
        members = [
            (_text(name), fatbin.Code(_from(loadable), _from(relocatable)))
            for name, loadable, relocatable in data["members"]
        ]
        problems = [(_text(name), _text(why)) for name, why in data["problems"]]
        if type(scanned) is not int or scanned < 0:
            raise ValueError(scanned)
    except (KeyError, TypeError, ValueError):
        wheelfacts.discard(KIND, sha256)
        return None
    return scanned, members, problems


def total(members: Members) -> fatbin.Counts:
    """What the driver can load from the whole wheel (relocatable link input is never judged)."""
    found = fatbin.Counts()
    for _, code in members:
        found.add(code.loadable)
    return found


def _counts(counts: fatbin.Counts) -> dict[str, Any]:
    return {**counts.labels(), "compressed": counts.compressed, "containers": counts.containers}


def _from(data: Any) -> fatbin.Counts:
    if not isinstance(data, dict):
        raise TypeError(data)
    found = []
    for kind in ("cubin", "ptx", "lto"):
        labels = data[kind]
        if not isinstance(labels, dict) or not all(
            isinstance(k, str) and type(v) is int and v > 0 for k, v in labels.items()
        ):
            raise ValueError(kind)
        found.append(Counter(labels))
    compressed, containers = data["compressed"], data["containers"]
    if type(compressed) is not int or type(containers) is not int or compressed < 0 or containers < 0:
        raise ValueError("counts")
    cubin, ptx, lto = found
    return fatbin.Counts(cubin, ptx, lto, compressed=compressed, containers=containers)


def _text(value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError(value)
    return value
