"""A home made under a UTF-8 locale and used under one that is ASCII (PYTHONUTF8=0 LC_ALL=C: Python's file names are
ASCII there): the paths its records keep, `hômé`, cannot be named to the system, and the command says so in one line
with the locale to use (it was `internal error: UnicodeEncodeError`, exit 3; `shell-env` said the venv was gone);
nothing is changed."""

from __future__ import annotations

from pathlib import Path

import tiny
from test_damage import one_error


def test_a_home_of_another_locale_is_one_line_naming_the_locale(
    tmp_path: Path, provision_bin: str, index_server
) -> None:
    tool = tiny.Tool(
        provision_bin, tmp_path / "hômé", tiny.profile(tmp_path).parent, tiny.index(index_server)
    )
    tool.create("tiny", "--no-checks")
    before = tool.envs()
    ascii_locale = {"PYTHONUTF8": "0", "LC_ALL": "C", "LANG": None}
    for args in (("check", "tiny"), ("report", "--env", "tiny", "--json"), ("shell-env", "tiny")):
        done = tool(*args, check=False, env=ascii_locale)
        one_error(done, 2, "this locale's encoding (ascii) cannot hold '\\xf4'", "LC_ALL=C.UTF-8")
    assert tool.envs() == before
