"""`adopt` asks uv for its own default index (`uv pip compile --emit-index-url`: 0.12-0.15 s, a seventh of a cold
adopt of 123 wheels) only where it needs it: for a default index that neither a profile nor PROVISION_INDEX_DEFAULT
names, or for a wheel uv's cache keeps from that default. Real venvs built by uv, a real index on 127.0.0.1, the
installed provision as a process; what it ran is read from its -v log."""

from __future__ import annotations

import json
from pathlib import Path

from test_adopt import Setup

ASKED = "--emit-index-url"


def test_an_index_given_and_a_cache_of_its_own_ask_uv_for_no_default(
    tmp_path: Path, index_server, provision_bin: str
) -> None:
    served = index_server.index("given")
    served.add("alpha", "1.0")
    setup = Setup(tmp_path, provision_bin)
    setup.build(
        served.url, "alpha==1.0"
    )  # uv's cache keeps it under the bucket of this index, not its default's
    for cache in (setup.cache, {"UV_CACHE_DIR": str(tmp_path / "empty-cache")}):
        done = setup(
            "-v",
            "adopt",
            f"a{len(cache['UV_CACHE_DIR'])}",
            str(setup.venv),
            "--json",
            index=served.url,
            **cache,
        )
        assert ASKED not in done.stderr, done.stderr
        assert [m["name"] for m in json.loads(done.stdout)["matched"]] == ["alpha"]


def test_a_default_index_named_by_nothing_but_uv_is_asked_of_uv(
    tmp_path: Path, index_server, provision_bin: str
) -> None:
    served = index_server.index("uvs")
    served.add("alpha", "1.0")
    setup = Setup(tmp_path, provision_bin)
    setup.build(served.url, "alpha==1.0")
    done = setup(
        "-v",
        "adopt",
        "old",
        str(setup.venv),
        "--json",
        index="",
        UV_DEFAULT_INDEX=served.url,
        UV_CACHE_DIR=str(tmp_path / "empty-cache"),
    )
    assert done.stderr.count(ASKED) == 1, done.stderr
    adopted = json.loads(done.stdout)
    assert [(m["name"], m["index_url"]) for m in adopted["matched"]] == [("alpha", served.url)]
