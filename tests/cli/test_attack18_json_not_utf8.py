"""A path whose bytes are not UTF-8 (a real folder named with the byte 0xff) in a --json document: it was written as
the lone surrogate `\\udcff`, no Unicode character (`json.loads` takes it, and the string then cannot be encoded as
UTF-8; jq turns it into U+FFFD without a word). Now every string is valid Unicode, the byte shown as U+FFFD, and the
top-level `not_utf8` gives the JSON Pointer of each such string and its exact bytes in base64 (docs/json.md)."""

from __future__ import annotations

import base64
import json
import os
import subprocess
from pathlib import Path

import launch
from test_json_contract import section

from provision.views.ui import valid_unicode


def strict(stdout: bytes) -> dict:
    """The document, read as a strict reader reads it: UTF-8, and every string of it valid Unicode."""
    document = json.loads(stdout.decode("utf-8"))
    json.dumps(document, ensure_ascii=False).encode("utf-8")
    return document


def at(document: dict, pointer: str) -> object:
    """What a JSON Pointer (RFC 6901) names in `document`."""
    found: object = document
    for step in pointer.split("/")[1:]:
        step = step.replace("~1", "/").replace("~0", "~")
        found = found[int(step)] if isinstance(found, list) else found[step]  # type: ignore[index]
    return found


def test_a_folder_named_with_0xff_is_valid_unicode_and_its_bytes_are_given(tmp_path: Path) -> None:
    folder = Path(os.fsdecode(bytes(tmp_path) + b"/h\xffme"))
    folder.mkdir()
    home = folder / "provision"
    env = launch.environment({"PROVISION_HOME": str(home), "PYTHONIOENCODING": "utf-8"})

    done = subprocess.run(launch.argv(("envs", "--json")), capture_output=True, env=env, timeout=60)
    assert done.returncode == 0 and b"\\udc" not in done.stdout, done.stdout
    shown = strict(done.stdout)
    assert shown["home"] == str(home).replace("\udcff", "\ufffd")
    assert shown["not_utf8"] == [{"pointer": "/home", "bytes": base64.b64encode(os.fsencode(home)).decode()}]
    assert os.fsencode(home) == base64.b64decode(shown["not_utf8"][0]["bytes"])  # the folder, given back

    # an error document names the home in its message
    done = subprocess.run(launch.argv(("switch", "nope", "--json")), capture_output=True, env=env, timeout=60)
    assert done.returncode == 7 and b"\\udc" not in done.stdout, done.stdout
    error = strict(done.stdout)
    (entry,) = error["not_utf8"]
    assert entry["pointer"] == "/error/message" and at(error, entry["pointer"]) == error["error"]["message"]
    assert os.fsencode(home) in base64.b64decode(entry["bytes"])
    documented = section("Bytes that are not UTF-8")
    assert {"not_utf8", "pointer", "bytes", "key"} <= documented


def test_member_names_lists_and_surrogates_that_stand_for_no_byte() -> None:
    """Member names too (with `"key": true`, their pointer the member's), paths in lists, `/` and `~` escaped in a
    pointer, and a surrogate read from a JSON record (U+D800) that stands for no byte (bytes null)."""
    path = Path(os.fsdecode(b"/srv/a\xfe"))
    clean, found = valid_unicode(
        {"files": {"x/\udcff~": [path, "ok", "\ud800"]}, "n": 1.5, "none": None, 3: True}
    )
    assert clean == {
        "files": {"x/\ufffd~": ["/srv/a\ufffd", "ok", "\ufffd"]},
        "n": 1.5,
        "none": None,
        3: True,
    }
    assert found == [
        {"pointer": "/files/x~1\ufffd~0", "bytes": base64.b64encode(b"x/\xff~").decode(), "key": True},
        {"pointer": "/files/x~1\ufffd~0/0", "bytes": base64.b64encode(b"/srv/a\xfe").decode()},
        {"pointer": "/files/x~1\ufffd~0/2", "bytes": None},
    ]
    assert valid_unicode({"a": "caf\u00e9 \U0001f600"}) == ({"a": "caf\u00e9 \U0001f600"}, [])
