"""Adopting a venv whose folder's name holds a byte that is not UTF-8 (0xff, kept by Python as a lone surrogate), in a
UTF-8 locale: its lock cannot hold that name. adopt keeps the venv registered and says why it is not locked, as for any
lock it cannot make; `lock --env` says so in one line (exit 2). It said 'this locale's encoding (utf-8) cannot hold'
the byte and 'run it in a UTF-8 locale (LC_ALL=C.UTF-8)' to a user who was in that very locale, and adopt ended there.
A UTF-8 encoding refusing a name is still said as that, never as the locale's (cli/main.py)."""

from __future__ import annotations

from pathlib import Path

from test_adopt import Setup


def test_adopting_a_venv_in_a_folder_that_is_not_utf8_never_blames_a_utf8_locale(
    tmp_path: Path, provision_bin: str, index_server
) -> None:
    setup = Setup(tmp_path, provision_bin)
    served = index_server.index("main")
    served.add("alpha", "1.0")
    setup.build(served.url, "alpha==1.0")  # uv makes no venv at such a path: made, then its folder renamed
    setup.venv = (tmp_path / "srv").rename(tmp_path / "s\udcffrv") / "venv"
    adopted = setup.json("adopt", "old", str(setup.venv), index=served.url, LC_ALL="C.UTF-8")
    assert adopted["adopted"] == "old" and adopted["lock"] is None, adopted
    assert "not UTF-8" in adopted["lock_error"]["message"], adopted
    assert "provision lock --env old" in adopted["lock_error"]["hint"], adopted
    done = setup("lock", "--env", "old", code=None, LC_ALL="C.UTF-8")
    assert done.returncode == 2 and "UTF-8 locale" not in done.stderr, done.stderr
    assert "its path holds a byte that is not UTF-8" in done.stderr, done.stderr
    assert "hint: rename that folder to a UTF-8 name" in done.stderr, done.stderr
