"""A profile's [baseline]: how to run it and read its figure (records/results.py re-exports it beside the results a
run gives). A module of its own: `lock` reads a profile before uv runs, and nothing else of the results then."""

from __future__ import annotations

from dataclasses import dataclass

from provision.records.reader import Better, JSONObject, MalformedResult, Reader


@dataclass(frozen=True, kw_only=True)
class Baseline:
    """How to run a baseline and read its figure: a profile's [baseline] (stacks/profiles.py checks it), kept in
    env.json so that the environment runs it without its profile."""

    command: tuple[str, ...]
    cwd: str = "."
    timeout: float = 1800.0
    pattern: str | None = None  # a regular expression whose first group is the figure
    json_key: str | None = None  # or a (dotted) key of the last JSON object the command prints
    unit: str = ""
    better: Better = "higher"

    @classmethod
    def parse(cls, fields: Reader) -> Baseline:
        said = fields.text("better") or "higher"
        if said not in ("higher", "lower"):
            raise MalformedResult(f"key {fields.name('better')!r} is {said!r}, expected higher or lower")
        command = fields.strings("command")
        if not command:
            raise MalformedResult(
                f"key {fields.name('command')!r} is missing, expected an argv list of strings"
            )
        timeout = fields.number("timeout")
        return cls(
            command=tuple(command),
            cwd=fields.text("cwd") or ".",
            timeout=1800.0 if timeout is None else timeout,
            pattern=fields.text("pattern"),
            json_key=fields.text("json_key"),
            unit=fields.text("unit") or "",
            better="lower" if said == "lower" else "higher",
        )

    def to_dict(self) -> JSONObject:
        return {
            "command": list(self.command),
            "cwd": self.cwd,
            "timeout": self.timeout,
            "pattern": self.pattern,
            "json_key": self.json_key,
            "unit": self.unit,
            "better": self.better,
        }
