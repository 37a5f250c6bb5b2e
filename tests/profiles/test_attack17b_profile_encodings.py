"""A profile saved in another encoding than the UTF-8 TOML is: with a byte order mark (as some editors save UTF-8),
in UTF-16, in Latin-1. Each is one line naming the file and what it is written in, exit 4, and the hint says how to
save it; it read as a syntax error at line 1, column 1 (or Python's codec words), with "fix the syntax at that line"."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_profiles_hostile import BODY, one_error, run


@pytest.mark.parametrize(
    ("encode", "written_in"),
    [
        (lambda text: b"\xef\xbb\xbf" + text.encode(), "UTF-8 with a byte order mark"),
        (lambda text: text.encode("utf-16"), "UTF-16"),
        (lambda text: (text + 'description = "café"\n').encode("latin-1"), "another encoding"),
    ],
    ids=["utf-8-bom", "utf-16", "latin-1"],
)
def test_a_profile_in_another_encoding_says_so(
    tmp_path: Path, provision_bin: str, encode, written_in: str
) -> None:
    (tmp_path / "other.toml").write_bytes(encode(BODY.format(name="other")))
    done = run(provision_bin, tmp_path, "lock", "other")
    one_error(done, 4, "other.toml: written in " + written_in)
    assert done.stderr.strip().endswith("hint: save it as UTF-8, without a byte order mark"), done.stderr
