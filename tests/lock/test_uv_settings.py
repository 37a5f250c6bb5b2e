"""provision runs uv with the settings it decides: an inherited UV_* variable that bends resolution (UV_OVERRIDE with
UV_EXTRA_INDEX_URL pinned a package from another index past the profile's index rules) is left out of uv's
environment and named in a note; those it honours (UV_CACHE_DIR, UV_LINK_MODE, UV_HTTP_TIMEOUT...) are named by -v and
checked by uv's own rules before anything runs (exit 2 naming the variable, where uv failed later in its words, exit 6),
as is PROVISION_INDEX_<NAME>."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import tiny

from provision.errors import InputError
from provision.stacks import uvsettings


def test_inherited_uv_settings_that_bend_resolution_never_reach_uv(
    tool: tiny.Tool, tmp_path: Path, index_server
) -> None:
    evil = index_server.index("evil")
    evil.add("alpha", "9.0")
    overrides = tmp_path / "overrides.txt"
    overrides.write_text("alpha==9.0\n")
    constraints = tmp_path / "constraints.txt"
    constraints.write_text("alpha==9.0\n")
    bending = {
        "UV_OVERRIDE": str(overrides),
        "UV_EXTRA_INDEX_URL": evil.url,
        "UV_INDEX": f"evil={evil.url}",
        "UV_CONSTRAINT": str(constraints),
        "UV_INDEX_STRATEGY": "unsafe-best-match",
        "UV_PRERELEASE": "allow",
        "UV_FIND_LINKS": str(tmp_path),
        "UV_EXCLUDE_NEWER": "2000-01-01T00:00:00Z",
    }
    out = tmp_path / "pylock.tiny.toml"
    # alpha 9.0 from evil, without a word
    attack = {
        "UV_OVERRIDE": str(overrides),
        "UV_EXTRA_INDEX_URL": evil.url,
    }
    for variables in (attack, bending):
        done = tool("-v", "lock", "tiny", "--json", "-o", str(out), env=variables)
        versions = {p["name"]: (p["version"], p["url"]) for p in json.loads(done.stdout)["packages"]}
        assert versions["alpha"][0] == "1.0" and "/evil/" not in versions["alpha"][1], versions
        note = next(line for line in done.stderr.splitlines() if line.startswith("note: UV_"))
        assert all(name in note for name in variables) and "not passed to uv" in note, note
        assert "uv settings honoured from the environment: UV_CACHE_DIR=" in done.stderr, done.stderr
    made = tool("create", "tiny", "--python", tiny.PY, "--no-checks", "--lock", str(out), env=bending)
    assert "note: UV_" in made.stderr
    assert not evil.requests, evil.requests  # nothing of it was asked for


@pytest.mark.parametrize(
    ("variable", "value", "said"),
    [
        ("PROVISION_INDEX_DEFAULT", " ", "expected an http(s) or file URL"),
        ("PROVISION_INDEX_DEFAULT", "not a url", "expected an http(s) or file URL"),
        ("PROVISION_INDEX_DEFAULT", "http://[::1", "is not a valid URL"),
        ("PROVISION_INDEX_DEFAULT", ":99999", "expected an http(s) or file URL"),
        ("PROVISION_INDEX_DEFAULT", "http://127.0.0.1:99999/simple", "is not a valid URL"),
        ("UV_LINK_MODE", "", "is not one of uv's link modes"),
        ("UV_HTTP_TIMEOUT", "abc", "is not a whole number of seconds"),
        ("UV_CONCURRENT_DOWNLOADS", "0", "is below 1"),
        ("UV_CACHE_DIR", "/dev/null", "is not a folder"),
        ("UV_NATIVE_TLS", "maybe", "is not true or false"),
        # provision's own requests: a lock's RECORD reads ended in a warning naming no variable
        ("REQUESTS_CA_BUNDLE", "/nonexistent/ca.pem", "no such file or folder of CA certificates"),
    ],
)
def test_a_variable_uv_would_refuse_is_an_input_error_naming_it_before_anything_runs(
    tool: tiny.Tool, tmp_path: Path, variable: str, value: str, said: str
) -> None:
    for args in (
        ("lock", "tiny", "-o", str(tmp_path / "pylock.tiny.toml")),
        ("create", "tiny", "--python", tiny.PY),
    ):
        done = tool(*args, env={variable: value}, check=False)
        lines = done.stderr.strip().splitlines()
        assert done.returncode == 2 and "Traceback" not in done.stderr, (args, done.stderr)
        assert (
            lines[-2].startswith(f"error: {variable}")
            and said in lines[-2]
            and lines[-1].startswith("hint: ")
        ), lines
        assert "resolving" not in done.stderr and not tool.builds()
    assert not (tmp_path / "pylock.tiny.toml").exists()


def test_values_uv_takes_are_honoured_and_empty_ones_are_unset() -> None:
    kept = uvsettings.honoured(
        {
            "UV_HTTP_TIMEOUT": "",
            "UV_CONCURRENT_DOWNLOADS": "4",
            "UV_LINK_MODE": "copy",
            "UV_INDEX_MAIN_PASSWORD": "s3cret",
            "UV_OVERRIDE": "x.txt",
            "UV_NATIVE_TLS": "yes",
        }
    )
    assert kept == {
        "UV_CONCURRENT_DOWNLOADS": "4",
        "UV_LINK_MODE": "copy",
        "UV_INDEX_MAIN_PASSWORD": "s3cret",
        "UV_NATIVE_TLS": "yes",
    }
    assert uvsettings.left_out(
        {"UV_OVERRIDE": "x", "UV_INDEX": "http://h/", "UV_INDEX_URL": "http://h/", "UV_CACHE_DIR": "/tmp"}
    ) == ["UV_INDEX", "UV_OVERRIDE"]
    with pytest.raises(InputError, match="UV_DEFAULT_INDEX"):
        uvsettings.honoured({"UV_DEFAULT_INDEX": "not a url"})
    with pytest.raises(InputError, match="UV_HTTP_RETRIES"):
        uvsettings.honoured({"UV_HTTP_RETRIES": "-1"})


def test_uv_found_in_a_thread_is_asked_once_and_an_old_one_is_said_in_the_callers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """binary_soon asks `uv --version` in a thread while lock reads the profile; binary() then takes its answer (one
    run of uv, however the two meet, its failure too: a uv that hangs costs its timeout once), and a uv older than
    MINIMUM is the caller's one-line error, never a thread's."""
    import uv as uv_package

    from provision.errors import ToolError
    from provision.stacks import uvtool

    asked = tmp_path / "asked"
    fake = tmp_path / "uv"
    fake.write_text(f"#!/bin/sh\nsleep 0.2\necho x >> {asked}\necho 'uv 0.1.0 (x86_64-unknown-linux-gnu)'\n")
    fake.chmod(0o755)
    monkeypatch.setattr(uv_package, "find_uv_bin", lambda: str(fake))
    forget = (uvtool._found.cache_clear, uvtool._located.cache_clear)  # a new process
    for each in forget:
        each()
    try:
        uvtool.binary_soon()
        for _ in range(2):
            with pytest.raises(ToolError, match=r"uv 0\.1\.0 at .* is older than"):
                uvtool.binary()
        for each in forget:
            each()
        fake.write_text(f"#!/bin/sh\necho x >> {asked}\necho 'uv 9.9.9 (x86_64-unknown-linux-gnu)'\n")
        uvtool.binary_soon()
        assert uvtool.binary() == str(fake)
        assert uvtool.binary() == str(fake)
    finally:
        for each in forget:
            each()
    # each uv asked once: the old one's error is kept for the process
    assert asked.read_text().count("x") == 2


def test_uv_found_in_a_thread_meets_no_half_read_sysconfig() -> None:
    """Python 3.11 fills sysconfig's variables unguarded on their first use: binary_soon's thread (uv's find_uv_bin)
    and the caller's packaging.tags met them half filled and the thread died on EXE = None, one lock in three under
    load ("Exception in thread uv-binary", then the lock's own error second). With the interpreter switching threads
    every microsecond this failed 25 runs of 40 before binary_soon read them in the caller's thread first."""
    script = (
        "import sys, sysconfig\n"
        "sys.setswitchinterval(1e-6)\n"
        "from provision.stacks import uvtool\n"
        "uvtool.binary_soon()\n"
        "for _ in range(3):\n"
        "    sysconfig.get_config_vars()\n"
        "print(uvtool.binary())\n"
    )
    for _ in range(12):
        done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
        assert done.returncode == 0 and not done.stderr, done.stderr
