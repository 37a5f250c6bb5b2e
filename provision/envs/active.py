"""The active environment: `switch` and `rollback`, two atomic renames and a history write. Kept apart from building
(lifecycle.py) so that these commands import only home.py and records.py: they must start in well under 0.1 s."""

from __future__ import annotations

from provision.envs.home import Home, check_name
from provision.errors import EnvError


def switch(home: Home, name: str) -> str | None:
    """Make `name` active; return the previously active name."""
    with home.locked():
        previous = home.active()
        home.activate(name)  # refuses an environment whose venv is gone
        return previous


def rollback(home: Home, to: str | None = None) -> tuple[str | None, str, list[str]]:
    """Go back to the environment active before the current one (or `to`). Returns (from, to, skipped)."""
    if to is not None:
        return switch(home, check_name(to)), to, []
    with home.locked():
        current = home.active()
        history = home.state().history
        existing = set(home.names())
        skipped: list[str] = []
        unusable: set[str] = set()
        for candidate in reversed(history):
            if candidate == current:
                continue
            if candidate not in existing:
                skipped.append(candidate)
                continue
            if not (home.build_of(candidate) / "venv" / "bin" / "python").exists():
                skipped.append(candidate)  # its venv is gone: switch would refuse it, so rollback does too
                unusable.add(candidate)
                continue
            home.activate(candidate)
            return current, candidate, skipped
    gone = [n for n in dict.fromkeys(skipped) if n not in unusable]
    reasons = ([f"removed since: {', '.join(gone)}"] if gone else []) + ([f"venv gone: {', '.join(sorted(unusable))}"] if unusable else [])
    detail = f" ({'; '.join(reasons)})" if reasons else ""
    raise EnvError(f"nothing to roll back to: no earlier active environment{detail}", "switch explicitly: provision switch NAME")
