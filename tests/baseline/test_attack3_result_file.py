"""Attack on a baseline's {result} file: the command, not provision, decides what is at that path when it ends. A FIFO
there (nobody writing) hung the read forever; a link to /dev/zero (size 0, endless) read without end into memory; a
link to a file outside the build was read as the result. Each is now no figure, said in one line, exit 7."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import tiny
from launch import run_provision

MAKERS = {
    "fifo": "import os, sys; os.mkfifo(sys.argv[1])",
    "zero": "import os, sys; os.symlink('/dev/zero', sys.argv[1])",
    "link": "import os, sys; open(sys.argv[2], 'w').write('{\"x\": 5}\\n'); os.symlink(sys.argv[2], sys.argv[1])",
}


@pytest.mark.parametrize("kind", sorted(MAKERS))
def test_a_result_path_the_command_made_no_regular_file_is_no_figure(
    kind: str, tmp_path: Path, index_server, provision_bin: str
) -> None:
    tool = tiny.make_tool(tmp_path, provision_bin, tiny.index(index_server))
    outside = tmp_path / "outside.json"
    tiny.profile(
        tool.profiles,
        "sg",
        extra=(
            f'[baseline]\ncommand = ["python", "-c", {json.dumps(MAKERS[kind])}, "{{result}}", "{outside}"]\n'
            'json_key = "x"\ntimeout = 60\n'
        ),
    )
    tool.create("sg")
    # hung before (fifo); ran out of memory (zero)
    done = run_provision("baseline", "sg", env=tool.env(None), timeout=30)
    assert done.returncode == 7, done.stderr
    assert "no figure in its output" in done.stderr and "not a regular file" in done.stderr, done.stderr
    build = Path(tool.envs()["sg"]["path"])
    assert not list(build.glob(".baseline-result.*"))  # what the command left there is removed, not followed
