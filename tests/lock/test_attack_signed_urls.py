"""An index whose file links are signed URLs (`.../alpha-1.0-py3-none-any.whl?X-Amz-Signature=...`, as a proxy in front
of object storage serves them). The wheel's file name was taken as everything after the URL's last `/`, query
included: `lock --json` listed the file as `alpha-1.0-py3-none-any.whl?X-Amz-Signature=<secret>`, `report --lock`
printed the signature in its progress lines and kept the wheel under that name, and the index client passed over every
such link, its name not being a wheel's. A file name is the URL path's last part now (one helper, urls.filename)."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import tiny
from conftest import ROOT
from hostile_http import HostileServer, Route
from launch import run_provision
from wheelhouse import build_wheel

from provision.stacks import index

SIGNATURE = "Sup3rS3cretSignature0123456789abcdef"
PY = f"{sys.version_info[0]}.{sys.version_info[1]}"


@pytest.fixture
def signed(tmp_path: Path) -> Iterator[HostileServer]:
    wheel = build_wheel(tmp_path / "built", "alpha", "1.0")
    server = HostileServer()
    page = f'<html><body><a href="/files/{wheel.name}?X-Amz-Signature={SIGNATURE}">{wheel.name}</a></body></html>'
    server.routes["/simple/alpha/"] = Route(page.encode(), "text/html")
    # the server routes by path, query aside
    server.routes[f"/files/{wheel.name}"] = Route(wheel.read_bytes())
    yield server
    server.close()


def test_a_signed_urls_query_is_no_part_of_the_wheels_name(signed: HostileServer, tmp_path: Path) -> None:
    (listed,) = index.project_files(signed.url + "/simple", "alpha", keep=lambda name: name.endswith(".whl"))
    assert listed.filename == "alpha-1.0-py3-none-any.whl" and listed.url.endswith(
        f"?X-Amz-Signature={SIGNATURE}"
    )

    tiny.profile(tmp_path)
    lock = tmp_path / "pylock.tiny.toml"
    env = {
        **os.environ,
        "PROVISION_PROFILES": str(tmp_path),
        "PROVISION_INDEX_DEFAULT": signed.url + "/simple",
        "XDG_CACHE_HOME": str(tmp_path / "xdg"),
        "PROVISION_HTTP_TIMEOUT": "10",
    }
    done = run_provision("lock", "tiny", "--python", PY, "-o", str(lock), "--json", env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    (package,) = json.loads(done.stdout)["packages"]
    assert package["file"] == "alpha-1.0-py3-none-any.whl", package["file"]
    assert SIGNATURE not in done.stderr

    done = run_provision(
        "report",
        "--lock",
        str(lock),
        "--machine",
        str(ROOT / "docs/machines/h200.probe.json"),
        env={**env, "UV_CACHE_DIR": str(tmp_path / "empty-uv-cache")},
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    # fetched: the signature went to the server
    assert "fetching alpha-1.0-py3-none-any.whl" in done.stderr, done.stderr
    assert SIGNATURE not in done.stderr + done.stdout, [
        line for line in (done.stderr + done.stdout).splitlines() if SIGNATURE in line
    ]
    assert [p.name for p in (tmp_path / "xdg" / "provision" / "wheels").glob("*/*.whl")] == [
        "alpha-1.0-py3-none-any.whl"
    ]
