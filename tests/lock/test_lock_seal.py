"""Every reader of a lock requires its seal ([tool.provision] packages_sha256): a lock provision wrote, with a wheel's
sha256 swapped and the seal line deleted, or with [tool.provision] turned into dotted keys of the last package (so
that no seal is at the top), is refused by create --lock and report --lock (exit 2, naming the lock and the way
out); --allow-unsealed reads it, saying so on stderr even under -q."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
import tiny
from conftest import ROOT
from launch import run_provision

from provision import toml
from provision.stacks import lockfile

H200 = ROOT / "docs/machines/h200.probe.json"
SWAPPED = "ab" * 32


def swapped(lock: Path) -> str:
    """The lock's text with alpha's sha256 swapped for another."""
    text = lock.read_text()
    digest = re.search(r'sha256 = "([0-9a-f]{64})"', text)
    assert digest is not None, text
    return text.replace(digest.group(1), SWAPPED)


def unsealed_by_deletion(text: str) -> str:
    return re.sub(r"(?m)^packages_sha256 = .*\n", "", text)


def unsealed_by_dotted_keys(text: str) -> str:
    """[tool.provision] as dotted keys: they now belong to the last [[packages]] table, and the top has no seal."""
    head, _, tables = text.partition("[tool.provision]\n")
    prefix, lines = "tool.provision.", []
    for line in tables.splitlines():
        if line.startswith("["):  # a subtable: [tool.provision.indexes]
            prefix = line.strip("[]") + "."
        elif line.strip():
            lines.append(prefix + line)
    return head + "\n".join(lines) + "\n"


@pytest.mark.parametrize("unseal", [unsealed_by_deletion, unsealed_by_dotted_keys])
def test_a_lock_without_its_seal_is_refused_by_create_and_report(
    tool: tiny.Tool, tmp_path: Path, unseal
) -> None:
    lock = tmp_path / "pylock.tiny.toml"
    tool("lock", "tiny", "-o", str(lock))
    lock.write_text(unseal(swapped(lock)))
    assert SWAPPED in lock.read_text() and "packages_sha256" not in toml.loads(lock.read_text()).get(
        "tool", {}
    ).get("provision", {})
    made = tool.create("tiny", "--lock", str(lock), "--no-checks", check=False)
    reported = tool(
        "report", "--lock", str(lock), "--machine", str(H200), "--no-fetch", "--json", check=False
    )
    for done in (made, reported):
        lines = done.stderr.strip().splitlines()
        assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
        assert lines[-2].startswith(
            f"error: {lock}: the lock has no seal ([tool.provision] packages_sha256"
        ), lines
        assert "re-lock it" in lines[-1] and "--allow-unsealed" in lines[-1], lines
    assert not tool.builds() and "tiny" not in tool.envs()


def test_an_unsealed_lock_is_read_with_allow_unsealed_and_said_loudly(
    tool: tiny.Tool, tmp_path: Path
) -> None:
    lock = tmp_path / "pylock.tiny.toml"
    tool("lock", "tiny", "-o", str(lock))
    # an older provision's lock: no seal, nothing changed
    lock.write_text(unsealed_by_deletion(lock.read_text()))
    done = tool("-q", "create", "tiny", "--lock", str(lock), "--no-checks", "--allow-unsealed")
    warnings = [line for line in done.stderr.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 1 and str(lock) in warnings[0] and "--allow-unsealed" in warnings[0], done.stderr
    assert "tiny" in tool.envs()
    # the build's copy is sealed as what was built: drift reads it later without the option
    drift = tool("check", "tiny", "--only", "drift", "--json", check=False)
    assert drift.returncode == 0 and "warning:" not in drift.stderr, drift.stdout + drift.stderr
    reported = tool(
        "report",
        "--lock",
        str(lock),
        "--machine",
        str(H200),
        "--no-fetch",
        "--json",
        "--allow-unsealed",
        check=False,
    )
    assert reported.returncode in (0, 1) and "warning:" in reported.stderr, reported.stderr


def test_a_lock_of_another_tool_is_refused_naming_the_option(tmp_path: Path) -> None:
    lock = tmp_path / "pylock.toml"
    lock.write_text('lock-version = "1.0"\ncreated-by = "uv"\npackages = []\n')
    with pytest.raises(Exception, match="not written by this provision") as caught:
        lockfile.read(lock)
    assert "--allow-unsealed" in getattr(caught.value, "hint", "")
    assert lockfile.read(lock, allow_unsealed=True)[0].packages == []
    env = {**os.environ, "PROVISION_HOME": str(tmp_path / "home")}
    done = run_provision("report", "--lock", str(lock), "--machine", str(H200), "--json", env=env)
    assert done.returncode == 2 and "no seal" in done.stderr, done.stderr


def test_a_lock_uv_wrote_that_pep_751_rejects_is_a_resolve_error_however_it_is_validated() -> None:
    """Validated while the gate's last reads are under way (a lock that changes) or when it is written (one whose
    packages are the lock in place's): the same packaging.pylock check, the same error."""
    from provision.errors import ResolveError
    from provision.stacks import lock

    wheel = {
        "name": "alpha-1.0-py3-none-any.whl",
        "url": "https://example.invalid/alpha-1.0-py3-none-any.whl",
        "hashes": {"sha256": "0" * 64},
    }
    bad = {
        "lock-version": "1.0",
        "packages": [{"name": "alpha", "version": "not a version", "wheels": [wheel]}],
    }
    with pytest.raises(ResolveError, match="uv produced a lock that PEP 751 rejects"):
        lock._validate(dict(bad))
    with pytest.raises(ResolveError, match="uv produced a lock that PEP 751 rejects"):
        lock._document(dict(bad), "")
    good = {"lock-version": "1.0", "packages": [{"name": "alpha", "version": "1.0", "wheels": [wheel]}]}
    assert lock._validate(good) and good["created-by"]


def test_a_lock_pep_751_rejects_stops_the_early_reads_and_leaves_no_work_folder_nor_lock(
    index_server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """_validate now runs before the gate waits for the early RECORD reads: its error must still stop them, remove
    uv's work folder, and write nothing (a lock in place stays as it was)."""
    import threading

    from test_lock_again import PY, _served

    from provision.errors import ResolveError
    from provision.stacks import lock, profiles

    served = _served(index_server)
    monkeypatch.setenv("UV_CACHE_DIR", str(tmp_path / "uv"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    profile = profiles.load_file(tiny.profile(tmp_path, "mine", packages='app = "==1.0"'))
    output = tmp_path / "pylock.mine.toml"
    output.write_text("# a lock in place that is not a lock\n")

    def rejected(raw: dict) -> bool:
        raise ResolveError("uv produced a lock that PEP 751 rejects: made up here", "report this")

    monkeypatch.setattr(lock, "_validate", rejected)
    with pytest.raises(ResolveError, match="PEP 751 rejects"):
        lock.lock(
            profile,
            target=lock.Target(python=PY, platform=None),
            overrides={"default": served.url},
            output=output,
            work=tmp_path / "build",
        )
    assert output.read_text() == "# a lock in place that is not a lock\n"
    assert not (tmp_path / "build" / "lock-work").exists()
    assert not [t for t in threading.enumerate() if t.name.startswith("early-records") and t.is_alive()]
