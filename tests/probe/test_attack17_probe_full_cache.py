"""`probe` with provision's cache on a real full disk (tests/fulldisk.py): the mark of an NVML reading under way
(nvml/reading-PID) that could not be written is not left there. It was left empty, and the next run took it for a
reading that crashed inside NVML: it read NVML in a child first."""

from __future__ import annotations

from pathlib import Path


def test_a_mark_that_cannot_be_written_is_not_left_for_the_next_run(tmp_path: Path, small_disk) -> None:
    disk = small_disk(tmp_path / "disk")
    cache = {"XDG_CACHE_HOME": str(tmp_path / "disk" / "cache")}
    disk.fill()
    done = disk.run("probe", "--json", env=cache)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    marks = disk.view(tmp_path / "disk" / "cache" / "provision" / "nvml")
    assert not list(marks.glob("reading-*"))
