"""A lock made again starts its uv before anything else (provision/stacks/ahead.py): from the record of the same
command line in the same folder, where the files it read are as they were. What is started ahead is taken only when it
is exactly the uv the lock runs; anything else (a changed profile, a damaged or planted record, an error before uv)
ends it and leaves nothing behind. Real provision, real uv, a real index on 127.0.0.1."""

from __future__ import annotations

import json
import os
import signal
import stat
import threading
import time
from pathlib import Path

import pytest
import tiny

from provision import regular

AHEAD = "uv was started ahead"
ENDED = "is not the one this lock runs"


def record_of(tool: tiny.Tool) -> Path:
    (path,) = (Path(os.environ["XDG_CACHE_HOME"]) / "provision" / "ahead").iterdir()
    return path


def edit(path: Path, change) -> None:
    entry = json.loads(path.read_bytes())
    change(entry["data"])
    path.write_text(json.dumps(entry))


def locked(tool: tiny.Tool, output: Path, *extra: str, env: dict[str, str] | None = None):
    return tool("lock", "tiny", "-o", str(output), "-v", *extra, env=env, check=False)


def versions(path: Path) -> dict[str, str]:
    import tomllib

    return {p["name"]: p["version"] for p in tomllib.loads(path.read_text())["packages"]}


@pytest.fixture
def temp(tmp_path: Path) -> Path:
    folder = tmp_path / "tmp"
    folder.mkdir()
    return folder


def leftovers(temp: Path) -> list[Path]:
    return list(temp.glob("provision-lock-*"))


def running_in(folder: Path) -> list[int]:
    """The processes whose working folder is under `folder`."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if os.readlink(entry / "cwd").startswith(str(folder)):
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def stand_in(tmp_path: Path, marker: Path) -> Path:
    """A program a record may name in place of uv: it says it ran (its pid in `marker`), then waits."""
    script = tmp_path / "stand-in-uv"
    script.write_text(f"#!/bin/sh\necho $$ > {marker}\nexec sleep 60\n")
    script.chmod(0o755)
    return script


def test_a_lock_made_again_takes_the_uv_started_ahead_and_writes_the_same_lock(
    tool: tiny.Tool, tmp_path: Path, temp: Path
) -> None:
    output = tmp_path / "pylock.tiny.toml"
    env = {"TMPDIR": str(temp)}
    first = locked(tool, output, env=env)
    assert first.returncode == 0 and AHEAD not in first.stderr, first.stderr
    record = record_of(tool)
    assert stat.S_IMODE(record.stat().st_mode) & 0o077 == 0
    text = output.read_text()
    again = locked(tool, output, env=env)
    assert again.returncode == 0 and AHEAD in again.stderr, again.stderr
    assert output.read_text() == text and not leftovers(temp)
    # the profile changed: its record is not used, and the lock is the new profile's
    tiny.profile(tool.profiles, packages='alpha = "==2.0"')
    changed = locked(tool, output, env=env)
    assert changed.returncode == 0 and AHEAD not in changed.stderr and ENDED not in changed.stderr
    assert versions(output) == {"alpha": "2.0"}
    assert AHEAD in locked(tool, output, env=env).stderr  # remembered again, for the new profile


def test_a_record_that_asks_for_another_lock_never_makes_it(
    tool: tiny.Tool, tmp_path: Path, temp: Path
) -> None:
    """A record changed behind provision's back (another pin in uv's input, another variable): the uv it starts is
    ended, and the lock is the profile's."""
    output = tmp_path / "pylock.tiny.toml"
    env = {"TMPDIR": str(temp)}
    assert locked(tool, output, env=env).returncode == 0
    record = record_of(tool)

    def another_pin(data: dict) -> None:
        data["files"]["pyproject.toml"]["text"] = data["files"]["pyproject.toml"]["text"].replace(
            "alpha==1.0", "alpha==2.0"
        )
        data["set"]["UV_HTTP_RETRIES"] = "7"

    edit(record, another_pin)
    done = locked(tool, output, env=env)
    assert done.returncode == 0 and ENDED in done.stderr and AHEAD not in done.stderr, done.stderr
    assert versions(output) == {"alpha": "1.0"} and not leftovers(temp)
    assert "alpha==2.0" not in record_of(tool).read_text()  # remembered as it ran


