"""Kept files against their own attacks (issue 39, items 5 and 6): a damaged kept copy (`BUILD/accepted/<sha256>`
changed, or a folder there) is repaired by accepting the file again, and restore works again; a 3 GiB sparse copy is
never read whole (resident memory sampled); a profile's [files] source with set-user-ID, set-group-ID, sticky or
group/world write bits lands in the venv without them, as pack.py strips them."""

from __future__ import annotations

import json
import os
import stat
import threading
import time
from pathlib import Path

import tiny
from test_accept import profile_with_files

from provision.envs import drift


def _peak_rss(process_pid: int, done: threading.Event, peak: list[int]) -> None:
    while not done.is_set():
        try:
            for line in Path(f"/proc/{process_pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    peak[0] = max(peak[0], int(line.split()[1]) * 1024)
        except OSError:
            pass
        time.sleep(0.01)


def test_accepting_again_repairs_a_damaged_kept_copy_and_a_huge_one_is_never_read(tool: tiny.Tool) -> None:
    tool.create("tiny", "--no-checks")
    build = tiny.build_of(tool)
    site = drift.site_packages(build / "venv")
    patch = site / "alpha" / "__init__.py"
    patch.write_text("PATCHED = 1\n")
    tool("accept", "tiny", str(patch))
    (copy,) = (build / "accepted").iterdir()
    patch.write_text("drifted\n")
    for damage in ("changed", "folder", "sparse"):
        if damage == "changed":
            copy.write_text("PATCHED = 666\n")
        elif damage == "folder":
            copy.unlink()
            (copy / "inside").mkdir(parents=True)
        else:
            copy.unlink()
            with open(copy, "wb") as handle:
                handle.truncate(3 << 30)  # 3 GiB of holes
        process = tool.popen("restore", "tiny", "--no-checks")
        done, peak = threading.Event(), [0]
        watcher = threading.Thread(target=_peak_rss, args=(process.pid, done, peak))
        watcher.start()
        _out, err = process.communicate(timeout=300)
        done.set()
        watcher.join()
        assert process.returncode == 7 and "accept the file again" in err, (damage, process.returncode, err)
        assert peak[0] < 400 << 20, (damage, peak[0])
        assert patch.read_text() == "drifted\n"
        patch.write_text("PATCHED = 1\n")
        tool("accept", "tiny", str(patch))  # the same content accepted again: the copy is written anew
        assert copy.is_file() and copy.read_text() == "PATCHED = 1\n", damage
        patch.write_text("drifted\n")
        done_restore = tool("restore", "tiny", "--no-checks", check=False)
        assert done_restore.returncode == 0, (damage, done_restore.stderr)
        assert patch.read_text() == "PATCHED = 1\n"
        patch.write_text("drifted\n")


def test_a_profiles_files_never_keep_set_id_sticky_or_shared_write_bits(tool: tiny.Tool) -> None:
    profile_with_files(tool)
    patches = tool.profiles / "patches"
    os.chmod(patches / "tuning.py", 0o6777)
    os.chmod(patches / "sitecustomize.py", 0o1666)
    tool.create("fleet", "--no-checks")
    build = tool.home.resolve() / "builds" / next(b for b in tool.builds() if b.startswith("fleet-"))
    site = drift.site_packages(build / "venv")
    modes = {
        name: stat.S_IMODE((site / name).stat().st_mode) for name in ("team/tuning.py", "sitecustomize.py")
    }
    assert modes == {"team/tuning.py": 0o755, "sitecustomize.py": 0o644}, {
        k: oct(v) for k, v in modes.items()
    }
    for copy in (build / "accepted").iterdir():
        assert stat.S_IMODE(copy.stat().st_mode) & 0o7022 == 0, oct(copy.stat().st_mode)
    os.chmod(site / "team/tuning.py", 0o6755)  # the right content with set-ID bits: put back without them
    (site / "sitecustomize.py").write_text("changed\n")
    restored = json.loads(tool("restore", "fleet", "--no-checks", "--json").stdout)
    assert sorted(restored["put_back"]) == ["sitecustomize.py", "team/tuning.py"], restored
    assert stat.S_IMODE((site / "team/tuning.py").stat().st_mode) == 0o755
