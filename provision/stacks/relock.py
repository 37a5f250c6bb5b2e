"""What a lock says about itself to the next run: the command that makes it again (its header), and, when it replaces
an earlier lock, what changed (added, removed, version changes), as pip-compile and `uv lock` say it."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

from packaging.utils import canonicalize_name

from provision.errors import ProvisionError
from provision.stacks import index
from provision.stacks.profiles import Profile, search_dirs


def rebuild_command(profile: Profile, *, python: str, platform: str | None, overrides: dict[str, str], output: Path) -> str:
    """`provision lock ...` that makes this lock again: the profile by name where lock finds it by name, else by its
    path; the same Python, platform and --index flags (credentials stripped), and the same output."""
    by_name = any((folder / f"{profile.name}.toml").resolve() == profile.path.resolve() for folder in search_dirs())
    argv = ["provision", "lock", profile.name if by_name else str(profile.path), "--python", python]
    if platform:
        argv += ["--platform", platform]
    argv += [f"--index={name}={index.strip_credentials(url)}" for name, url in sorted(overrides.items())]
    return shlex.join([*argv, "-o", str(output)])


def versions_in(path: Path) -> dict[str, str] | None:
    """{package: version} of an existing lock at `path`; None when there is none or it cannot be read."""
    from provision.stacks import lockfile

    if not path.is_file():
        return None
    try:
        pylock, _ = lockfile.read(path)
    except ProvisionError:
        return None
    return {str(canonicalize_name(p.name)): str(p.version or "") for p in pylock.packages}


def changes(before: dict[str, str] | None, after: dict[str, str]) -> dict[str, Any] | None:
    """{"added": [{name, version}], "removed": [{name, version}], "changed": [{name, from, to}]}; None without an
    earlier lock."""
    if before is None:
        return None
    return {
        "added": [{"name": n, "version": after[n]} for n in sorted(after.keys() - before.keys())],
        "removed": [{"name": n, "version": before[n]} for n in sorted(before.keys() - after.keys())],
        "changed": [{"name": n, "from": before[n], "to": after[n]} for n in sorted(after.keys() & before.keys())
                    if before[n] != after[n]],
    }


def describe(found: dict[str, Any]) -> list[str]:
    """uv lock's lines: `Added x v1`, `Removed y v2`, `Updated z v1 -> v2`; `No changes` when there are none."""
    lines = [f"Added {a['name']} v{a['version']}" for a in found["added"]]
    lines += [f"Removed {r['name']} v{r['version']}" for r in found["removed"]]
    lines += [f"Updated {c['name']} v{c['from']} -> v{c['to']}" for c in found["changed"]]
    return lines or ["No changes"]
