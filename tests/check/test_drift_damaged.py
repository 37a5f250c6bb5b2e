"""A damaged drift cache or RECORD in a built environment: a finding or a fresh read, never a traceback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import tiny

from provision.envs import drift, filehash

TOOL_WITH_ENV = True  # conftest's `tool`: a home with profile tiny served on 127.0.0.1, environment tiny made


build_of = tiny.build_of


def drift_check(tool: tiny.Tool) -> dict:
    done = tool("check", "--only", "drift", "--json", check=False)
    assert "Traceback" not in done.stderr and done.returncode in (0, 1), done.stderr
    return json.loads(done.stdout)


@pytest.mark.parametrize(
    "files", ['{"K": 5}', "[1, 2]", '{"K": [SIZE]}', '{"K": {"0": SIZE}}', "[" * 100_000]
)
def test_a_damaged_drift_cache_is_read_again_not_a_traceback(tmp_path: Path, files: str) -> None:
    site = tmp_path / "site"
    site.mkdir()
    (site / "m.py").write_text("x = 1\n")
    size = (site / "m.py").stat().st_size
    cache_file = tmp_path / drift.CACHE_NAME
    cache_file.write_text(
        f'{{"version": {filehash.CACHE_VERSION}, "files": {files.replace("K", "m.py").replace("SIZE", str(size))}}}'
    )
    cache = filehash.Cache(cache_file, site)
    found = filehash.digests([filehash.Wanted(key="m.py", path=str(site / "m.py"), mode="sha256")], cache)
    assert found.found == {"m.py": filehash.record_digest(site / "m.py", "sha256")} and found.hashed == 1


def test_a_drift_cache_that_is_a_pipe_is_not_waited_on(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / drift.CACHE_NAME)
    code = (
        f"from pathlib import Path; from provision.envs import filehash; "
        f"assert filehash.Cache(Path({str(tmp_path / drift.CACHE_NAME)!r}), Path('.')).entries == {{}}"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=30)  # a hang is TimeoutExpired


def test_a_record_row_with_a_nul_byte_is_a_finding_not_a_traceback(tool: tiny.Tool) -> None:
    site = drift.site_packages(build_of(tool) / "venv")
    (record,) = site.glob("alpha-*.dist-info/RECORD")
    record.write_text(record.read_text() + "alpha/a\x00b.py,sha256=AAAA,3\nbad\x00dir/x.py,sha256=AAAA,3\n")
    report = drift_check(tool)
    (check,) = report["checks"]
    found = [(f["kind"], f["path"]) for f in check["details"]["findings"]]
    if sys.version_info >= (3, 11):  # csv reads a NUL in a field since 3.11
        assert found == [("missing", "alpha/a\x00b.py"), ("missing", "bad\x00dir/x.py")]  # the rest as before
    else:  # 3.10's csv refuses the line: the RECORD itself is the finding, named as unreadable
        assert found == [("modified", f"{record.parent.name}/RECORD")], check["details"]["findings"]
    done = tool("restore", "tiny", "--no-checks", "--dry-run", check=False)
    assert "Traceback" not in done.stderr, done.stderr
