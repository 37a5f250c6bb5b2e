"""`provision adopt` (and `lock --env`) read each .dist-info's METADATA, RECORD, WHEEL and direct_url.json whole: a
venv holding one that is enormous (an 8 GB sparse METADATA, a RECORD of gigabytes) took the machine's memory, or
ended in `internal error: MemoryError` with a build folder left behind. Now the header files are read to 1 MiB and a
RECORD to 64 MiB, as the drift check reads them: the rest of the venv is adopted, that distribution named unmatched."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from launch import argv, environment
from test_adopt_hostile_metadata import alpha_venv, planted

LIMITED = """import resource, os, sys
resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))
os.execv(sys.argv[1], sys.argv[1:])"""


@pytest.mark.timeout(200)
def test_adopt_reads_huge_metadata_files_in_bounded_memory(
    tmp_path: Path, index_server, provision_bin: str
) -> None:
    served, setup, site = alpha_venv(tmp_path, index_server, provision_bin)
    for name, huge in (("beta-2.0", "METADATA"), ("gamma-3.0", "RECORD")):
        info = planted(site, name)
        with open(info / huge, "r+b") as handle:
            handle.truncate(8 << 30)  # sparse: no disk taken
    variables = {
        "PROVISION_HOME": str(tmp_path / "home"),
        "PROVISION_INDEX_DEFAULT": served.url,
        **setup.cache,
    }
    done = subprocess.run(
        [sys.executable, "-c", LIMITED, *argv(("adopt", "old", str(setup.venv), "--json"))],
        capture_output=True,
        text=True,
        timeout=180,
        env=environment(variables),
    )
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr[-2000:]
    adopted = json.loads(done.stdout)
    assert [m["name"] for m in adopted["matched"]] == ["alpha"]
    unmatched = {u["name"]: u["reason"] for u in adopted["unmatched"]}
    assert set(unmatched) == {"beta", "gamma"}, unmatched
    assert "larger than 64 MiB" in unmatched["gamma"], unmatched
