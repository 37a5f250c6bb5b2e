"""What a lock says about itself to the next run: the command that makes it again (its header), and, when it replaces
an earlier lock, what changed (added, removed, version changes), as pip-compile and `uv lock` say it."""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from provision.errors import ProvisionError
from provision.stacks import urls
from provision.stacks.profiles import Profile, search_dirs


def rebuild_command(
    profile: Profile, *, python: str, platform: str | None, overrides: dict[str, str], output: Path
) -> str:
    """`provision lock ...` that makes this lock again: the profile by name where lock finds it by name, else by its
    path; the same Python, platform and --index flags (credentials stripped, query values and token-like path segments as ****), and the same output."""
    by_name = any(
        (folder / f"{profile.name}.toml").resolve() == profile.path.resolve() for folder in search_dirs()
    )
    argv = ["provision", "lock", profile.name if by_name else str(profile.path), "--python", python]
    if platform:
        argv += ["--platform", platform]
    argv += [f"--index={name}={urls.shown(url)}" for name, url in sorted(overrides.items())]
    return " ".join(map(quoted, [*argv, "-o", str(output)]))


def quoted(word: str) -> str:
    """`word` quoted for a POSIX shell (shlex.quote), except one holding a control character (a home or -o path with a
    newline in it) or a byte that is not UTF-8 (a path's, kept by Python as a lone surrogate), written in bash's $'...'
    form: the command stays one line of UTF-8 (it is the lock's first line, a TOML comment, which a raw newline ended
    and such a byte made unwritable) and means the same to bash."""
    if not any(ord(c) < 32 or ord(c) == 127 or 0xDC80 <= ord(c) <= 0xDCFF for c in word):
        return shlex.quote(word)
    return "$'" + "".join(_escaped(c) for c in word) + "'"


def _escaped(c: str) -> str:
    if ord(c) < 32 or ord(c) == 127:
        return f"\\x{ord(c):02x}"
    if 0xDC80 <= ord(c) <= 0xDCFF:  # surrogateescape's stand-in for the byte ord(c) - 0xDC00
        return f"\\x{ord(c) - 0xDC00:02x}"
    return "\\" + c if c in "\\'" else c


@dataclass(frozen=True)
class Previous:
    """The lock that `lock -o` replaces, read once before uv runs and parsed while it resolves: its text, its TOML,
    {package: version} (what the new lock's `changes` are told against), and the digest of its packages as they read
    (lockfile.packages_digest: what a lock made again with the very same packages is sealed with)."""

    text: str
    raw: dict[str, Any]
    versions: dict[str, str]
    seal: str

    @classmethod
    def parse(cls, data: bytes, path: Path) -> Previous | None:
        """The lock in `data`; None where it is not one provision reads (its seal unchecked: `changes` are told against
        any lock, and a lock made again is only kept as it is where its text is proven, lockfile.unchanged)."""
        from packaging.utils import canonicalize_name

        from provision.stacks import lockfile

        try:
            raw, pylock, tool = lockfile.parse_bytes(data, path)
        except ProvisionError:
            return None
        return cls(
            text=data.decode("utf-8"),
            raw=raw,
            versions={str(canonicalize_name(p.name)): str(p.version or "") for p in pylock.packages},
            seal=lockfile.packages_digest(raw.get("packages", []), tool.get("known_conflicts")),
        )


@dataclass(frozen=True)
class Pinned:
    """A package at a version, added by a lock or removed from it."""

    name: str
    version: str


@dataclass(frozen=True)
class Updated:
    """A package whose version a lock changed."""

    name: str
    before: str
    after: str


@dataclass(frozen=True, kw_only=True)
class Changes:
    """What a lock changed against the one it replaced, as pip-compile and `uv lock` say it."""

    added: tuple[Pinned, ...] = ()
    removed: tuple[Pinned, ...] = ()
    changed: tuple[Updated, ...] = ()

    def to_dict(self) -> dict[str, list[dict[str, str]]]:
        """{"added": [{name, version}], "removed": [{name, version}], "changed": [{name, from, to}]}."""
        return {
            "added": [{"name": a.name, "version": a.version} for a in self.added],
            "removed": [{"name": r.name, "version": r.version} for r in self.removed],
            "changed": [{"name": c.name, "from": c.before, "to": c.after} for c in self.changed],
        }

    def describe(self) -> list[str]:
        """uv lock's lines: `Added x v1`, `Removed y v2`, `Updated z v1 -> v2`; `No changes` when there are none."""
        lines = [f"Added {a.name} v{a.version}" for a in self.added]
        lines += [f"Removed {r.name} v{r.version}" for r in self.removed]
        lines += [f"Updated {c.name} v{c.before} -> v{c.after}" for c in self.changed]
        return lines or ["No changes"]


def changes(before: dict[str, str] | None, after: dict[str, str]) -> Changes | None:
    """What changed from the versions `before` to those `after`; None without an earlier lock."""
    if before is None:
        return None
    return Changes(
        added=tuple(Pinned(n, after[n]) for n in sorted(after.keys() - before.keys())),
        removed=tuple(Pinned(n, before[n]) for n in sorted(before.keys() - after.keys())),
        changed=tuple(
            Updated(n, before[n], after[n])
            for n in sorted(after.keys() & before.keys())
            if before[n] != after[n]
        ),
    )
