"""`provision shell-env`: the lines a shell evals to enter an environment, and to leave it again.

What the shell had before the first eval is kept in `_PROVISION_SAVED_*` variables, so a second eval (the same or
another environment) starts from it (PATH does not pile up) and `provision shell-env --undo`, or the
`provision_deactivate` function the eval defines, puts it back."""

from __future__ import annotations

import os
import shlex
from collections.abc import Mapping

from provision.names import SHELL_NAME

KEYS = "_PROVISION_KEYS"  # the variables an eval set, space-separated
UNSET = "_PROVISION_UNSET"  # those of them the shell did not have
SAVED = "_PROVISION_SAVED_"  # _PROVISION_SAVED_PATH ...: what the shell had


def _names(environ: Mapping[str, str], variable: str) -> list[str]:
    """The variable names an earlier eval listed in `variable`: only shell names, whatever else is there (they are
    written unquoted into `unset` and `export` lines that the shell evals)."""
    return [name for name in environ.get(variable, "").split() if SHELL_NAME.match(name)]


def _before(environ: Mapping[str, str]) -> tuple[dict[str, str], set[str]]:
    """The values the shell had before the first eval (from the saved ones, where an eval came before)."""
    keys = _names(environ, KEYS)
    unset = set(_names(environ, UNSET))
    saved = {k: environ[SAVED + k] for k in keys if SAVED + k in environ and k not in unset}
    return saved, unset & set(keys)


def activate_lines(
    variables: Mapping[str, str], path_head: str, environ: Mapping[str, str] = os.environ
) -> list[str]:
    """export lines for `variables` (PATH: `path_head`, the environment's bin folders, before the shell's PATH before any
    eval), saving what they replace, and the provision_deactivate function."""
    saved, unset = _before(environ)
    earlier = set(_names(environ, KEYS))
    keys = sorted(set(variables) | earlier)
    for key in keys:
        if key not in earlier:
            if key in environ:
                saved[key] = environ[key]
            else:
                unset.add(key)
    base_path = saved.get("PATH", environ.get("PATH", ""))
    values = {**variables, "PATH": os.pathsep.join(filter(None, [path_head, base_path]))}
    lines = [f"export {SAVED}{k}={shlex.quote(v)}" for k, v in sorted(saved.items())]
    lines += [
        f"export {KEYS}={shlex.quote(' '.join(keys))}",
        f"export {UNSET}={shlex.quote(' '.join(sorted(unset)))}",
    ]
    # set by the earlier eval only
    lines += [f"unset {k}" for k in sorted(earlier - set(values)) if k in unset]
    lines += [f"export {k}={shlex.quote(saved[k])}" for k in sorted(earlier - set(values)) if k in saved]
    lines += [f"export {k}={shlex.quote(v)}" for k, v in values.items()]
    restore = _restore_lines(saved, unset, keys)
    lines.append("provision_deactivate() { " + "; ".join(restore) + "; unset -f provision_deactivate; }")
    return lines


def _restore_lines(saved: Mapping[str, str], unset: set[str], keys: list[str]) -> list[str]:
    lines = [
        f"export {k}={shlex.quote(saved[k])}" if k in saved else f"unset {k}"
        for k in keys
        if k in saved or k in unset
    ]
    lines += [f"unset {SAVED}{k}" for k in sorted(saved)]
    return [*lines, f"unset {KEYS} {UNSET}", "hash -r 2>/dev/null || true"]


def undo_lines(environ: Mapping[str, str] = os.environ) -> list[str]:
    """The lines that put back what the shell had before the first eval; none when nothing was evaluated."""
    if KEYS not in environ:
        return []
    saved, unset = _before(environ)
    return [
        *_restore_lines(saved, unset, _names(environ, KEYS)),
        "unset -f provision_deactivate 2>/dev/null || true",
    ]
