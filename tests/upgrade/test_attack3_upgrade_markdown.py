"""Attack on `upgrade --markdown FILE`: a page that cannot be written (a FIFO, a folder that does not exist) was found
out only after the whole upgrade ran (built, measured, activated), which then exited 2 as if it had failed. A FIFO with
no reader and a path under a file were. Now it is refused before anything runs: nothing is built, old stays active."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import tiny
from test_upgrade import made  # noqa: F401  (the fixture)


@pytest.mark.parametrize("where", ["fifo", "under-a-file"])
def test_a_page_that_cannot_be_written_is_refused_before_the_upgrade(
    made: tiny.Tool,  # noqa: F811 (the fixture)
    tmp_path: Path,
    where: str,
) -> None:
    page = tmp_path / "ticket.md" if where == "fifo" else tmp_path / "a-file" / "ticket.md"
    if where == "fifo":
        os.mkfifo(page)
    else:
        page.parent.write_text("")
    done = made("upgrade", "fast", "--runs", "3", "--markdown", str(page), check=False)
    assert done.returncode == 2 and str(page) in done.stderr, done.stderr
    assert "step 1 of 7" not in done.stderr, done.stderr  # refused before the first step
    assert "fast" not in made.envs() and next(n for n, e in made.envs().items() if e["active"]) == "old"
