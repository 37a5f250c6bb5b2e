"""uv's own log (RUST_LOG) is never part of what provision says: whatever RUST_LOG the caller set (trace, a target's
debug, a filter with spans), a lock that fails says uv's error in one line, with no log line in it, on stderr and in
the --json error document, and no credential of an index URL anywhere (uv's trace logs every URL it asks)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import tiny
from launch import run_provision

PY = f"{sys.version_info[0]}.{sys.version_info[1]}"
PASSWORD = "s3cret-Pa55word"


def lock(tmp_path: Path, url: str, rust_log: str | None, *extra: str) -> subprocess.CompletedProcess[str]:
    tiny.profile(tmp_path, packages='alpha = "==1.0"\ngamma = "==1.0"')  # the index has no gamma
    variables: dict[str, str | None] = {
        **os.environ,
        "PROVISION_HOME": str(tmp_path / "home"),
        "PROVISION_PROFILES": str(tmp_path),
        "PROVISION_INDEX_DEFAULT": url,
        "RUST_LOG": rust_log,
    }
    return run_provision(
        "lock",
        "tiny",
        "--python",
        PY,
        "-o",
        str(tmp_path / "pylock.toml"),
        *extra,
        timeout=300,
        env=variables,
    )


@pytest.mark.parametrize(
    "rust_log", ["trace", "uv=debug", "debug,uv_resolver=trace", "uv_client::cached_client=debug"]
)
def test_a_failed_lock_says_uvs_error_without_its_log_whatever_rust_log(
    tmp_path: Path, index_server, rust_log: str
) -> None:
    served = tiny.index(index_server)
    served.password = PASSWORD
    url = served.url.replace("http://", f"http://alice:{PASSWORD}@")
    plain = lock(tmp_path, url, None)
    done = lock(tmp_path, url, rust_log)
    assert done.returncode == plain.returncode == 6, done.stderr
    said = done.stderr.strip().splitlines()[-2:]
    # the same error and hint, word for word
    assert said == plain.stderr.strip().splitlines()[-2:], done.stderr
    assert said[0].startswith("error: ") and "gamma" in said[0] and said[1].startswith("hint: "), done.stderr
    for word in ("DEBUG", "TRACE", "INFO", "WARN", "uv_client", "\x1b", PASSWORD):
        assert word not in done.stderr + done.stdout, done.stderr

    as_json = lock(tmp_path, url, rust_log, "--json")
    assert as_json.returncode == 6
    assert json.loads(as_json.stdout) == json.loads(lock(tmp_path, url, None, "--json").stdout)
    for word in ("DEBUG", "TRACE", "INFO", "WARN", "uv_client", PASSWORD):
        assert word not in as_json.stdout + as_json.stderr, as_json.stdout


def test_verbose_shows_no_credential_from_uvs_trace(tmp_path: Path, index_server) -> None:
    """-v shows uv's command line and, when uv fails, its stderr: the caller's trace (URLs quoted in backticks, the
    path's token last) is not uv's to write there, and a token in an index's path is redacted in what is."""
    token = "AbCdEf0123456789XyZ0123"
    served = tiny.index(index_server, name=token)
    served.password = PASSWORD
    url = served.url.replace("http://", f"http://alice:{PASSWORD}@")
    done = lock(tmp_path, url, "trace", "-v")
    assert done.returncode == 6, done.stderr
    assert PASSWORD not in done.stderr and token not in done.stderr and "$ " in done.stderr
    # uv logs what provision asks of it, not the caller's trace
    assert "TRACE " not in done.stderr, done.stderr
