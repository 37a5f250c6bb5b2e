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
        assert not isinstance(caught.value, UsageError) and caught.value.exit_code == 2 and str(bad) in caught.value.message
