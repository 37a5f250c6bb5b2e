"""Locks the tests write by hand, sealed as provision seals the locks it writes ([tool.provision] packages_sha256):
every reader refuses a lock without its seal, so a test about something else gives its lock one."""

from __future__ import annotations

from typing import Any

import tomlkit

from provision import toml
from provision.stacks import lockfile


def sealed(doc: dict[str, Any]) -> str:
    """`doc` as TOML, with the seal of its packages (as read back) in [tool.provision]."""
    read_back = toml.loads(tomlkit.dumps({"packages": doc.get("packages", []), "tool": doc.get("tool", {})}))
    known = read_back.get("tool", {}).get("provision", {}).get("known_conflicts")  # sealed with the packages
    doc.setdefault("tool", {}).setdefault("provision", {})[lockfile.SEAL] = lockfile.packages_digest(
        read_back.get("packages", []), known
    )
    return tomlkit.dumps(doc)
