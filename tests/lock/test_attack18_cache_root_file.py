"""provision's cache folder that is a file (`$XDG_CACHE_HOME/provision`, a stray `touch`): every lock ended in exit 3,
"Not a directory". A cache is never a command's reason to fail: it is passed over, said once, and the lock is made."""

from __future__ import annotations

import json
import os
from pathlib import Path

import tiny


def test_a_cache_folder_that_is_a_file_is_passed_over_and_said_once(tool: tiny.Tool, tmp_path: Path) -> None:
    cache = Path(os.environ["XDG_CACHE_HOME"]) / "provision"
    cache.parent.mkdir(parents=True, exist_ok=True)
    cache.write_text("not a folder\n")
    output = tmp_path / "pylock.tiny.toml"
    for _ in range(2):
        done = tool("lock", "tiny", "-o", str(output), check=False)
        assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
        said = [line for line in done.stderr.splitlines() if "is not a folder" in line]
        assert len(said) == 1 and str(cache) in said[0] and "XDG_CACHE_HOME" in said[0], done.stderr
    assert cache.read_text() == "not a folder\n"
    gc = tool("gc", "--cache", "--json", check=False)
    assert gc.returncode == 0, gc.stderr
    assert all(c["entries"] == 0 for c in json.loads(gc.stdout)["caches"])
