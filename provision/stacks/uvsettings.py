"""The caller's uv settings (UV_* variables) that provision passes on to uv, each checked by uv's own rule before
anything runs; every other UV_* variable is left out of uv's environment.

provision decides what is resolved and installed: the profile's pins and indexes, its link mode, no interpreter
downloads. A UV_* variable inherited from the caller's shell would bend that without a word: UV_OVERRIDE with
UV_EXTRA_INDEX_URL pinned a package from another index past the profile's index rules; UV_CONSTRAINT, UV_INDEX,
UV_FIND_LINKS, UV_NO_INDEX, UV_PRERELEASE, UV_INDEX_STRATEGY, UV_EXCLUDE_NEWER, UV_RESOLUTION, UV_TORCH_BACKEND,
UV_NO_BINARY, UV_NO_BUILD, UV_CONFIG_FILE, UV_INSECURE_HOST, UV_PYTHON, UV_SYSTEM_PYTHON, UV_BREAK_SYSTEM_PACKAGES and
the rest of uv's list (docs.astral.sh/uv/reference/environment/) likewise. What is honoured changes where uv keeps its
cache and finds interpreters, how it links files, how long and how often it asks an index (or none: UV_OFFLINE), how
much it does at once, how it authenticates, and which registry is uv's default (UV_DEFAULT_INDEX, UV_INDEX_URL: the
`default` index of a profile that names none, a mirror of the public registry; the lock names the URL); never what it
chooses among them. uv's own configuration files (uv.toml) are not read either (UV_NO_CONFIG), for the same reason.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping

from provision import log
from provision.errors import InputError

LINK_MODES = ("clone", "copy", "hardlink", "symlink", "reflink")  # reflink: newer uv's name for clone
_BOOLISH = ("1", "0", "true", "false", "t", "f", "yes", "no", "y", "n", "on", "off")  # uv's boolish values


def _integer(minimum: int, unit: str = "") -> Callable[[str], str | None]:
    def check(value: str) -> str | None:
        if not (value.isascii() and value.isdigit()) or len(value) > 19:
            return f"is not a whole number{unit}"
        return f"is below {minimum}" if int(value) < minimum else None

    return check


def _link_mode(value: str) -> str | None:
    return None if value in LINK_MODES else f"is not one of uv's link modes ({', '.join(LINK_MODES)})"


def _boolish(value: str) -> str | None:
    return None if value.lower() in _BOOLISH else "is not true or false (1, 0, yes, no, on, off)"


def _keyring(value: str) -> str | None:
    return None if value in ("disabled", "subprocess") else "is not disabled or subprocess"


def _default_index(value: str) -> str | None:
    """uv's default registry ([NAME=]URL), as an index URL of a profile is checked."""
    from provision.stacks.profiles import index_url_problem
    from provision.stacks.urls import strip_credentials

    name, sep, url = value.partition("=")
    url = url if sep and "://" not in name else value
    return index_url_problem(strip_credentials(url))


def _folder(value: str) -> str | None:
    """A folder uv can make its cache in: one there, or one that can be made (what is in the way is named)."""
    if not value:
        return "is empty"
    path = os.path.abspath(value)
    while not os.path.lexists(path):
        path = os.path.dirname(path)
    if not os.path.isdir(path):
        return (
            f"is not a folder ({path} is a file)"
            if path == os.path.abspath(value)
            else f"cannot be made ({path} is a file)"
        )
    return None


# (what it is, the check of uv's rule), for each variable honoured; a value left empty is as good as unset for these
# (uv says so), except where uv refuses it too.
HONOURED: dict[str, tuple[str, Callable[[str], str | None], bool]] = {
    "UV_CACHE_DIR": ("uv's cache folder", _folder, False),
    "UV_PYTHON_INSTALL_DIR": ("where uv's own interpreters are", _folder, False),
    "UV_LINK_MODE": ("how uv links files into a venv", _link_mode, False),
    "UV_HTTP_TIMEOUT": ("uv's HTTP timeout", _integer(0, " of seconds"), True),
    "UV_HTTP_RETRIES": ("uv's HTTP retries", _integer(0), True),
    "UV_CONCURRENT_DOWNLOADS": ("uv's downloads at once", _integer(1), True),
    "UV_CONCURRENT_INSTALLS": ("uv's install threads", _integer(1), True),
    "UV_CONCURRENT_BUILDS": ("uv's builds at once", _integer(1), True),
    "UV_NATIVE_TLS": ("the system's certificates", _boolish, False),
    "UV_OFFLINE": ("uv without the network", _boolish, False),
    # uv's default registry (a mirror of it): where a profile's `default` index is, when neither the profile,
    # --index default=URL nor PROVISION_INDEX_DEFAULT names one (provision's own UV_DEFAULT_INDEX replaces it then);
    # the lock names the URL it came from
    "UV_DEFAULT_INDEX": ("uv's default index", _default_index, False),
    "UV_INDEX_URL": ("uv's default index", _default_index, False),
    "UV_KEYRING_PROVIDER": ("uv's keyring", _keyring, False),
}
# an index's credentials: they choose nothing
_CREDENTIAL = re.compile(r"UV_INDEX_[A-Z0-9_]+_(USERNAME|PASSWORD)\Z")


def honoured(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The UV_* settings of `environ` (the process's) that uv gets, each checked by uv's rule: an InputError naming the
    variable and its value (a credential's value never shown) for one uv would refuse."""
    environ = os.environ if environ is None else environ
    kept: dict[str, str] = {}
    for name, value in environ.items():
        if name in HONOURED:
            what, check, empty_is_unset = HONOURED[name]
            if empty_is_unset and not value:
                continue
            problem = check(value)
            if problem:
                raise InputError(
                    f"{name}={log.one_line(value)[:80]!r} ({what}) {problem}",
                    f"unset {name}, or give it a value uv takes",
                )
            kept[name] = value
        elif _CREDENTIAL.match(name):
            kept[name] = value
    return kept


def left_out(environ: Mapping[str, str] | None = None) -> list[str]:
    """The UV_* variables of `environ` that uv does not get (by name: a value may be a URL with a password)."""
    environ = os.environ if environ is None else environ
    return sorted(
        n for n in environ if n.startswith("UV_") and n not in HONOURED and not _CREDENTIAL.match(n)
    )


_said: list[bool] = []


def say_once(environ: Mapping[str, str] | None = None) -> None:
    """Name, once per process, what is honoured (-v) and what is left out (a note: it changed nothing uv does)."""
    if _said:
        return
    _said.append(True)
    kept = honoured(environ)
    if kept:
        log.debug(
            "uv settings honoured from the environment: "
            + ", ".join(
                name if _CREDENTIAL.match(name) else f"{name}={log.one_line(value)}"
                for name, value in sorted(kept.items())
            )
        )
    dropped = left_out(environ)
    if dropped:
        log.info(
            f"note: {', '.join(dropped)} {'is' if len(dropped) == 1 else 'are'} set, and not passed to uv: the profile, "
            "its indexes and provision's options decide what uv resolves and installs (docs/profiles.md)"
        )
