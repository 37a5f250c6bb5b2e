"""JSON nested deeper than Python's recursion limit in the files provision reads beside its environments: json's C
scanner raises RecursionError, not a ValueError, and where only ValueError was caught the command ended in `internal
error: RecursionError` (exit 3) without naming the file: state.json (every switch and rollback; now set aside and
rebuilt), env.json (envs, check
and the rest), a restore's BUILD/.restore-made (gc, which create runs first: no create could run on that home), and
an adopted venv's direct_url.json (adopt failed halfway, the environment registered and its lock never written)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from launch import run_provision

DEEP = "[" * 100_000


def run(home: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return run_provision("--home", str(home), *args, timeout=120, env=env)


def one_error(done: subprocess.CompletedProcess[str], code: int, names: Path) -> None:
    lines = done.stderr.strip().splitlines()
    assert (
        done.returncode == code and "internal error" not in done.stderr and "Traceback" not in done.stderr
    ), done.stderr
    assert len(lines) == 2 and str(names) in lines[0] and lines[1].startswith("hint: "), done.stderr


def a_home(tmp_path: Path) -> tuple[Path, Path]:
    """A home with one environment `x`, its build's env.json an empty record (a python in its venv: switch looks)."""
    home = tmp_path / "home"
    build = home / "builds" / "x-1"
    (build / "venv" / "bin").mkdir(parents=True)
    (build / "venv" / "bin" / "python").symlink_to(sys.executable)
    (home / "envs").mkdir()
    (home / "envs" / "x").symlink_to("../builds/x-1")
    (build / "env.json").write_text("{}")
    return home, build


def test_records_nested_too_deeply_are_one_line_naming_the_file(tmp_path: Path) -> None:
    home, build = a_home(tmp_path)
    # set aside and rebuilt (tests/envs/test_leftovers.py): switch goes on
    (home / "state.json").write_text(DEEP)
    done = run(home, "switch", "x")
    assert (
        done.returncode == 0 and "internal error" not in done.stderr and "state.json.damaged-" in done.stderr
    ), done.stderr
    (build / "env.json").write_text('{"a":' * 100_000)
    one_error(run(home, "envs"), 7, build / "env.json")
    (build / "env.json").write_text("{}")
    (build / ".restore-made").write_text(DEEP[:60_000])  # within the 64 KiB it reads
    done = run(home, "gc", "--json")
    assert done.returncode == 0 and "internal error" not in done.stderr, done.stderr
    assert json.loads(done.stdout)["removed"] == [] and (build / "env.json").exists()


def test_adopt_of_a_venv_with_a_direct_url_json_nested_too_deeply(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "uv", "venv", "-q", str(venv)], check=True, capture_output=True)
    site = next(venv.glob("lib/python3*/site-packages"))
    info = site / "foo-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: foo\nVersion: 1.0\n")
    (info / "RECORD").write_text("foo-1.0.dist-info/METADATA,,\n")
    (info / "direct_url.json").write_text('{"url":' * 100_000)
    home = tmp_path / "home"
    env = {
        **os.environ,
        "PROVISION_INDEX_DEFAULT": "http://127.0.0.1:9/simple",
        "PROVISION_HTTP_TIMEOUT": "2",
    }
    done = run(home, "adopt", "x", str(venv), "--json", env=env)
    assert done.returncode == 0 and "internal error" not in done.stderr, done.stderr
    adopted = json.loads(done.stdout)
    assert adopted["adopted"] == "x" and adopted["lock"], adopted
    assert [u["name"] for u in adopted["unmatched"]] == ["foo"], adopted["unmatched"]
