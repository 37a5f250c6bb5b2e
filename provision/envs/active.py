"""The active environment: `switch` and `rollback`, two atomic renames and a history write, on HOME's folder as a str
path (links.py, the same steps `Home` takes). Kept apart from building (lifecycle.py) and from home.py so that these
commands load no pathlib and no record class: they must start in about the time of `import click`."""

from __future__ import annotations

from provision.envs import links
from provision.envs import state as states
from provision.errors import EnvError
from provision.names import check_name


def switch(root: str, name: str) -> str | None:
    """Make `name` active in the home at `root`; return the previously active name."""
    with links.locked(root):
        previous = links.active(root)
        links.activate(root, name)  # refuses an environment whose venv is gone
        return previous


def rollback(root: str, to: str | None = None) -> tuple[str | None, str, list[str]]:
    """Go back to the environment active before the current one (or `to`). Returns (from, to, skipped)."""
    if to is not None:
        return switch(root, check_name(to)), to, []
    with links.locked(root):
        current = links.active(root)
        history = states.read(root).history
        existing = set(links.names(root))
        skipped: list[str] = []
        unusable: set[str] = set()
        for candidate in reversed(history):
            if candidate == current:
                continue
            if candidate not in existing:
                skipped.append(candidate)
                continue
            if not links.usable(links.build_of(root, candidate)):
                skipped.append(candidate)  # its venv is gone: switch would refuse it, so rollback does too
                unusable.add(candidate)
                continue
            links.activate(root, candidate)
            return current, candidate, skipped
    gone = [n for n in dict.fromkeys(skipped) if n not in unusable]
    reasons = ([f"removed since: {', '.join(gone)}"] if gone else []) + (
        [f"venv gone: {', '.join(sorted(unusable))}"] if unusable else []
    )
    detail = f" ({'; '.join(reasons)})" if reasons else ""
    raise EnvError(
        f"nothing to roll back to: no earlier active environment{detail}",
        "switch explicitly: provision switch NAME",
    )
