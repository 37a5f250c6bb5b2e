"""A lock written where a folder's name holds a byte that is not UTF-8 (`-o`, or a home's locks/ that create locks
into): its first line, the command that makes it again, names that path in bash's $'\\xff' form, and the file is UTF-8
that reads back (the path went into it as Python keeps such a byte, a lone surrogate: `internal error:
UnicodeEncodeError`, nothing written, and create in such a home failed the same way before uv could say why)."""

from __future__ import annotations

import json
from pathlib import Path

import tiny


def test_a_lock_in_a_folder_that_is_not_utf8_names_it_for_bash(
    tmp_path: Path, provision_bin: str, index_server
) -> None:
    tool = tiny.make_tool(tmp_path, provision_bin, tiny.index(index_server))
    folder = tmp_path / "o\udcffut"  # the byte 0xff, as Python keeps it
    folder.mkdir()
    lock = folder / "pylock.tiny.toml"
    made = json.loads(tool("lock", "tiny", "-o", str(lock), "--json", check=True).stdout)
    quoted = "$'" + str(lock).replace("\udcff", "\\xff") + "'"
    assert made["rebuild"].endswith(f"-o {quoted}"), made["rebuild"]
    assert lock.read_bytes().decode("utf-8").splitlines()[0].endswith(quoted)
    tool("report", "--lock", str(lock), "--json", check=True)
    again = json.loads(tool("lock", "tiny", "-o", str(lock), "--json", check=True).stdout)
    assert again["unchanged"] is True, again
