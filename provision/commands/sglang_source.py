"""What the SGLang installed in a venv accepts, read from its source with `ast` (nothing is imported, torch need not
load): the command-line flags of its server-argument parser and the variables of its environment table, by the
readers of stacks/sglang_flags.py, which `profiles new` also runs over a remote wheel's files."""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

from provision import confined, regular
from provision.envs.home import site_packages
from provision.report.environments import installed
from provision.stacks.sglang_flags import (
    ARG_GROUPS,
    ENVIRON,
    MAX_SOURCE,
    SERVER_ARGS,
    parse,
    parser_flags,
    table_variables,
)


@dataclass(frozen=True, kw_only=True)
class SglangSource:
    """The flags and variables of one installed SGLang."""

    version: str
    flags: frozenset[str]
    variables: frozenset[str] | None  # None: this release has no environment table (srt/environ.py)


def read(venv: Path) -> SglangSource | None:
    """The SGLang installed in `venv`, read statically; None where none is installed."""
    version = installed(venv).get("sglang")
    if version is None:
        return None
    site = site_packages(venv)
    confinement = confined.Confinement(venv)
    files = [site / SERVER_ARGS, *sorted((site / ARG_GROUPS).rglob("*.py"))]
    flags: set[str] = set()
    for path in files:
        tree = _parse(path, confinement)
        if tree is not None:
            flags |= parser_flags(tree)
    environ = _parse(site / ENVIRON, confinement)
    return SglangSource(
        version=version,
        flags=frozenset(flags),
        variables=None if environ is None else frozenset(table_variables(environ)),
    )


def _parse(path: Path, confinement: confined.Confinement) -> ast.Module | None:
    """The module at `path`, parsed; None when it is missing, leads out of the venv, or is no Python this reads."""
    if confinement.path(str(path)) is not None:
        return None
    try:
        return parse(regular.read_bytes(path, MAX_SOURCE + 1))
    except OSError:
        return None
