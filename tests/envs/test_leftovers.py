"""Wrong answers and leftovers: a cached lock with a flipped hash is dropped (gc, create) rather than reused forever;
a lock with a package added by hand is refused; a damaged state.json is set aside and the history rebuilt; create killed while locking
leaves nothing in TMPDIR; `scan` of a dangling link says so (exit 2); a METADATA Name that would be an option to uv is
a finding, never on uv's command line."""

from __future__ import annotations

import json
import os
import re
import signal
import sys
import time
from pathlib import Path

import pytest
import tiny
from launch import run_provision

from provision.envs import drift

PYV = f"{sys.version_info[0]}.{sys.version_info[1]}"


@pytest.fixture
def made(tmp_path: Path, provision_bin: str, index_server) -> tiny.Tool:
    return tiny.make_tool(
        tmp_path, provision_bin, tiny.index(index_server), ("both", 'alpha = "==1.0"\nbeta = "==1.0"')
    )


def test_a_cached_lock_with_a_flipped_hash_is_dropped_by_gc_and_create_locks_again(made: tiny.Tool) -> None:
    made.create("tiny", "--no-checks")
    (cached,) = (made.home / "locks").glob("pylock.tiny-*.toml")
    text = cached.read_text()
    digest = re.search(r'sha256 = "([0-9a-f]{64})"', text)
    assert digest is not None
    flipped = digest.group(1)[:-1] + ("0" if digest.group(1)[-1] != "0" else "1")
    cached.write_text(text.replace(digest.group(1), flipped))
    removed = json.loads(made("gc", "--json").stdout)["removed"]
    assert any(cached.name in line for line in removed) and not cached.exists(), removed
    cached.write_text(text.replace(digest.group(1), flipped))  # and create, finding it, locks anew
    done = made.create("tiny", "--name", "again", "--no-checks", check=False)
    assert done.returncode == 0, done.stderr
    assert flipped not in cached.read_text()


def test_a_lock_with_a_package_added_by_hand_is_refused(made: tiny.Tool, tmp_path: Path) -> None:
    only_alpha, both = tmp_path / "pylock.tiny.toml", tmp_path / "pylock.both.toml"
    made("lock", "tiny", "--python", PYV, "-o", str(only_alpha))
    made("lock", "both", "--python", PYV, "-o", str(both))
    beta = next(
        block for block in both.read_text().split("\n[[packages]]\n") if block.startswith('name = "beta"')
    )
    text = only_alpha.read_text()
    head, _, tool = text.partition("\n[tool.provision]")
    only_alpha.write_text(
        head.rstrip("\n")
        + "\n\n[[packages]]\n"
        + beta.split("\n[tool")[0].rstrip("\n")
        + "\n\n[tool.provision]"
        + tool
    )
    done = made.create("tiny", "--lock", str(only_alpha), "--no-checks", check=False)
    assert done.returncode in (2, 7) and "Traceback" not in done.stderr, done.stderr
    assert f"{only_alpha}: its packages were changed after provision locked them" in done.stderr
    assert not (made.home / "builds").exists() or not list(
        (made.home / "builds").glob("*/venv/lib/*/site-packages/beta")
    )


DAMAGED_STATES = {
    "truncated": '{"schema_version": 1, "history": ["ti',
    "invalid": "{not json",
    "history-a-number": '{"schema_version": 1, "history": 5}',
    "history-a-string": '{"schema_version": 1, "history": "tiny"}',
    "history-of-objects": '{"schema_version": 1, "history": [{"name": "tiny"}]}',
    "a-list": '["tiny", "both"]',
    "nested-too-deeply": "[" * 100_000,
}


@pytest.mark.parametrize("damage", sorted(DAMAGED_STATES))
def test_a_damaged_state_json_is_set_aside_and_the_history_rebuilt(made: tiny.Tool, damage: str) -> None:
    made.create("tiny", "--no-checks")
    made.create("both", "--no-checks")  # active now: the history rebuilt ends with it
    state = made.home / "state.json"
    state.write_text(DAMAGED_STATES[damage])
    done = made("rollback", check=False)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    assert os.readlink(made.home / "active") == "envs/tiny"
    (aside,) = made.home.glob("state.json.damaged-*")
    assert aside.read_text() == DAMAGED_STATES[damage]  # set aside whole, never deleted
    assert "note: " in done.stderr and str(aside) in done.stderr, done.stderr
    assert json.loads(state.read_text())["history"] == ["tiny", "both", "tiny"]
    state.write_text(DAMAGED_STATES[damage])
    made("switch", "both")  # switch mends it too
    assert (
        json.loads(state.read_text())["history"][-1] == "both"
        and len(list(made.home.glob("state.json.damaged-*"))) == 2
    )


def test_create_killed_while_locking_leaves_nothing_in_tmpdir(made: tiny.Tool, tmp_path: Path) -> None:
    temp = tmp_path / "tmp"
    temp.mkdir()
    made.served.delay = 2.0
    earlier = len(made.served.requests)
    process = made.popen("create", "tiny", "--python", tiny.PY, "--no-checks", env={"TMPDIR": str(temp)})
    deadline = time.time() + 60
    while time.time() < deadline and len(made.served.requests) == earlier:
        time.sleep(0.05)
    time.sleep(0.3)
    os.kill(process.pid, signal.SIGKILL)
    process.communicate(timeout=30)
    made.served.delay = 0.0
    assert not [p for p in temp.iterdir() if p.name.startswith("provision-lock-")], list(temp.iterdir())
    made("gc")
    assert made.builds() == []


def test_scan_of_a_dangling_link_says_so(tmp_path: Path, provision_bin: str) -> None:
    link = tmp_path / "libgone.so"
    link.symlink_to(tmp_path / "missing.so")
    done = run_provision("scan", str(link), timeout=60)
    assert (
        done.returncode == 2
        and f"error: {link} is a link to {tmp_path / 'missing.so'}, which does not exist" in done.stderr
    )


def test_a_metadata_name_that_looks_like_an_option_never_reaches_uv(made: tiny.Tool, tmp_path: Path) -> None:
    made.create("tiny", "--no-checks")
    (build,) = (made.home / "builds").iterdir()
    site = drift.site_packages(build / "venv")
    info = site / "evil-1.0.dist-info"
    info.mkdir()
    marker = tmp_path / "nonexistent"
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: --python={marker}\nVersion: 1.0\n")
    (info / "RECORD").write_text("evil-1.0.dist-info/METADATA,,\nevil-1.0.dist-info/RECORD,,\n")
    check = made("check", "tiny", "--only", "drift", "--json", check=False)
    (result,) = json.loads(check.stdout)["checks"]
    assert "evil-1.0.dist-info/METADATA" in json.dumps(result), result
    done = made("-v", "restore", "tiny", "--no-checks", check=False)
    assert "Traceback" not in done.stderr and f"--python={marker}" not in done.stderr.split("error:")[
        0
    ].replace(f"Name: '--python={marker}'", ""), done.stderr
    assert not [line for line in done.stderr.splitlines() if line.startswith("$ ") and "uninstall" in line], (
        done.stderr
    )
