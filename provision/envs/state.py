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
    """HOME/state.json. A damaged one (truncated, not JSON, `history` of another type) is set aside, never deleted, and
    the history rebuilt from the home's links (`rebuilt`), with a note: it holds nothing but rollback's history. Read
    only under HOME's lock (switch, rollback). A newer provision's file, or one that cannot be read or is not a file
    (a link, a pipe) stays an error: nothing is lost in it, and it is not provision's to move."""
    where = path(root)
    try:
        data = load(where)
        if data is None:
            return State()
        fields = Fields(where, data)
        fields.version()
        return State(
            fields.strings("history"),
            {k: v for k, v in fields.data.items() if k not in ("history", "schema_version")},
        )
    except RecordError as exc:
        if any(
            words in exc.message
            for words in ("is newer than this provision", "cannot be read", "not a file provision wrote")
        ):
            raise
        return rebuilt(root, exc.message)


def rebuilt(root: str | os.PathLike[str], damage: str) -> State:
    """The history made again from what the home holds, after state.json (`damage` says how it is damaged) was moved to
    state.json.damaged-STAMP-PID: its environments oldest named first (by when each envs/NAME link was made), the
    active one last; written in place at once, so that the next rollback reads it."""
    import datetime

    from provision import log

    where = path(root)
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    aside = f"{where}.damaged-{stamp}-{os.getpid()}"
    state = State(_names_by_age(root))
    try:
        os.rename(where, aside)
        os.replace(stage(root, state), where)
    except OSError as exc:
        raise RecordError(
            f"{damage}; it could not be set aside ({exc.strerror or exc})",
            f"move it aside (mv {where} {where}.damaged) and run this again: it holds only the history "
            "rollback walks back through",
        ) from None
    log.info(
        f"note: {log.one_line(damage)}: set aside as {log.one_line(aside)}, and the history rebuilt from the "
        f"environments ({', '.join(state.history) or 'none'}; oldest first, the active one last)"
    )
    return state


def _names_by_age(root: str | os.PathLike[str]) -> list[str]:
    """The environments' names (links in envs/ that follow the name rule), oldest link first, the active one last."""
    from provision.names import NAME_RULE

    aged: list[tuple[int, str]] = []
    try:
        with os.scandir(os.path.join(root, "envs")) as entries:
            for entry in entries:
                if entry.is_symlink() and NAME_RULE.match(entry.name):
                    aged.append((entry.stat(follow_symlinks=False).st_mtime_ns, entry.name))
    except OSError:
        return []
    try:
        active = os.path.basename(os.path.normpath(os.readlink(os.path.join(root, "active"))))
    except OSError:
        active = ""
    ordered = [name for _, name in sorted(aged)]
    return [name for name in ordered if name != active] + ([active] if active in ordered else [])


def path(root: str | os.PathLike[str]) -> str:
    return os.path.join(root, STATE_FILE)


def stage(root: str | os.PathLike[str], state: State) -> str:
    """`state` written (and synced) beside state.json, not yet in its place: `os.replace(staged, path(root))` puts it
    there, in the same folder as the active pointer, so that one folder sync makes both renames durable."""
    return atomic.stage(path(root), atomic.json_text(state.to_dict()))
