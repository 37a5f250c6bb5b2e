"""The one rule for environment names (and the profile names that name them by default)."""

from __future__ import annotations

import re

from provision.errors import UsageError

NAME_MAX = 64
# One rule for every environment name: it names a link in envs/ and a folder in builds/, so it is one path component
# (no "/", never "." or ".."), spelled one way, and short enough that the build folder's stamp still fits.
NAME_RULE = re.compile(rf"^[A-Za-z0-9][A-Za-z0-9._-]{{0,{NAME_MAX - 1}}}\Z")  # \Z: $ let "name\n" through


# What a shell takes as a variable name: the keys of a profile's [env] and of env.json's "env" (shell-env exports each
# as is, into an eval).
SHELL_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\Z")


def check_name(name: str, what: str = "environment name") -> str:
    """Return `name` if it follows the rule; a UsageError (exit 2) naming the rule otherwise."""
    if not NAME_RULE.match(name):
        shown = name if len(name) <= 80 else name[:77] + "..."
        raise UsageError(
            f"{what} {shown!r} is not allowed",
            f"use letters, digits, '.', '_' and '-', starting with a letter or digit, at most {NAME_MAX} characters",
        )
    return name