@pytest.mark.parametrize(
    "damage", ["garbage", "truncated", "fifo", "link", "folder", "shared", "escape", "relative-uv"]
)
def test_a_damaged_or_foreign_record_is_no_record(
    tool: tiny.Tool, tmp_path: Path, temp: Path, damage: str
) -> None:
    output = tmp_path / "pylock.tiny.toml"
    env = {"TMPDIR": str(temp)}
    assert locked(tool, output, env=env).returncode == 0
    record = record_of(tool)
    marker = tmp_path / "ran"
    edit(record, lambda data: data["uv"].__setitem__(0, str(stand_in(tmp_path, marker))))
    if damage == "garbage":
        record.write_bytes(b"\x00\xff{not json")
    elif damage == "truncated":
        record.write_bytes(record.read_bytes()[:-40])
    elif damage == "fifo":
        record.unlink()
        os.mkfifo(record)
    elif damage == "link":
        planted = tmp_path / "planted"
        record.rename(planted)
        record.symlink_to(planted)
    elif damage == "folder":
        record.unlink()
        record.mkdir()
    elif damage == "escape":  # a work file named out of the work folder
        edit(record, lambda data: data["files"].__setitem__("../escaped", {"text": "planted"}))
    elif damage == "relative-uv":  # a program found by the working folder or PATH
        edit(record, lambda data: data["uv"].__setitem__(0, "stand-in-uv"))
    else:  # a record others could have written is never read, whatever it says
        record.parent.chmod(0o777)
    started = time.monotonic()
    done = locked(tool, output, env=env)
    assert done.returncode == 0 and AHEAD not in done.stderr and "Traceback" not in done.stderr, done.stderr
    assert time.monotonic() - started < 60 and not marker.exists() and not (temp / "escaped").exists()
    assert versions(output) == {"alpha": "1.0"} and not leftovers(temp)
    if damage != "shared":  # rewritten as a record
        assert stat.S_ISREG(record_of(tool).lstat().st_mode)


def test_an_ahead_start_nobody_claims_is_ended_and_its_folder_removed(
    tool: tiny.Tool, tmp_path: Path, temp: Path
) -> None:
    output = tmp_path / "pylock.tiny.toml"
    env = {"TMPDIR": str(temp)}
    assert locked(tool, output, env=env).returncode == 0
    marker = tmp_path / "ran"
    # the lock stops before uv (a profile it refuses), where the record says the profile is as it was
    profile = tool.profiles / "tiny.toml"
    profile.write_text(profile.read_text().replace("schema = 1", "schema = 99"))
    seen = profile.stat()

    def started_anyway(data: dict) -> None:
        data["uv"][0] = str(stand_in(tmp_path, marker))
        data["inputs"][str(profile)] = regular.stamp_of(seen)

    edit(record_of(tool), started_anyway)
    done = locked(tool, output, env=env)
    assert done.returncode == 4 and "schema" in done.stderr, done.stderr
    assert marker.exists(), "nothing was started ahead"
    assert not leftovers(temp) and not running_in(temp)
    pid = int(marker.read_text())
    assert _state(pid) == "Z", "what was started ahead outlived provision"
    tiny.profile(tool.profiles)
    seen = profile.stat()
    edit(record_of(tool), started_anyway)
    # a record that names what is not the lock's uv is ended when the lock comes to run uv, and remembered anew
    again = locked(tool, output, env=env)
    assert again.returncode == 0 and ENDED in again.stderr and not leftovers(temp) and not running_in(temp)
    assert "stand-in-uv" not in record_of(tool).read_text()


