"""A hostile lock given to `provision report --lock`: a wheel's sha256 that is not 64 hex digits. The sha256 names the
folder provision keeps a fetched wheel in ($XDG_CACHE_HOME/provision/wheels/<sha256>/), so one holding `..` made
folders outside that cache, and whatever the value, the whole wheel was downloaded before the mismatch was found.
Refused now before anything is downloaded or made: exit 6, one line naming the lock, the package and the wheel."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from conftest import ROOT
from launch import run_provision
from locks import sealed

H200 = ROOT / "docs/machines/h200.probe.json"
TAG = "py3-none-manylinux_2_28_x86_64"


def test_a_sha256_that_is_not_hex_is_refused_before_any_download(
    index_server, provision_bin: str, tmp_path: Path
) -> None:
    served = index_server.index("default")
    wheel = served.add("nvidia-x", "1.0", tag=TAG, files={"nvidia/x/lib/k.cubin": b"\x7fELF" + bytes(60)})
    url = served.url.replace("/simple", "/files/") + wheel.name
    xdg = tmp_path / "cache" / "xdg"
    escape = "../../../../escaped/x"  # from XDG_CACHE_HOME/provision/wheels/: out to tmp_path/escaped
    for digest in (escape, "zz", "g" * 64):
        doc = {
            "lock-version": "1.0",
            "created-by": "tests",
            "packages": [
                {
                    "name": "nvidia-x",
                    "version": "1.0",
                    "wheels": [{"name": wheel.name, "url": url, "hashes": {"sha256": digest}}],
                }
            ],
        }
        lock = tmp_path / "pylock.hostile.toml"
        lock.write_text(sealed(doc))
        before = len(served.requests)
        done: subprocess.CompletedProcess[str] = run_provision(
            "report",
            "--lock",
            str(lock),
            "--machine",
            str(H200),
            "--json",
            timeout=120,
            env={**os.environ, "UV_CACHE_DIR": str(tmp_path / "uv"), "XDG_CACHE_HOME": str(xdg)},
        )
        lines = done.stderr.strip().splitlines()
        assert done.returncode == 6 and len(lines) == 2 and "Traceback" not in done.stderr, (
            digest,
            done.stderr,
        )
        assert lines[0].startswith(
            f"error: {lock}: nvidia-x 1.0: the wheel {url} has a sha256 that is not 64 hex digits"
        ), lines[0]
        assert "nothing was downloaded" in lines[0] and lines[1].startswith("hint: re-lock it"), lines
        assert served.requests[before:] == [], (digest, served.requests[before:])
        assert not (tmp_path / "escaped").exists(), "a folder was made outside provision's cache"
