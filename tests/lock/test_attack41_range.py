"""Issue 41's range reads against a hostile index: a tail answer whose Content-Range numbers are too long to be numbers
is no answer (not a traceback of the lock or adopt), and a RECORD read ahead while uv resolves is the answer for its
URL, found or not: the gate does not ask the index again (an index that answers no ranges, or stalls, was asked twice
per wheel)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_lock_again import _lock, _served
from test_range_reads import Server, serve  # noqa: F401 - the fixture

from provision.stacks import wheelmeta


@pytest.mark.parametrize(
    "span",
    [
        "bytes {n}-{n}/{n}",
        "bytes 0-9/{n}",
        "bytes {n}-9/20",
    ],
    ids=["all", "size", "first"],
)
def test_a_content_range_of_numbers_past_any_size_is_no_answer(serve, span: str) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    huge = "9" * 5000  # past int()'s 4300 digits: a ValueError where a number was taken as it came
    server: Server = serve(
        lambda method, wanted: (206, {"Content-Range": span.format(n=huge)}, b"0123456789")
    )
    assert wheelmeta.record(f"{server.url}/pkg-1.0-py3-none-any.whl") is None
    assert wheelmeta.RangeFile.opened(f"{server.url}/pkg-1.0-py3-none-any.whl") is None
    assert len(server.requests) == 2


def test_a_record_read_ahead_that_found_none_is_not_asked_for_again(index_server, tmp_path: Path) -> None:
    """uv names each wheel by its .metadata (PEP 658) and the index answers no range request: the read ahead asks once
    for each wheel's tail, finds no ranges, and the gate takes that answer rather than asking the same index again."""
    served = _served(index_server)
    served.ranges = False
    done = _lock(tmp_path, served)
    unread = [w for w in json.loads(done.stdout)["warnings"] if w["id"] == "conflict-unread"]
    assert unread, done.stdout  # no RECORD could be read: said
    asked = [r for r in served.requests if r.endswith(".whl")]
    assert sorted(asked) == [
        "/default/files/app-1.0-py3-none-any.whl",
        "/default/files/lib-1.0-py3-none-any.whl",
    ], asked
