"""`provision check X` (or baseline, bench) storing its results after `provision remove X` or `create --replace X` took
X's build away while the checks ran: the record's writer opened BUILD/.env.json.lock in a folder that was gone, and the
command ended in `error: No such file or directory: .../.env.json.lock` / `hint: check that path and its
permissions` (exit 3), which says nothing of what happened. Now the one writer of env.json says the environment was
removed or replaced meanwhile and nothing was stored (exit 7), and makes nothing where the build was."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from launch import popen_provision, run_provision

PY = f"{sys.version_info[0]}.{sys.version_info[1]}"


def test_remove_while_check_runs_is_one_clear_line_and_recreates_nothing(
    index_server, tmp_path: Path
) -> None:
    served = index_server.index("slow")
    # the imports check: 4 s
    served.add("alpha", "1.0", files={"alpha/__init__.py": b"import time\ntime.sleep(4)\n"})
    profiles = tmp_path / "profiles"
    profiles.mkdir()
    (profiles / "slow.toml").write_text(
        'schema = 1\nname = "slow"\ncuda = "13.0"\n[packages]\nalpha = "==1.0"\n'
        '[checks]\nrequired = ["imports"]\n'
    )
    home = tmp_path / "home"
    env = {
        **os.environ,
        "PROVISION_HOME": str(home),
        "PROVISION_PROFILES": str(profiles),
        "PROVISION_INDEX_DEFAULT": served.url,
    }
    done = run_provision("create", "slow", "--no-checks", "--no-activate", env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    build = next((home / "builds").iterdir())
    checking = popen_provision("check", "slow", "--only", "imports", env=env)
    deadline = time.time() + 60
    while time.time() < deadline and not any(
        "check_imports" in line and str(build) in line for line in _cmdlines()
    ):
        time.sleep(0.05)  # until the imports check's payload runs in the build
    removed = run_provision("remove", "slow", env=env, timeout=60)
    assert removed.returncode == 0, removed.stderr
    _, err = checking.communicate(timeout=120)
    lines = err.strip().splitlines()
    assert checking.returncode == 7 and "Traceback" not in err, err
    assert (
        lines[-2]
        == f"error: {build}: the environment was removed or replaced while this ran; nothing was stored"
    ), err
    assert not build.exists() and list((home / "builds").iterdir()) == []


def _cmdlines() -> list[str]:
    found = []
    for process in Path("/proc").glob("[0-9]*"):
        try:
            found.append((process / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace"))
        except OSError:  # ended meanwhile
            continue
    return found
