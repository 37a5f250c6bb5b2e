"""`provision lock` made again: the versions of the lock it replaces are uv's preferences (as `uv pip compile -o` and
`uv lock` keep what they locked), `--upgrade` and `--upgrade-package` free them; the conflict gate's verdict is kept by
the set of wheels, so a lock made again with the same wheels reads no RECORD; the RECORDs of a first lock are read
while uv resolves, from the wheels uv's own log says it is fetching."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import tiny
from launch import run_provision

from provision.stacks import lock, uvtool, wheelrecords

PY = f"{sys.version_info.major}.{sys.version_info.minor}"


def _served(index_server):  # type: ignore[no-untyped-def]
    served = index_server.index("default")
    served.ranges = served.pep658 = (
        True  # as the default registry: uv reads .metadata, RECORDs are read by range
    )
    served.add("app", "1.0", requires=("lib>=1.0",))
    served.add("lib", "1.0")
    return served


def _lock(  # type: ignore[no-untyped-def]
    tmp_path: Path,
    served,
    *extra: str,
    check: bool = True,
    json_: bool = True,
    packages: str = 'app = "==1.0"',
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    profile = tiny.profile(tmp_path, "mine", packages=packages)
    env = {"UV_CACHE_DIR": str(tmp_path / "uv"), "XDG_CACHE_HOME": str(tmp_path / "xdg"), **(env or {})}
    return run_provision(
        "lock",
        str(profile),
        "--python",
        PY,
        f"--index=default={served.url}",
        "-o",
        str(tmp_path / "pylock.mine.toml"),
        *(["--json"] if json_ else []),
        *extra,
        env={**env, "COLUMNS": "250"},
        check=check,
    )


def _versions(done: subprocess.CompletedProcess[str]) -> dict[str, str]:
    return {p["name"]: p["version"] for p in json.loads(done.stdout)["packages"]}


def test_a_lock_made_again_keeps_its_versions_until_asked_to_upgrade(index_server, tmp_path: Path) -> None:
    served = _served(index_server)
    first = _lock(tmp_path, served)
    assert _versions(first)["lib"] == "1.0" and json.loads(first.stdout)["preferred"] is None
    served.add("lib", "1.1")  # a newer release of what the profile does not pin
    again = _lock(tmp_path, served)
    result = json.loads(again.stdout)
    assert _versions(again)["lib"] == "1.0", "a lock made again keeps the version it had"
    assert result["preferred"] == str(tmp_path / "pylock.mine.toml")
    assert result["changes"] == {"added": [], "removed": [], "changed": []}
    said = _lock(tmp_path, served, json_=False).stdout
    assert (
        "its versions kept where the profile allows them; --upgrade resolves afresh" in said
        and "No changes" in said
    )
    one = _lock(tmp_path, served, "--upgrade-package", "LIB")
    assert _versions(one)["lib"] == "1.1"
    assert json.loads(one.stdout)["changes"]["changed"] == [{"name": "lib", "from": "1.0", "to": "1.1"}]
    served.add("lib", "1.2")
    fresh = _lock(tmp_path, served, "--upgrade")
    assert _versions(fresh)["lib"] == "1.2" and json.loads(fresh.stdout)["preferred"] is None


@pytest.mark.parametrize(
    "damage",
    [
        b"garbage = [\n",
        b"lock-version = '1.0'\npackages = 7\n",
        b"\xff\xfe not text",
        b'lock-version = "1.0"\ncreated-by = "x"\n[[packages]]\nname = "lib"\nversion = "1.0"\nwheels = 7\n',
        b"a = " + b"[" * 100_000,  # arrays nested past Python's recursion limit
    ],
    ids=["not-toml", "packages-not-a-list", "not-text", "wheels-not-a-list", "nested-past-recursion"],
)
def test_a_damaged_lock_in_the_way_is_no_preference_and_is_replaced(
    index_server, tmp_path: Path, damage: bytes
) -> None:
    """Replaced as over any lock that is no preference: never an error that names no file, nor a thread's traceback
    (the reads ahead read the lock in the way too)."""
    served = _served(index_server)
    (tmp_path / "pylock.mine.toml").write_bytes(damage)
    done = _lock(tmp_path, served, check=False)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr and "Exception in thread" not in done.stderr, done.stderr
    assert _versions(done) == {"app": "1.0", "lib": "1.0"} and json.loads(done.stdout)["changes"] is None
    assert (tmp_path / "pylock.mine.toml").read_text().startswith("# PEP 751 lock")


def test_an_upgrade_package_that_is_no_name_is_one_line(index_server, tmp_path: Path) -> None:
    done = _lock(tmp_path, _served(index_server), "--upgrade-package", "lib; rm -rf /", check=False)
    assert done.returncode == 2 and "--upgrade-package" in done.stderr and "not a package name" in done.stderr
    assert len(done.stderr.strip().splitlines()) <= 3, done.stderr  # click's usage line, then the one error


def test_the_verdict_is_kept_by_the_set_of_wheels_and_a_damaged_one_is_judged_again(
    index_server, tmp_path: Path
) -> None:
    served = _served(index_server)
    served.add("other", "1.0", files={"app/__init__.py": b"# not app's\n"})  # installs a path app installs
    profile = tiny.profile(tmp_path, "mine", packages='app = "==1.0"\nother = "==1.0"')
    env = {"UV_CACHE_DIR": str(tmp_path / "uv"), "XDG_CACHE_HOME": str(tmp_path / "xdg")}
    argv = ("lock", str(profile), "--python", PY, f"--index=default={served.url}", "-o", str(tmp_path / "pylock.mine.toml"), "--json")  # fmt: skip

    def warnings() -> dict[str, str]:
        done = run_provision(*argv, env=env)
        return {w["id"]: w["reason"] for w in json.loads(done.stdout)["warnings"]}

    first = warnings()
    assert "both install app/__init__.py" in first["conflict"]
    verdicts = list((tmp_path / "xdg/provision/verdicts").iterdir())
    assert len(verdicts) == 1
    ranges = served.range_requests
    assert warnings() == first and served.range_requests == ranges  # the same wheels: no RECORD read
    # well-formed JSON, a field retyped
    retyped = verdicts[0].read_bytes().replace(b'"count":1', b'"count":"1"')
    assert retyped != verdicts[0].read_bytes()
    for damage in (b"{", b'{"kind": "verdicts"}', retyped):
        verdicts[0].write_bytes(damage)
        assert warnings() == first  # not trusted: judged again from records/
        assert json.loads(verdicts[0].read_text())["key"] == verdicts[0].name
    # records/ pruned while the verdict stays: create's check of a new build compares with them, so they are read again
    for entry in (tmp_path / "xdg/provision/records").iterdir():
        entry.unlink()
    assert warnings() == first and served.range_requests > ranges
    assert len(list((tmp_path / "xdg/provision/records").iterdir())) == 3


def test_the_verdict_key_names_each_wheel_its_url_and_the_rules() -> None:
    job = ("app", "app-1.0-py3-none-any.whl", "http://127.0.0.1:1/app-1.0-py3-none-any.whl", "a" * 64)
    key = wheelrecords.verdict_key([job])
    assert key == wheelrecords.verdict_key([job])
    assert key != wheelrecords.verdict_key([(*job[:3], "b" * 64)])
    assert key != wheelrecords.verdict_key([(job[0], job[1], job[2] + "?other", job[3])])
    assert key != wheelrecords.verdict_key([])


@pytest.mark.parametrize("pep658", [False, True], ids=["range", "metadata-file"])
def test_uvs_log_names_the_wheels_it_fetches_as_lock_reads_them(
    index_server, tmp_path: Path, pep658: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The reads ahead depend on uv's log line for what its HTTP cache fetches: this uv still writes it, and lock's
    pattern finds every wheel the lock holds in it (a uv that logs otherwise only costs the reads' head start), in
    the environment provision gives uv whatever the caller's (a CI's FORCE_COLOR coloured uv's DEBUG otherwise)."""
    monkeypatch.setenv("FORCE_COLOR", "1")
    served = _served(index_server)
    served.pep658 = pep658
    (tmp_path / "pyproject.toml").write_text(lock._project(_profile(tmp_path), {}, {"default": served.url}))
    env = {
        **uvtool.environment(uvtool.index_options({"default": served.url})[1]),
        "UV_CACHE_DIR": str(tmp_path / "uv"),
        "RUST_LOG": lock.UV_FETCHES,
    }
    done = subprocess.run(
        [uvtool.binary(), *lock._uv_compile_args(lock.Target(python=PY, platform=None), "pylock.toml")],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    seen = {m.group(1) for line in done.stderr.splitlines() if (m := lock._UV_FETCH.match(line))}
    assert {f"{served.url.removesuffix('/simple')}/files/{w}" for w in ("app-1.0-py3-none-any.whl", "lib-1.0-py3-none-any.whl")} <= seen  # fmt: skip


def _profile(tmp_path: Path):  # type: ignore[no-untyped-def]
    from provision.stacks import profiles

    return profiles.load_file(tiny.profile(tmp_path, "mine", packages='app = "==1.0"'))


def test_a_first_lock_reads_each_record_once_by_one_request(index_server, tmp_path: Path) -> None:
    """uv reads each wheel's .metadata (PEP 658) and names it in its log; lock reads its RECORD then, by one request
    for the zip's tail (no HEAD), and never again in the run though the gate asks for it after uv."""
    served = _served(index_server)
    done = _lock(tmp_path, served)
    assert not json.loads(done.stdout)["warnings"]
    assert served.range_requests == 2  # app's and lib's, one each
    assert len(list((tmp_path / "xdg/provision/urls").iterdir())) == 2


def test_the_verdict_key_without_lockchecks_source_names_the_release(monkeypatch: pytest.MonkeyPatch) -> None:
    job = ("app", "app-1.0-py3-none-any.whl", "http://127.0.0.1:1/app-1.0-py3-none-any.whl", "a" * 64)
    with_source = wheelrecords.verdict_key([job])

    def unreadable(*args: object, **kwargs: object) -> bytes:
        raise FileNotFoundError("no source on disk")

    monkeypatch.setattr(wheelrecords.regular, "read_bytes", unreadable)  # a zipapp: no lockcheck.py to read
    assert wheelrecords.verdict_key([job]) not in ("", with_source)


def test_the_reads_ahead_of_a_lock_that_ended_are_forgotten() -> None:
    from concurrent.futures import Future

    pending: Future[wheelrecords.Ahead] = Future()
    url = "http://127.0.0.1:1/forgotten-1.0-py3-none-any.whl"
    wheelrecords.ahead(url, lambda _: pending)
    wheelrecords.drop_ahead()
    # a later lock reads its own
    assert pending.cancelled() and wheelrecords._read_ahead(url) == (
        False,
        None,
    )


def test_uvs_errors_arrive_plain_where_the_caller_forces_colour(index_server, tmp_path: Path) -> None:
    """A CI sets FORCE_COLOR: uv's words are read by provision (its error turned into one line, its log into reads
    ahead), so uv is never asked for colour, whatever the caller's environment says."""
    done = _lock(  # app needs lib>=1.0
        tmp_path,
        _served(index_server),
        packages='app = "==1.0"\nlib = "<1.0"',
        env={"FORCE_COLOR": "1", "CLICOLOR_FORCE": "1"},
        check=False,
        json_=False,
    )
    assert done.returncode != 0 and "\x1b" not in done.stderr, done.stderr
    assert "the pins cannot all hold" in done.stderr and "DEBUG" not in done.stderr, done.stderr


def test_every_uv_run_is_asked_for_no_colour(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Any uv run whose error provision reads, not lock's compile alone."""
    from provision.errors import ProvisionError

    monkeypatch.setenv("FORCE_COLOR", "1")
    monkeypatch.setenv("CLICOLOR_FORCE", "1")
    with pytest.raises(ProvisionError) as failed:
        uvtool.run(["pip", "compile", str(tmp_path / "missing.in")], cwd=tmp_path)
    assert "\x1b" not in failed.value.message and "missing.in" in failed.value.message, failed.value.message


def test_a_lock_that_fails_does_not_wait_for_its_reads_ahead(index_server, tmp_path: Path) -> None:
    """uv fails at once (app needs a lib the index does not have) after naming app's wheel; the read ahead of its RECORD
    is held by a slow index. The lock ends with uv's error, not with that read: a read no one needs is dropped with the
    process (it took 20 s more, the slow read's own time, when the reads' threads were joined at exit)."""
    import threading
    import time

    served = _served(index_server)
    served.add("app", "2.0", requires=("lib>=9",))
    served.hold_ranges = threading.Event()
    served.delay = (
        1.0  # each answer a second late: the read ahead is asked before uv, one page on, has failed
    )
    profile = tiny.profile(tmp_path, "mine", packages='app = "==2.0"')
    try:
        started = time.monotonic()
        done = subprocess.run(  # exec'd, not through the tests' fork server: a process that ends as a user's does
            [sys.executable, "-m", "provision", "lock", str(profile), "--python", PY]
            + [f"--index=default={served.url}", "-o", str(tmp_path / "pylock.mine.toml")],
            env={**os.environ, "UV_CACHE_DIR": str(tmp_path / "uv"), "XDG_CACHE_HOME": str(tmp_path / "xdg")},
            capture_output=True,
            text=True,
            timeout=120,
        )
        took = time.monotonic() - started
    finally:
        served.hold_ranges.set()
    assert done.returncode != 0 and "cannot all hold" in done.stderr, done.stderr
    assert served.range_requests >= 1  # the read ahead was asked, and held
    assert took < 15, took


def _popen_lock(tmp_path: Path, served, profile: Path) -> subprocess.Popen[str]:  # type: ignore[no-untyped-def]
    return subprocess.Popen(
        [sys.executable, "-m", "provision", "lock", str(profile), "--python", PY]
        + [f"--index=default={served.url}", "-o", str(tmp_path / "pylock.mine.toml"), "--json"],
        env={**os.environ, "UV_CACHE_DIR": str(tmp_path / "uv"), "XDG_CACHE_HOME": str(tmp_path / "xdg")},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_two_locks_at_once_onto_one_lock_and_one_cache_both_end_with_a_whole_lock(
    index_server, tmp_path: Path
) -> None:
    """A second copy at once (two terminals, two CI jobs on one runner): same -o, same caches. Each exits 0; what
    lies at -o is a whole lock (one of theirs), and the kept verdict is whole."""
    from provision.stacks import relock

    served = _served(index_server)
    _lock(tmp_path, served)  # a lock in the way: both take it as their preferences
    profile = tiny.profile(tmp_path, "mine", packages='app = "==1.0"')
    runs = [_popen_lock(tmp_path, served, profile) for _ in range(3)]
    for run in runs:
        out, err = run.communicate(timeout=120)
        assert run.returncode == 0, err
        assert {p["name"] for p in json.loads(out)["packages"]} == {"app", "lib"}
    written = tmp_path / "pylock.mine.toml"
    previous = relock.Previous.parse(written.read_bytes(), written)
    assert previous is not None and previous.versions == {"app": "1.0", "lib": "1.0"}
    (verdict,) = (tmp_path / "xdg/provision/verdicts").iterdir()
    assert json.loads(verdict.read_text())["key"] == verdict.name


def test_a_lock_killed_while_it_reads_leaves_the_lock_it_would_replace_as_it_was(
    index_server, tmp_path: Path
) -> None:
    """kill -9 while the reads ahead wait on a slow index: the lock at -o is byte for byte the one before, and the next
    lock is made."""
    import signal
    import threading
    import time

    served = _served(index_server)
    _lock(tmp_path, served)
    before = (tmp_path / "pylock.mine.toml").read_bytes()
    served.add("app", "2.0", requires=("lib>=1.0",))
    for entry in (tmp_path / "xdg/provision/records").iterdir():  # its RECORDs read again: by range, held
        entry.unlink()
    served.hold_ranges = threading.Event()
    profile = tiny.profile(tmp_path, "mine", packages='app = "==2.0"')
    try:
        run = _popen_lock(tmp_path, served, profile)
        deadline = time.monotonic() + 60
        while served.range_requests == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert served.range_requests > 0, "no read started"
        run.send_signal(signal.SIGKILL)
        run.communicate(timeout=60)
    finally:
        served.hold_ranges.set()
    assert (tmp_path / "pylock.mine.toml").read_bytes() == before
    served.hold_ranges = None
    again = _lock(tmp_path, served, packages='app = "==2.0"')
    assert _versions(again)["app"] == "2.0"


def test_the_wheel_judged_is_the_one_the_targets_installer_takes() -> None:
    """Of a release's wheels the gate judges the one an installer for the target takes (packaging.tags' order): the
    newest manylinux the target allows, the own Python's pure wheel before an older one's, a platform wheel before a
    pure one, a wheel the target refuses last; whatever order the lock lists them in."""
    import itertools

    from provision.stacks import earlyrecords

    rank = lock.wheel_rank(lock.Target(python="3.12", platform="x86_64-manylinux_2_28"))
    best_first = [
        "c-1.0-cp312-cp312-manylinux_2_28_x86_64.whl",
        "c-1.0-cp312-cp312-manylinux_2_17_x86_64.manylinux2014_x86_64.whl",
        "c-1.0-cp311-abi3-manylinux_2_28_x86_64.whl",
        "c-1.0-py312-none-any.whl",
        "c-1.0-py3-none-any.whl",
        "c-1.0-py39-none-any.whl",
    ]
    refused = ["c-1.0-cp312-cp312-manylinux_2_34_x86_64.whl", "c-1.0-cp313-cp313-manylinux_2_28_x86_64.whl", "c-1.0-cp312-cp312-win_amd64.whl", "not-a-wheel.whl"]  # fmt: skip
    assert [rank(name) for name in best_first] == sorted(rank(name) for name in best_first)
    assert len({rank(name) for name in best_first}) == len(best_first)
    assert min(rank(name) for name in refused) > rank(best_first[-1])
    for listed in itertools.permutations(best_first[:4]):
        package = {
            "name": "c",
            "version": "1.0",
            "wheels": [{"url": f"http://127.0.0.1:1/{n}", "hashes": {"sha256": "a" * 64}} for n in listed],
        }
        assert [job[1] for job in earlyrecords.jobs_of([package], rank)] == [best_first[0]]


def test_a_wheel_name_of_many_tags_is_ranked_without_their_product() -> None:
    """A lock (or an index) naming a wheel whose compressed tag sets are 60 interpreters, 60 ABIs and 60 platforms:
    packaging's parse_tag made their 216,000 tags (63 MB, 1.8 s; 250 of each in a 3 KB name, 15 million tags and
    gigabytes). Its rank is found without them, and is the one its real tags give."""
    import tracemalloc

    rank = lock.wheel_rank(lock.Target(python="3.12", platform="x86_64-manylinux_2_28"))
    # the order made, outside what is measured
    assert rank("c-1.0-py3-none-any.whl") < rank("not-a-wheel.whl")
    many = [".".join(f"{kind}{n}" for n in range(60)) for kind in ("i", "a", "p")]
    hostile = f"c-1.0-{many[0]}.py3-{many[1]}.none-{many[2]}.any.whl"  # its real tags among them
    tracemalloc.start()
    try:
        found = rank(hostile)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert found == rank("c-1.0-py3-none-any.whl")
    assert peak < 4 << 20, peak
    assert rank("c-1.0-cp312.py3-cp312.none-manylinux_2_28_x86_64.any.whl") == rank(
        "c-1.0-cp312-cp312-manylinux_2_28_x86_64.whl"
    )


def test_the_record_read_ahead_is_the_one_the_gate_takes(index_server, tmp_path: Path) -> None:
    """uv reads the metadata of the wheel the target's installer takes, lock reads that wheel's RECORD while uv
    resolves, and the gate judges that same wheel: one range request a package, none after uv, whichever wheel the lock
    lists first."""
    served = _served(index_server)
    own = f"py{PY.replace('.', '')}-none-any"
    for tag in ("py3-none-any", own, "py2-none-any"):
        served.add("lib", "1.1", tag=tag)
    done = _lock(
        tmp_path, served, "--platform", "x86_64-manylinux_2_28", packages='app = "==1.0"\nlib = "==1.1"'
    )
    assert not json.loads(done.stdout)["warnings"]
    ranged = [path for path in served.requests if "/files/lib-" in path and not path.endswith(".metadata")]
    assert ranged == [f"/default/files/lib-1.1-{own}.whl"], served.requests
    assert served.range_requests == 2  # app's and lib's, one each


def test_a_read_ahead_that_ends_while_the_gate_looks_is_taken(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The gate takes the reads ahead that have ended, then reads the rest: one that ends between those two looks
    was left out of both, and its wheel said unread (3 locks in 40, two cores under load)."""
    from concurrent.futures import Future

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    url = "http://127.0.0.1:1/app-1.0-py3-none-any.whl"
    ended: Future[wheelrecords.Ahead] = Future()
    ended.set_result((True, wheelrecords.parsed("app/__init__.py,sha256=abc,1\n")))
    wheelrecords.ahead(url, lambda _: ended)
    looks: list[str] = []

    def looked(at: str) -> bool:  # not ended at the first look, ended at every later one
        looks.append(at)
        return len(looks) > 1

    monkeypatch.setattr(wheelrecords, "ahead_ended", looked)
    try:
        found = wheelrecords.read_all([("app", "app-1.0-py3-none-any.whl", url, "c" * 64)], lambda: None)
    finally:
        wheelrecords.drop_ahead()
    assert found == {"app-1.0-py3-none-any.whl": {"app/__init__.py": "sha256=abc"}}


@pytest.mark.skipif(sys.platform != "linux", reason="Linux sets a thread's niceness by its id")
def test_reads_ahead_run_behind_uv() -> None:
    """A read ahead runs (and starts its HTTP exchanges) at a niceness BEHIND its caller's: uv, which the lock waits
    for, is not slowed by it where cores are few."""
    from provision.stacks import earlyrecords

    pool = earlyrecords.DaemonPool(2, "test-behind")
    ours = os.getpriority(os.PRIO_PROCESS, 0)

    def child_niceness() -> int:  # a thread the read starts (index.get's exchange) inherits it
        found: list[int] = []
        thread = threading.Thread(target=lambda: found.append(os.getpriority(os.PRIO_PROCESS, 0)))
        thread.start()
        thread.join()
        return found[0]

    try:
        own = pool.submit(lambda: os.getpriority(os.PRIO_PROCESS, 0)).result(timeout=30)
        started = pool.submit(child_niceness).result(timeout=30)
    finally:
        pool.shutdown()
    assert own == started == min(19, ours + earlyrecords.BEHIND)
    assert os.getpriority(os.PRIO_PROCESS, 0) == ours  # the caller's own is untouched
