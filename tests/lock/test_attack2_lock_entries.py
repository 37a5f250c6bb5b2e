"""`create --lock` of a lock packaging.pylock accepts and uv refuses only once create has made the venv: a package
listed twice with no marker to tell the entries apart, a wheel of negative size. Each was exit 6 with uv's words
(`Multiple active package entries found for alpha`; a TOML parse error at some column) and no file named; now the
lock is refused when read, naming it and the entry (exit 2), before anything is built; the active one stays."""

from __future__ import annotations

import re
from pathlib import Path

import tiny


def twice(text: str) -> str:
    entry = text[text.index("[[packages]]") : text.index("[tool.provision]")]
    return text.replace(entry, entry + entry, 1)


def test_a_lock_uv_would_refuse_is_refused_before_anything_is_built(
    tmp_path: Path, index_server, provision_bin: str
) -> None:
    tool = tiny.make_tool(tmp_path, provision_bin, tiny.index(index_server))
    tool.create("tiny", "--no-checks")
    made = tmp_path / "made" / "pylock.tiny.toml"
    made.parent.mkdir()
    tool("lock", "tiny", "-o", str(made))
    # edited by hand, as no lock should be
    text = re.sub(r'packages_sha256 = "[0-9a-f]+"\n', "", made.read_text())
    lock = tmp_path / "pylock.tiny.toml"
    builds = tool.builds()
    for edit, said in (
        (twice, "packages[1]: alpha is listed twice, with no marker"),
        (
            lambda t: t.replace("hashes = {", "size = -5, hashes = {", 1),
            "packages[0]: alpha has a file of negative size",
        ),
    ):
        lock.write_text(edit(text))
        done = tool(
            "create",
            "tiny",
            "--name",
            "other",
            "--no-checks",
            "--lock",
            str(lock),
            "--python",
            tiny.PY,
            check=False,
        )
        assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
        assert (
            done.stderr.startswith(f"error: {lock}: not a usable PEP 751 lock ({said}")
            and "\nhint: " in done.stderr
        ), done.stderr
        assert tool.builds() == builds and "creating the venv" not in done.stderr
        assert tool.envs()["tiny"]["active"] is True
