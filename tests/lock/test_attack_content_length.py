"""A hostile index whose wheel answers a HEAD with a Content-Length of 10 TB (and no range requests), its page giving no
size: `profiles new` reads the wheel's METADATA by downloading the wheel, and took the server's own claim as the most it
would read, in place of the 4 GiB bound (README: "a wheel the size its lock or index gives (else 4 GiB)"). An endless
answer then filled TMPDIR for as long as the server went on (here until its own 256 MiB cap). The claim can only
lower the bound now: the GET saying 10 TB is refused before its body is read, one line naming the URL (exit 5)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from hostile_http import JSON_TYPE, HostileServer, Route
from launch import run_provision

pytestmark = pytest.mark.timeout(120)
SGLANG = "sglang-0.5.23-py3-none-any.whl"
WHEEL_PATH = f"/files/{SGLANG}"


def test_a_content_length_claim_never_raises_the_download_bound(
    hostile: HostileServer, tmp_path: Path
) -> None:
    entry = {"filename": SGLANG, "url": WHEEL_PATH, "hashes": {}}  # no size (PEP 700), no PEP 658 metadata
    hostile.routes["/simple/sglang/"] = Route(
        json.dumps({"meta": {"api-version": "1.1"}, "files": [entry]}).encode(), JSON_TYPE
    )
    hostile.routes[WHEEL_PATH] = Route(b"", how="endless", headers={"Content-Length": str(10**13)})
    spool = tmp_path / "tmp"
    spool.mkdir()
    done = run_provision(
        "profiles",
        "new",
        "mine",
        "--from",
        "sglang==0.5.23",
        "--index",
        f"default={hostile.url}/simple",
        "-o",
        str(tmp_path / "mine.toml"),
        timeout=90,
        env={**os.environ, "PROVISION_HTTP_TIMEOUT": "5", "TMPDIR": str(spool)},
    )
    lines = [line for line in done.stderr.strip().splitlines() if not line.startswith("... ")]
    assert done.returncode == 5 and len(lines) == 2 and "Traceback" not in done.stderr, done.stderr
    assert lines[0] == (
        f"error: {hostile.url}{WHEEL_PATH}: larger than the 4,294,967,296 bytes provision reads of it "
        "(it says 10,000,000,000,000 bytes); nothing more was read"
    ), lines[0]
    assert hostile.sent.get(WHEEL_PATH, 0) < 16 << 20, (
        f"{hostile.sent[WHEEL_PATH]:,} bytes sent: more than socket buffers hold"
    )
    assert not any(spool.iterdir()) and not (tmp_path / "mine.toml").exists()
