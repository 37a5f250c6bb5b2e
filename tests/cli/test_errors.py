"""Each error class is one exit code, said in a sentence in docs/exit-codes.md; `UsageError` is kept for the command
line, and what is found wrong when read is an `InputError` (same exit code)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from conftest import ROOT

from provision import errors
from provision.errors import InputError, ProvisionError, UsageError


def test_every_error_class_is_a_row_of_exit_codes() -> None:
    text = (ROOT / "docs" / "exit-codes.md").read_text()
    for cls in (ProvisionError, *ProvisionError.__subclasses__()):
        assert re.search(rf"^\| {cls.exit_code} \| [^|]*`{cls.__name__}`", text, re.M), cls.__name__
    assert {c.__module__ for c in ProvisionError.__subclasses__()} == {errors.__name__}


def test_a_file_found_wrong_is_an_input_error_not_a_usage_error(tmp_path: Path) -> None:
    from provision.report import documents
    from provision.stacks import lockfile

    bad = tmp_path / "bad.json"
    bad.write_text("{")
    for read in (documents.load_machine, lockfile.read):
        with pytest.raises(InputError) as caught:
            read(bad)
        assert (
            not isinstance(caught.value, UsageError)
            and caught.value.exit_code == 2
            and str(bad) in caught.value.message
        )


def test_a_path_found_wrong_when_read_or_written_is_an_input_error(tmp_path: Path) -> None:
    """`accept PATH` of a pipe, of a link out of the venv or of a file past 64 MiB, and `profiles new -o` into a folder
    that cannot be written: each path came from the command line, and each was found wrong only when read or written."""
    import os

    from provision.envs import kept
    from provision.stacks import newprofile

    venv = tmp_path / "venv"
    venv.mkdir()
    os.mkfifo(venv / "pipe")
    (venv / "out").symlink_to(tmp_path)
    with open(venv / "big", "wb") as big:
        big.truncate(kept.MAX_BYTES + 1)
    for name, said in (
        ("pipe", "not a regular file"),
        ("out/x.py", "outside the environment"),
        ("big", "larger than"),
    ):
        with pytest.raises(InputError, match=said) as caught:
            kept.read_in_venv(venv, venv / name, name)
        assert not isinstance(caught.value, UsageError) and caught.value.exit_code == 2
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    if os.geteuid() == 0:
        locked = Path("/proc/version/x")  # root writes anywhere but under a file
    with pytest.raises(InputError, match="cannot write the profile") as caught:
        newprofile._write(locked / "p.toml", "x = 1\n")
    assert not isinstance(caught.value, UsageError)
