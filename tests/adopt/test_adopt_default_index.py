"""`adopt` asks uv for its own default index (`uv pip compile --emit-index-url`: 0.12-0.15 s, a seventh of a cold
adopt of 123 wheels) only where it needs it: for a default index that neither a profile nor PROVISION_INDEX_DEFAULT
names, or for a wheel uv's cache keeps from that default. Real venvs built by uv, a real index on 127.0.0.1, the
installed provision as a process; what it ran is read from its -v log."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from test_adopt import PY, Setup

from provision.stacks import uvtool

ASKED = "--emit-index-url"


def test_an_index_given_and_a_cache_of_its_own_ask_uv_for_no_default(
    tmp_path: Path, index_server, provision_bin: str
) -> None:
    served = index_server.index("given")
    served.add("alpha", "1.0")
    setup = Setup(tmp_path, provision_bin)
    # uv's cache keeps it under the bucket of this index, not its default's
    setup.build(served.url, "alpha==1.0")
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


def _into_default_bucket(cache: Path) -> None:
    # uv keeps what came from its own default registry under wheels-v*/pypi/<project>: the wheels the venv was built
    # with are moved there from their index's bucket, as if uv had fetched them from its default
    (bucket,) = cache.glob("wheels-v*/index/*")
    default = bucket.parent.parent / "pypi"
    bucket.rename(default)
    for link in default.glob("*/*"):
        if link.is_symlink():  # uv's links are relative: one folder less above them now
            target = os.readlink(link)
            link.unlink()
            link.symlink_to(target.removeprefix("../"))


def _uv_cannot_answer(cache: Path) -> None:
    # uv cannot take its cache's lock: `uv pip compile` answers nothing, exit 2 (provision reads the cache unlocked)
    (cache / ".lock").unlink(missing_ok=True)
    (cache / ".lock").mkdir()


def test_a_wheel_in_uvs_default_bucket_asks_uv_and_a_uv_that_cannot_answer_leaves_it_to_the_index_given(
    tmp_path: Path, index_server, provision_bin: str
) -> None:
    # the cache is a shortcut: the index given still has the wheel, so the lock is made all the same
    served = index_server.index("given")
    served.add("alpha", "1.0")
    setup = Setup(tmp_path, provision_bin)
    setup.build(served.url, "alpha==1.0")
    cache = Path(setup.cache["UV_CACHE_DIR"])
    _into_default_bucket(cache)
    _uv_cannot_answer(cache)
    done = setup("-v", "adopt", "old", str(setup.venv), "--json", index=served.url)
    assert done.stderr.count(ASKED) == 1, done.stderr
    adopted = json.loads(done.stdout)
    assert "lock_error" not in adopted, adopted
    assert [(m["name"], m["index_url"]) for m in adopted["matched"]] == [("alpha", served.url)]


def test_a_uv_that_cannot_say_the_default_no_one_names_leaves_the_venv_registered_and_says_what_to_do(
    tmp_path: Path, index_server, provision_bin: str
) -> None:
    served = index_server.index("uvs")
    served.add("alpha", "1.0")
    setup = Setup(tmp_path, provision_bin)
    setup.build(served.url, "alpha==1.0")
    _uv_cannot_answer(Path(setup.cache["UV_CACHE_DIR"]))
    adopted = setup.json("adopt", "old", str(setup.venv), index="")  # PROVISION_INDEX_DEFAULT empty: unset
    assert adopted["adopted"] == "old" and adopted["lock"] is None
    error = adopted["lock_error"]
    assert "\n" not in error["message"] and "default index" in error["message"], error
    assert "PROVISION_INDEX_DEFAULT" in error["hint"], error
    assert [e["name"] for e in setup.json("envs")["environments"]] == ["old"]
    again = setup("adopt", "again", str(setup.venv), index="")
    text = again.stdout + again.stderr
    assert "again" in text and "PROVISION_INDEX_DEFAULT" in text


def test_uvs_default_is_asked_once_from_the_main_thread_and_only_for_a_wheel_of_its_bucket(
    tmp_path: Path, index_server, provision_bin: str
) -> None:
    # uv run from a worker thread would not die with provision (proc.run's death signal is the main thread's)
    import threading

    from provision.stacks import match

    served = index_server.index("mirror")
    served.add("alpha", "1.0")
    setup = Setup(tmp_path, provision_bin)
    site = setup.build(served.url, "alpha==1.0")
    cache = Path(setup.cache["UV_CACHE_DIR"])
    asked: list[threading.Thread] = []

    def uv_default() -> str:
        asked.append(threading.current_thread())
        return served.url

    def matched() -> list[tuple[str, str]]:
        result = match.match(site, setup.venv, {"default": served.url}, cache=cache, pypi_index=uv_default)
        return [(m.name, m.record_from) for m in result.matched]

    assert matched() == [("alpha", "uv-cache")] and asked == []  # its own index's bucket: uv is not asked
    _into_default_bucket(cache)
    assert matched() == [("alpha", "uv-cache")]
    assert asked == [threading.main_thread()]


@pytest.mark.parametrize("variable", ["UV_DEFAULT_INDEX", "UV_INDEX_URL"])
def test_a_mirror_uv_takes_as_its_default_keeps_its_wheels_in_its_own_bucket_and_is_credited_with_them(
    tmp_path: Path, index_server, provision_bin: str, variable: str
) -> None:
    # uv keeps a wheel under wheels-v*/pypi only where it came from uv's built-in registry; from any other URL, even
    # one UV_DEFAULT_INDEX or UV_INDEX_URL makes uv's default, under wheels-v*/index/<hash of that URL>. So a mirror's
    # wheels are credited to the mirror by the page uv keeps beside them, never to whatever uv's default is now.
    served = index_server.index("mirror")
    served.add("alpha", "1.0")
    setup = Setup(tmp_path, provision_bin)
    uvtool.run(["venv", str(setup.venv), "--python", PY, "--quiet"], env=setup.cache)
    python = str(setup.venv / "bin" / "python")
    uvtool.run(
        ["pip", "install", "--python", python, "--quiet", "alpha==1.0"],
        env={**setup.cache, variable: served.url},
    )
    cache = Path(setup.cache["UV_CACHE_DIR"])
    assert not list(cache.glob("wheels-v*/pypi")), sorted(cache.glob("wheels-v*/*/*"))
    assert [p.name for p in cache.glob("wheels-v*/index/*/*")] == ["alpha"]
    index_server.down.add("mirror")  # what is matched is matched from uv's cache alone
    done = setup("adopt", "old", str(setup.venv), "--json", index="", **{variable: served.url})
    matched = [(m["name"], m["index_url"], m["record_from"]) for m in json.loads(done.stdout)["matched"]]
    assert matched == [("alpha", served.url, "uv-cache")], done.stdout


@pytest.mark.parametrize("variable", ["UV_DEFAULT_INDEX", "UV_INDEX_URL"])
def test_a_wheel_of_uvs_default_bucket_is_credited_to_uvs_built_in_default_not_to_a_mirror_a_variable_names(
    tmp_path: Path, index_server, provision_bin: str, variable: str
) -> None:
    # the pypi bucket holds only what came from uv's built-in registry: with UV_DEFAULT_INDEX (or UV_INDEX_URL) naming
    # a mirror now, its wheels were credited to the mirror, which never served them (the lock named an index and a
    # file of another host). uv is asked for its built-in default without the variable. The mirror is down, so the
    # cache is all there is: its wheel came from an index that is not the one given, and is said so, not locked.
    from provision.stacks import newprofile

    origin = index_server.index("origin")
    origin.add("alpha", "1.0")
    mirror = index_server.index("mirror")
    setup = Setup(tmp_path, provision_bin)
    setup.build(origin.url, "alpha==1.0")
    _into_default_bucket(Path(setup.cache["UV_CACHE_DIR"]))
    index_server.down.update({"origin", "mirror"})
    done = setup("-v", "adopt", "old", str(setup.venv), "--json", index="", **{variable: mirror.url})
    built_in = newprofile.default_index(builtin=True)
    assert built_in != mirror.url
    adopted = json.loads(done.stdout)
    assert adopted["matched"] == [], done.stdout
    (unmatched,) = adopted["unmatched"]
    assert unmatched["name"] == "alpha", unmatched
    assert f"from {built_in} that is not among" in unmatched["reason"], unmatched
    # asked twice: the default the variable names (the lock's), and uv's own
    assert done.stderr.count(ASKED) == 2, done.stderr
