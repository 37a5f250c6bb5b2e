"""The active environment: `switch` and `rollback`, two atomic renames and a history write. Kept apart from building
(lifecycle.py) so that these commands import only home.py and records.py: they must start in well under 0.1 s."""

from __future__ import annotations

from provision.envs.home import Home
from provision.errors import EnvError


def switch(home: Home, name: str) -> str | None:
    """Make `name` active; return the previously active name."""
    with home.locked():
        previous = home.active()
        build = home.build_of(name)
        if not (build / "venv" / "bin" / "python").exists():
            raise EnvError(f"environment {name!r} has no python at {build / 'venv' / 'bin' / 'python'}", f"rebuild it: provision create, or remove {name}")
        home.activate(name)
        return previous


def rollback(home: Home, to: str | None = None) -> tuple[str | None, str, list[str]]:
    """Go back to the environment active before the current one (or `to`). Returns (from, to, skipped)."""
    if to is not None:
        return switch(home, to), to, []
    with home.locked():
        current = home.active()
        history = home.state().history
        existing = set(home.names())
        skipped: list[str] = []
        for candidate in reversed(history):
            if candidate == current:
                continue
            if candidate not in existing:
                skipped.append(candidate)
                continue
            home.activate(candidate)
            return current, candidate, skipped
    detail = f" (removed since: {', '.join(dict.fromkeys(skipped))})" if skipped else ""
    raise EnvError(f"nothing to roll back to: no earlier active environment{detail}", "switch explicitly: provision switch NAME")
