"""An index answering with a redirect to somewhere provision does not fetch (file:///etc/passwd, gopher://, a port
that is no number): requests refuses the Location, and provision said the URL the user gave was wrong (exit 2, `hint:
give an http:// or https:// URL with a host`), though that URL was fine and it was the index that led astray. Now it
is the index failing (exit 5), one line naming the URL asked, the password in it as ****, and nothing read there."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hostile_http import HostileServer, Route
from launch import run_provision

pytestmark = pytest.mark.timeout(120)


@pytest.mark.parametrize(
    "target", ["file:///etc/passwd", "gopher://127.0.0.1/x", "http://127.0.0.1:abc/simple/sglang/"]
)
def test_a_redirect_to_what_provision_does_not_fetch_is_the_index_failing(
    hostile: HostileServer, tmp_path: Path, target: str
) -> None:
    hostile.routes["/simple/sglang/"] = Route(status=302, headers={"Location": target})
    index = hostile.url.replace("http://", "http://alice:s3cretpw@") + "/simple"
    done = run_provision(
        "profiles",
        "new",
        "mine",
        "--from",
        "sglang==0.5.23",
        "--index",
        f"default={index}",
        "-o",
        str(tmp_path / "mine.toml"),
        timeout=60,
        env={**os.environ, "PROVISION_HTTP_TIMEOUT": "5"},
    )
    lines = [line for line in done.stderr.strip().splitlines() if not line.startswith("... ")]
    assert done.returncode == 5 and len(lines) == 2 and "Traceback" not in done.stderr, done.stderr
    assert lines[0].startswith(
        f"error: http://****@127.0.0.1:{hostile.port}/simple/sglang/: the index redirected to a URL "
        "provision does not fetch"
    ), lines[0]
    assert "s3cretpw" not in done.stderr + done.stdout and "root:" not in done.stderr + done.stdout
    assert not (tmp_path / "mine.toml").exists()
