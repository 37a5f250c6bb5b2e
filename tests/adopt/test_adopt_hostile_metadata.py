"""`provision adopt` reads a venv it did not build: a .dist-info file there that is a pipe (METADATA, RECORD, WHEEL,
direct_url.json) must be read past as drift reads past it, never waited on; the rest of the venv is still adopted.
Real venv built by uv, real index on 127.0.0.1, the installed provision as a process."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from launch import run_provision
from test_adopt import Setup
from wheelhouse import Index, IndexServer


def alpha_venv(tmp_path: Path, index_server: IndexServer, provision_bin: str) -> tuple[Index, Setup, Path]:
    """A venv built by uv holding alpha 1.0 from the index `main`: (the index, the Setup, its site-packages)."""
    served = index_server.index("main")
    served.add("alpha", "1.0")
    setup = Setup(tmp_path, provision_bin)
    return served, setup, setup.build(served.url, "alpha==1.0")


def planted(site: Path, name: str) -> Path:
    """A .dist-info of `name` (NAME-VERSION) that no wheel on the index installed: its METADATA and RECORD, as a tool
    other than uv or pip might leave them."""
    info = site / f"{name}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {name.split('-')[0]}\nVersion: {name.split('-')[1]}\n\n"
    )
    (info / "RECORD").write_text(f"{name}.dist-info/METADATA,,\n")
    return info


@pytest.mark.timeout(200)
def test_adopt_reads_past_metadata_files_that_are_pipes(
    tmp_path: Path, index_server, provision_bin: str
) -> None:
    served, setup, site = alpha_venv(tmp_path, index_server, provision_bin)
    for name, pipes in (("beta-2.0", ("METADATA", "RECORD")), ("gamma-3.0", ("WHEEL", "direct_url.json"))):
        info = planted(site, name)
        for pipe in pipes:
            (info / pipe).unlink(missing_ok=True)
            os.mkfifo(info / pipe)
    variables = {
        "PROVISION_HOME": str(tmp_path / "home"),
        "PROVISION_INDEX_DEFAULT": served.url,
        **setup.cache,
    }
    done = run_provision("adopt", "old", setup.venv, "--json", timeout=60, env=variables)
    assert done.returncode == 0, done.stderr
    adopted = json.loads(done.stdout)
    assert [m["name"] for m in adopted["matched"]] == ["alpha"]
    assert sorted(u["name"] for u in adopted["unmatched"]) == ["beta", "gamma"], adopted["unmatched"]
