"""A download held in memory (its page gives a size of at most wheelproof.IN_MEMORY) holds no more than that size,
whatever the server sends: a body of no Content-Length that goes on past it, or a Content-Length past it, is refused
with one line saying so; a page that gives size 0 holds nothing. A hostile server on 127.0.0.1 (tests/hostile_http.py)."""

from __future__ import annotations

import io
import time
from types import SimpleNamespace

import pytest
from hostile_http import Route

from provision.errors import IndexUnreachable
from provision.stacks import wheelproof


@pytest.fixture
def held(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The most bytes each in-memory download of wheelproof held (its own BytesIO: urllib3 has others)."""
    most: list[int] = []

    class Recorded(io.BytesIO):
        def write(self, data) -> int:  # type: ignore[no-untyped-def, override]
            written = super().write(data)
            most.append(max(most.pop() if most else 0, self.tell()))
            return written

    monkeypatch.setattr(wheelproof, "io", SimpleNamespace(BytesIO=Recorded))
    return most


@pytest.mark.timeout(30)
@pytest.mark.parametrize("size", [0, 1, 100_000])
def test_a_body_going_on_past_the_size_the_page_gives_is_refused_holding_no_more(
    hostile, held: list[int], size: int
) -> None:
    # no Content-Length: zeros until the client hangs up
    hostile.routes["/endless.whl"] = Route(how="endless")
    with pytest.raises(IndexUnreachable, match=f"larger than the {size:,} bytes provision reads of it"):
        wheelproof.downloaded(f"{hostile.url}/endless.whl", None, size)
    assert max(held, default=0) <= size
    # it did send more: counted by the server's thread once its write returns, which may be after the client hung up
    deadline = time.monotonic() + 10
    while hostile.sent.get("/endless.whl", 0) <= size and time.monotonic() < deadline:
        time.sleep(0.01)
    assert hostile.sent.get("/endless.whl", 0) > size


@pytest.mark.parametrize("size", [0, 1000])
def test_a_content_length_past_the_size_the_page_gives_is_refused_before_the_body(
    hostile, held: list[int], size: int
) -> None:
    hostile.routes["/long.whl"] = Route(body=bytes(size + 1))
    with pytest.raises(IndexUnreachable, match=f"it says {size + 1:,} bytes"):
        wheelproof.downloaded(f"{hostile.url}/long.whl", None, size)
    assert held == []


def test_an_empty_download_of_size_0_is_no_wheel(hostile, held: list[int]) -> None:
    hostile.routes["/empty.whl"] = Route(body=b"")
    with pytest.raises(wheelproof.NotProven, match="not a readable wheel"):
        wheelproof.downloaded(f"{hostile.url}/empty.whl", None, 0)
