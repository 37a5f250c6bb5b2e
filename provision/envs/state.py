"""HOME/state.json: the names activated, oldest first (what `rollback` walks back through). Apart from records.py
(env.json), so that `switch` and `rollback` load no record class: they must start in about the time of `import click`.
Paths are str (os.path): they load no pathlib either."""

from __future__ import annotations

import os

from provision import atomic
from provision.envs.recordfile import SCHEMA_VERSION, Fields, JSONObject, RecordError, load

STATE_FILE = "state.json"


class State:
    """The activation history, oldest first, and the keys this version does not know (kept through a rewrite)."""

    __slots__ = ("history", "extra")

    def __init__(self, history: list[str] | None = None, extra: JSONObject | None = None) -> None:
        self.history: list[str] = history if history is not None else []
        self.extra: JSONObject = extra if extra is not None else {}

    def activated(self, name: str) -> State:
        """This state with `name` activated last (the newest 100 names are kept)."""
        return State([*self.history, name][-100:], self.extra)

    def to_dict(self) -> JSONObject:
        return {**self.extra, "schema_version": SCHEMA_VERSION, "history": self.history}


def read(root: str | os.PathLike[str]) -> State:
    """HOME/state.json; a damaged one is an error whose hint says how to go on (it never mends itself, and it holds
    nothing but rollback's history: moved aside, the next switch starts a new one)."""
    where = path(root)
    try:
        data = load(where)
        if data is None:
            return State()
        fields = Fields(where, data)
        fields.version()
        return State(fields.strings("history"), {k: v for k, v in fields.data.items() if k not in ("history", "schema_version")})
    except RecordError as exc:
        if "is newer than this provision" in exc.message or "cannot be read" in exc.message:
            raise
        raise RecordError(exc.message, f"move it aside (mv {where} {where}.damaged) and run this again: it holds only "
                                       "the history rollback walks back through, and the next switch starts a new one") from None


def path(root: str | os.PathLike[str]) -> str:
    return os.path.join(root, STATE_FILE)


def stage(root: str | os.PathLike[str], state: State) -> str:
    """`state` written (and synced) beside state.json, not yet in its place: `os.replace(staged, path(root))` puts it
    there, in the same folder as the active pointer, so that one folder sync makes both renames durable."""
    return atomic.stage(path(root), atomic.json_text(state.to_dict()))