def test_a_kill_9_takes_the_uv_started_ahead_down_and_the_next_lock_removes_its_folder(
    tool: tiny.Tool, tmp_path: Path, temp: Path
) -> None:
    output = tmp_path / "pylock.tiny.toml"
    env = {"TMPDIR": str(temp)}
    assert locked(tool, output, env=env).returncode == 0
    asked = len(tool.served.requests)
    # the uv started ahead waits on the index: provision is killed meanwhile
    tool.served.hold = threading.Event()
    try:
        slow = tool.popen("lock", "tiny", "-o", str(output), "-v", env=env)
        deadline = time.time() + 60
        while time.time() < deadline and not (running_in(temp) and len(tool.served.requests) > asked):
            time.sleep(0.05)
        uv = running_in(temp)
        assert uv and leftovers(temp)
        slow.send_signal(signal.SIGKILL)
        slow.wait()
        deadline = time.time() + 10
        while time.time() < deadline and any(_state(pid) != "Z" for pid in uv):
            time.sleep(0.05)
        assert all(_state(pid) == "Z" for pid in uv), "the uv started ahead outlived provision"
    finally:
        tool.served.hold.set()
        tool.served.hold = None
    done = locked(tool, output, env=env)
    assert done.returncode == 0 and not leftovers(temp), done.stderr


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "Z"


def test_a_uv_given_credentials_is_never_remembered(
    tool: tiny.Tool, tmp_path: Path, index_server, temp: Path
) -> None:
    output = tmp_path / "pylock.tiny.toml"
    env = {"TMPDIR": str(temp)}
    assert locked(tool, output, env=env).returncode == 0
    secret = "S3cr3t-ahead"
    tool.served.password = secret
    with_password = tool.served.url.replace("http://", f"http://alice:{secret}@")
    done = locked(tool, output, env={**env, "PROVISION_INDEX_DEFAULT": with_password})
    assert done.returncode == 0 and AHEAD not in done.stderr, done.stderr
    cache = Path(os.environ["XDG_CACHE_HOME"]) / "provision"
    # the first run's: this one's environment is another key
    assert len(list((cache / "ahead").iterdir())) == 1
    assert not any(secret.encode() in p.read_bytes() for p in cache.rglob("*") if p.is_file())
    again = locked(tool, output, env={**env, "PROVISION_INDEX_DEFAULT": with_password})
    assert again.returncode == 0 and AHEAD not in again.stderr, again.stderr


def test_a_variable_set_since_is_never_seen_by_a_uv_started_ahead(
    tool: tiny.Tool, tmp_path: Path, index_server, temp: Path
) -> None:
    """uv settings provision does not honour, set after the record was made: the uv started ahead would have asked
    the evil index had it run with them (the fresh clone's suite caught it: a record's environment laid over the new
    one)."""
    evil = index_server.index("evil")
    evil.add("alpha", "9.0")
    output = tmp_path / "pylock.tiny.toml"
    env = {"TMPDIR": str(temp)}
    assert locked(tool, output, env=env).returncode == 0
    bending = {**env, "UV_INDEX": f"evil={evil.url}", "UV_INDEX_STRATEGY": "unsafe-best-match"}
    done = locked(tool, output, env=bending)
    assert done.returncode == 0 and AHEAD not in done.stderr and ENDED not in done.stderr, done.stderr
    assert versions(output) == {"alpha": "1.0"} and not evil.requests, evil.requests
    assert AHEAD in locked(tool, output, env=bending).stderr and not evil.requests  # its own record now


def test_gc_shows_and_prunes_the_records(tool: tiny.Tool, tmp_path: Path, temp: Path) -> None:
    output = tmp_path / "pylock.tiny.toml"
    env = {"TMPDIR": str(temp)}
    assert locked(tool, output, env=env).returncode == 0
    caches = {c["name"]: c for c in json.loads(tool("gc", "--cache", "--json").stdout)["caches"]}
    assert caches["ahead"]["entries"] == 1 and caches["ahead"]["path"].endswith("/provision/ahead")
    pruned = {
        c["name"]: c
        for c in json.loads(tool("gc", "--cache", "--older-than", "0", "--json").stdout)["caches"]
    }
    assert pruned["ahead"]["removed"] == 1 and pruned["ahead"]["entries"] == 0
    done = locked(tool, output, env=env)
    assert done.returncode == 0 and AHEAD not in done.stderr, done.stderr


