"""`check` and `baseline` on a real full disk (tests/fulldisk.py): the record they could not write is named. A write
that fails on a full disk is a write(), which names no file (the faked ENOSPC of test_damage came with one): it read
`error: No space left on device` and nothing else."""

from __future__ import annotations

from pathlib import Path

import fulldisk
import tiny
from test_damage import one_error


def test_check_on_a_full_home_names_the_record_it_could_not_write(
    tmp_path: Path, provision_bin: str, index_server, small_disk
) -> None:
    tool = fulldisk.tool_on(tmp_path, provision_bin, index_server)
    tool.create("tiny")
    disk = small_disk(tmp_path / "disk")
    record = disk.view(tiny.build_of(tool) / "env.json")
    before, files = record.read_text(), fulldisk.tree(disk.view(tool.home))
    disk.fill()

    done = disk.run("check", "tiny", env=tool.env())
    one_error(done, 3, "No space left on device: ", "env.json", "hint: free space on that disk")
    assert record.read_text() == before and fulldisk.tree(disk.view(tool.home)) == files, "no temp file left"
    disk.unfill()
    assert disk.run("check", "tiny", env=tool.env()).returncode == 0
