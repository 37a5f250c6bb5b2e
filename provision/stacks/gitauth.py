"""Credentials of a profile's git sources, handed to git by git's own means. uv runs `git fetch URL` with the URL it
is given, and a command line is readable by every local user (/proc/PID/cmdline); the lock records that URL too. So uv
gets each git URL without its user info, and git gets the user name and password from a credential helper set up for
that URL alone through GIT_CONFIG_COUNT/GIT_CONFIG_KEY_n/GIT_CONFIG_VALUE_n: the helper names variables, and their
values are in the environment of uv and its children only (readable by its owner, not by every user). The helper list
for that URL is emptied first, so that a helper of the user's own (`store`) never writes the password to a file."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping

from provision.stacks import urls

_HTTP = ("http://", "https://", "git+http://", "git+https://")
_USER = "PROVISION_GIT_USERNAME_{}"
_PASSWORD = "PROVISION_GIT_PASSWORD_{}"
# git runs a helper that starts with ! through the shell, with `get`, `store` or `erase` after it: only `get` answers
_HELPER = '!f() { test "$1" = get && printf \'username=%s\\npassword=%s\\n\' "${user}" "${password}"; }; f'


def bare(url: str) -> str:
    """The git URL uv is given and the lock records: an http(s) `url` without its user name and password (an ssh URL
    keeps its user name, which is no secret and which ssh needs; a password there is refused by `problem`)."""
    return urls.strip_credentials(url) if url.startswith(_HTTP) else url


def problem(url: str) -> str | None:
    """Why a git URL's secrets could not be kept off command lines and out of the lock, else None: an http(s) URL
    spelled other than scheme://host (uv's parser reads http:/ and http:/// as http://, which `bare` would not strip),
    a / ? # @ or \\ left unencoded in the user info (where the host begins is then a guess, and the helper would give
    the password to the host guessed), a query (git and uv pass it on as it is), a password in an ssh URL (ssh takes
    none from a URL), a line break in the user info (the helper's answer is one line a key)."""
    if (
        re.match(r"(?i)(?:git\+)?https?:", url)
        and not re.match(r"(?:git\+)?https?://[^/\\]", url)
        or "\\" in url
    ):
        return "an http(s) git URL not spelled scheme://host/... (uv reads http:/ and http:/// as http://, and a \\ as a /): write it so"
    user_info = urls.userinfo(url)
    if user_info is not None and re.search(r"[/?#@\\]", user_info[1]):
        return "a / ? # or @ in a git URL's user name or password (it could end the host part, and the password go to another host): percent-encode it (%2F %3F %23 %40)"
    if re.search(r"[?#]", bare(url).split("://", 1)[-1]):
        return "a git URL with a query or fragment (a token there reaches git's command line and the lock): give the token as the password, https://USER:TOKEN@host/..."
    user, password = urls.credentials(url)
    if password and not url.startswith(_HTTP):
        return "a password in a git URL other than http(s) (ssh takes none from a URL): use an ssh key"
    if any(c in user + password for c in "\r\n\0"):
        return "a line break or NUL in the git URL's user name or password"
    return None


def variables(git_urls: Iterable[str], environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The variables that give git the credentials of each http(s) URL in `git_urls` (none for a URL without them),
    numbered after any GIT_CONFIG_COUNT entries already in `environ` (the process environment by default)."""
    environ = os.environ if environ is None else environ
    given = environ.get("GIT_CONFIG_COUNT", "")
    count = int(given) if given.isdigit() and len(given) < 6 else 0
    env: dict[str, str] = {}
    for number, url in enumerate(
        u for u in dict.fromkeys(git_urls) if u.startswith(_HTTP) and urls.credentials(u) != ("", "")
    ):
        user, password = urls.credentials(url)
        where = bare(url).removeprefix("git+")
        env[_USER.format(number)], env[_PASSWORD.format(number)] = user, password
        helper = _HELPER.replace("${user}", "${" + _USER.format(number) + "}").replace(
            "${password}", "${" + _PASSWORD.format(number) + "}"
        )
        for key, value in ((f"credential.{where}.helper", ""), (f"credential.{where}.helper", helper)):
            env[f"GIT_CONFIG_KEY_{count}"], env[f"GIT_CONFIG_VALUE_{count}"] = key, value
            count += 1
    if env:
        env["GIT_CONFIG_COUNT"] = str(count)
    return env