def test_an_index_url_with_a_token_in_its_path_is_never_remembered(
    tmp_path: Path, provision_bin: str, index_server, temp: Path
) -> None:
    """What provision shows as **** (log.redact) it never writes: an index whose URL carries a token-like segment."""
    token = "Tok3nSecretAhead0123456789"
    served = tiny.index(index_server, token)
    tool = tiny.make_tool(tmp_path, provision_bin, served)
    output = tmp_path / "pylock.tiny.toml"
    for _ in range(2):
        done = locked(tool, output, env={"TMPDIR": str(temp)})
        assert done.returncode == 0 and AHEAD not in done.stderr, done.stderr
    cache = Path(os.environ["XDG_CACHE_HOME"]) / "provision"
    assert not (cache / "ahead").exists() or not list((cache / "ahead").iterdir())


def test_an_index_down_is_one_line_with_a_uv_started_ahead_and_the_lock_in_place_kept(
    tool: tiny.Tool, tmp_path: Path, index_server, temp: Path
) -> None:
    output = tmp_path / "pylock.tiny.toml"
    env = {"TMPDIR": str(temp), "UV_CACHE_DIR": str(tmp_path / "own-cache")}
    assert locked(tool, output, env=env).returncode == 0
    before = output.read_bytes()
    index_server.down.add("tiny")
    done = locked(tool, output, env=env)
    assert AHEAD in done.stderr, done.stderr
    # provision's own two lines end it (-v shows uv's stderr above them)
    *_, error, hint = done.stderr.rstrip("\n").splitlines()
    assert done.returncode == 5 and error.startswith("error: index request failed") and "503" in error, (
        done.stderr
    )
    assert hint.startswith("hint: check that the index is up") and "Traceback" not in done.stderr
    assert output.read_bytes() == before and not leftovers(temp) and not running_in(temp)


def test_two_copies_of_the_same_lock_at_once_each_take_their_own_uv(
    tool: tiny.Tool, tmp_path: Path, temp: Path
) -> None:
    """The same command line twice at once, a record there: each starts its own uv ahead, in its own folder, takes
    it, and writes the same lock; nothing is left."""
    output = tmp_path / "pylock.tiny.toml"
    env = {"TMPDIR": str(temp)}
    first = tool.popen("lock", "tiny", "-o", str(output), "-v", env=env)
    assert first.wait(120) == 0
    text = output.read_text()
    both = [tool.popen("lock", "tiny", "-o", str(output), "-v", env=env) for _ in range(2)]
    said = [process.communicate(timeout=120)[1] for process in both]
    assert [p.returncode for p in both] == [0, 0], said
    assert all(AHEAD in err for err in said), said
    assert output.read_text() == text and not leftovers(temp) and not running_in(temp)


@pytest.mark.parametrize("stop", ["TERM", "HUP"])
def test_a_stop_while_the_command_line_loads_is_taken_as_ctrl_c(
    tool: tiny.Tool, tmp_path: Path, temp: Path, stop: str
) -> None:
    """A uv started ahead asks the index while click loads: a SIGTERM then (a service stopped, a CI timeout) killed
    provision with the system's default, before its handling was in place, and left the work folder. What is started
    ahead here sends it the stop at once, as early as a stop can come."""
    output = tmp_path / "pylock.tiny.toml"
    env = {"TMPDIR": str(temp)}
    assert locked(tool, output, env=env).returncode == 0
    before = output.read_bytes()
    sender = tmp_path / "stopping-uv"
    sender.write_text(f"#!/bin/sh\nkill -{stop} $PPID\nexec sleep 60\n")
    sender.chmod(0o755)
    edit(record_of(tool), lambda data: data["uv"].__setitem__(0, str(sender)))
    process = tool.popen("lock", "tiny", "-o", str(output), "-v", env=env)
    _, err = process.communicate(timeout=120)
    assert process.returncode == 130 and "interrupted" in err and "Traceback" not in err, (
        process.returncode,
        err,
    )
    assert output.read_bytes() == before and not leftovers(temp) and not running_in(temp)
