"""The seconds a variable gives: PROVISION_CHECK_TIMEOUT was read with a bare float() where the first payload ran
(`abc`: internal error: ValueError, exit 3, in create after the install; `-5` or `0`: every check an ERROR "timed out
after -5 s"), and PROVISION_HTTP_TIMEOUT (or PROVISION_NVML_START_TIMEOUT) past what a socket's or a thread's wait can
hold (`1e308`, `9999999999999`) was `internal error: OverflowError`. Each is now one rule: a positive number of seconds
up to a week, else exit 2 naming the variable, before anything runs."""

from __future__ import annotations

from pathlib import Path

import tiny


def test_a_check_timeout_that_is_no_number_of_seconds_is_refused_before_anything_runs(
    tmp_path: Path, index_server, provision_bin: str
) -> None:
    tool = tiny.make_tool(tmp_path, provision_bin, tiny.index(index_server))
    tool.create("tiny", "--no-checks")
    for value in ("abc", "-5", "0", "1e308"):
        for args in (("check", "tiny"), ("create", "tiny", "--name", "other", "--python", tiny.PY)):
            done = tool(*args, check=False, env={"PROVISION_CHECK_TIMEOUT": value})
            assert done.returncode == 2 and "Traceback" not in done.stderr, (value, args[0], done.stderr)
            assert done.stderr.startswith(
                f"error: PROVISION_CHECK_TIMEOUT={value!r} is not a number of seconds\nhint: "
            ), done.stderr
            assert "... " not in done.stderr  # nothing ran: no check, no lock, no venv
    assert set(tool.envs()) == {"tiny"}


def test_an_index_timeout_past_a_sockets_range_is_refused(
    tmp_path: Path, index_server, provision_bin: str
) -> None:
    tool = tiny.make_tool(tmp_path, provision_bin, tiny.index(index_server))
    for value in ("1e308", "9999999999999"):
        done = tool(
            "lock",
            "tiny",
            "-o",
            str(tmp_path / "pylock.tiny.toml"),
            check=False,
            env={"PROVISION_HTTP_TIMEOUT": value},
        )
        assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
        assert f"error: PROVISION_HTTP_TIMEOUT={value!r} is not a number of seconds\nhint: " in done.stderr, (
            done.stderr
        )
