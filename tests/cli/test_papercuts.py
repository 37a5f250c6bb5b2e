"""What a new user meets first: bare `provision`, run's exit codes, the help of rollback and --home, and what `lock`
says (the nightly line only for nightlies, one row per package, what changed since the last lock, a rebuild command
that rebuilds)."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import tiny
from launch import run_provision

PY = f"{sys.version_info[0]}.{sys.version_info[1]}"


def test_bare_provision_prints_its_help_and_exits_2(provision_bin: str) -> None:
    done = run_provision(timeout=60)
    assert done.returncode == 2 and "error:" not in done.stderr
    assert done.stderr.startswith("Usage: provision [OPTIONS] COMMAND") and "\nCommands:\n" in done.stderr
    assert "  rollback " in done.stderr


def test_helps_say_what_rollback_and_home_do(provision_bin: str) -> None:
    rollback = run_provision("rollback", "--help", timeout=60).stdout
    assert "Like `cd -`, it toggles" in rollback
    group = run_provision("--help", timeout=60).stdout
    assert "Every command takes it" not in group and "commands that use environments" in " ".join(
        group.split()
    )
    refused = run_provision("probe", "--home", "/tmp", timeout=60)
    assert refused.returncode == 2  # what the help no longer promises


def test_run_exits_127_for_a_missing_command_and_126_for_one_not_executable(
    tmp_path: Path, index_server, provision_bin: str
) -> None:
    tool = tiny.make_tool(tmp_path, provision_bin, tiny.index(index_server))
    tool.create("tiny", "--no-checks")
    missing = tool("run", "tiny", "--", "no-such-command-here", check=False)
    assert missing.returncode == 127 and "command not found" in missing.stderr
    script = tmp_path / "script.sh"
    script.write_text("#!/bin/sh\necho hi\n")
    refused = tool("run", "tiny", "--", str(script), check=False)
    assert refused.returncode == 126 and "permission denied" in refused.stderr
    script.chmod(0o755)
    assert tool("run", "tiny", "--", str(script)).stdout == "hi\n"


def test_lock_says_what_changed_one_row_per_package_and_a_rebuild_that_rebuilds(
    tmp_path: Path, index_server, provision_bin: str
) -> None:
    served = tiny.index(index_server)
    served.add("alpha", "1.0", tag="py3-none-manylinux_2_28_x86_64")  # a second file for one package
    tool = tiny.make_tool(tmp_path, provision_bin, served)
    profile = tiny.profile(tmp_path, "mine")  # a profile by path, not in PROVISION_PROFILES
    lock = tmp_path / "locks" / "pylock.mine.toml"
    index = f"--index=default={served.url}"
    first = tool("lock", str(profile), "--python", PY, index, "-o", str(lock), env={"COLUMNS": "250"})
    assert "nightly" not in first.stderr  # nothing in this profile is a nightly
    assert "changes since" not in first.stdout
    rows = [line for line in first.stdout.splitlines() if line.startswith("│ alpha")]
    assert len(rows) == 1 and rows[0].split("│")[4].strip() == "2"  # package, version, index, files
    assert f"{lock}: 1 package, 2 files, " in first.stdout

    header = lock.read_text().splitlines()[0]
    rebuild = header.split("Rebuild: ", 1)[1]
    argv = shlex.split(rebuild)
    assert (
        argv[:3] == ["provision", "lock", str(profile)] and index in argv and argv[-2:] == ["-o", str(lock)]
    )
    # the flag decides
    again = run_provision(
        *argv[1:], timeout=300, env=tool.env({"PROVISION_INDEX_DEFAULT": "http://127.0.0.1:9/nothing"})
    )
    assert again.returncode == 0, again.stderr
    assert "No changes" in again.stdout

    profile.write_text(profile.read_text().replace('alpha = "==1.0"', 'alpha = "==2.0"\nbeta = "==1.0"'))
    changed = tool("lock", str(profile), "--python", PY, index, "-o", str(lock), "--json")
    assert json.loads(changed.stdout)["changes"] == {
        "added": [{"name": "beta", "version": "1.0"}],
        "removed": [],
        "changed": [{"name": "alpha", "from": "1.0", "to": "2.0"}],
    }
    profile.write_text(profile.read_text().replace('beta = "==1.0"', ""))
    human = tool("lock", str(profile), "--python", PY, index, "-o", str(lock), env={"COLUMNS": "250"})
    assert "  Removed beta v1.0" in human.stdout


def test_the_nightly_line_is_for_nightlies_only(tmp_path: Path, index_server, provision_bin: str) -> None:
    served = tiny.index(index_server)
    nightly = index_server.index("nightly")
    nightly.add("gamma", "1.0.dev20260101")
    tool = tiny.make_tool(tmp_path, provision_bin, served)
    path = tmp_path / "night.toml"
    path.write_text(
        f'schema = 1\nname = "night"\ncuda = "13.0"\n[indexes]\nnightly = "{nightly.url}"\n'
        '[packages]\ngamma = { index = "nightly", version = ">=1.0.dev0", prerelease = true }\n'
    )
    done = tool("lock", str(path), "--python", PY, "-o", str(tmp_path / "pylock.night.toml"))
    assert "finding the newest complete nightly" in done.stderr and "nightly date: 20260101" in done.stdout


def test_report_machine_takes_a_shell_globs_files(tmp_path: Path, provision_bin: str) -> None:
    from conftest import DATA

    for name in ("h200", "rtx-pro-6000-x8"):
        probed = run_provision(
            "probe",
            "--json",
            timeout=120,
            env={**os.environ, "PROVISION_NVML_REPLAY": str(DATA / f"{name}.nvml.json")},
        )
        assert probed.returncode == 0, probed.stderr
        (tmp_path / f"{name}.json").write_text(probed.stdout)
    globbed = subprocess.run(
        f"{provision_bin} report --machine {tmp_path}/*.json --profile cu130 --json",
        shell=True,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert globbed.returncode == 0, globbed.stderr
    sources = [m["source"] for m in json.loads(globbed.stdout)["machines"]]
    assert sources == [str(tmp_path / "h200.json"), str(tmp_path / "rtx-pro-6000-x8.json")]
    stray = run_provision("report", str(tmp_path / "h200.json"), timeout=60)
    assert stray.returncode == 2 and "after --machine" in stray.stderr


def test_report_lock_no_fetch_counts_match_its_rows(tmp_path: Path, index_server, provision_bin: str) -> None:
    tool = tiny.make_tool(
        tmp_path, provision_bin, tiny.index(index_server), ("two", 'alpha = "==2.0"\nbeta = "==1.0"')
    )
    lock = tmp_path / "pylock.two.toml"
    tool("lock", "two", "--python", PY, "-o", str(lock))
    probe = tool(
        "probe",
        "--json",
        env={"PROVISION_NVML_REPLAY": str(Path(__file__).parent.parent / "data" / "h200.nvml.json")},
    )
    (tmp_path / "h200.json").write_text(probe.stdout)
    done = tool(
        "report",
        "--lock",
        str(lock),
        "--no-fetch",
        "--machine",
        str(tmp_path / "h200.json"),
        "--json",
        env={"UV_CACHE_DIR": str(tmp_path / "empty-uv-cache"), "XDG_CACHE_HOME": str(tmp_path / "xdg")},
    )
    (target,) = json.loads(done.stdout)["machines"][0]["targets"]
    skipped = [g for g in target["gates"] if g["id"].startswith("wheel:") and g["status"] == "skip"]
    (summary,) = [g for g in target["gates"] if g["id"] == "lock-scan"]
    assert len(skipped) == 2 and "not in uv's cache (--no-fetch)" in skipped[0]["reason"]
    assert (
        "0 from uv's cache" in summary["reason"]
        and "2 not scanned" in summary["reason"]
        and "2 wheels" in summary["reason"]
    )
