"""What a server's locale does to the output: a stdout that cannot show a home's `ô` (PYTHONIOENCODING=ascii) is one
line saying so and what to set, exit 3 as any stdout that cannot be written (it was `internal error:
UnicodeEncodeError`); a home whose name holds a byte that is not UTF-8 prints as its bytes, as `ls` does, on a
stdout of strict UTF-8 (it was the same internal error); --json shows both as valid JSON (the home's byte as U+FFFD,
its bytes in `not_utf8`)."""

from __future__ import annotations

import base64
import json
import os
import subprocess
from pathlib import Path

import launch
import tiny
from test_damage import one_error


def test_a_stdout_that_cannot_show_the_home_says_so_in_one_line(
    tmp_path: Path, provision_bin: str, index_server
) -> None:
    home = tmp_path / "hômé"
    tool = tiny.Tool(provision_bin, home, tiny.profile(tmp_path).parent, tiny.index(index_server))
    tool.create("tiny", "--no-checks")
    ascii_out = {"PYTHONIOENCODING": "ascii"}
    for args in (("envs",), ("shell-env", "tiny")):
        done = tool(*args, check=False, env=ascii_out)
        one_error(done, 3, "cannot write the output: its encoding (ascii) has no", "PYTHONIOENCODING=utf-8")
    shown = json.loads(tool("envs", "--json", env=ascii_out).stdout)
    assert shown["home"] == str(home) and [e["name"] for e in shown["environments"]] == ["tiny"]


def test_a_home_that_is_not_utf8_prints_as_its_bytes(tmp_path: Path) -> None:
    home, cache = tmp_path / "h\udcffme", tmp_path / "uv\udcff"  # the byte 0xff, as Python keeps it
    # stdout strict, as under en_US.UTF-8 (the caption names uv's cache)
    env = launch.environment(
        {"PROVISION_HOME": str(home), "UV_CACHE_DIR": str(cache), "PYTHONIOENCODING": "utf-8"}
    )
    for args, expected in ((("envs",), b"uv\xff"), (("envs", "--json"), b'"home": ')):
        done = subprocess.run(launch.argv(args), capture_output=True, env=env, timeout=60)
        assert done.returncode == 0 and b"Traceback" not in done.stderr, done.stderr
        assert expected in done.stdout, done.stdout
    shown = json.loads(done.stdout)
    # valid Unicode, the byte as U+FFFD; its exact bytes in not_utf8 (docs/json.md)
    assert (shown["home"], shown["uv_cache"]) == (
        str(home).replace("\udcff", "\ufffd"),
        str(cache)[:-1] + "\ufffd",
    )
    assert [(e["pointer"], base64.b64decode(e["bytes"])) for e in shown["not_utf8"]] == [
        ("/home", os.fsencode(home)),
        ("/uv_cache", os.fsencode(cache)),
    ]


def test_an_error_naming_a_path_that_is_not_utf8_prints_its_bytes(tmp_path: Path) -> None:
    """The `error:` line on stderr writes such a byte as it is, as stdout does (docs/exit-codes.md): it was the text
    \\udcff, which names no file; under an encoding with no byte for a character (ascii) the line still comes."""
    home = tmp_path / "h\udcffme"
    home.write_text("")  # a file where the home belongs: an error that names it
    for encoding, expected in (("utf-8", b"h\xffme"), ("ascii", b"h\xffme")):
        env = launch.environment({"PROVISION_HOME": str(home), "PYTHONIOENCODING": encoding})
        done = subprocess.run(launch.argv(("envs",)), capture_output=True, env=env, timeout=60)
        assert done.returncode != 0 and b"Traceback" not in done.stderr, done.stderr
        assert done.stderr.startswith(b"error: ") and expected in done.stderr, done.stderr
        assert b"\\udcff" not in done.stderr, done.stderr
    # a character the encoding has no byte for is still shown, as Python's stderr shows it
    home = tmp_path / "h\u00f4\udcffme"
    home.write_text("")
    env = launch.environment({"PROVISION_HOME": str(home), "PYTHONIOENCODING": "ascii"})
    done = subprocess.run(launch.argv(("envs",)), capture_output=True, env=env, timeout=60)
    assert b"h\\xf4\xffme" in done.stderr, done.stderr
