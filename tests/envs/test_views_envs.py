"""The environment commands' views build a `Shown` from the operation's record (tests/cli/test_render.py checks that the
commands and views never print or exit): the document, the lines and the exit code: create's 1 when its checks
failed, restore's 1 where something is not put back, shell-env's text as is."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from provision.commands.create import CreateResult
from provision.envs.adopted import Adopted, LockError
from provision.envs.cleanup import Removed
from provision.envs.drift import Drift, Finding
from provision.envs.restore import RestoreResult
from provision.records.results import CheckResult
from provision.views import envs as views
from provision.views import render
from provision.views.render import Info, Line, Raw, Table
from provision.views.restore import restored


def _created(**changes: object) -> CreateResult:
    base = CreateResult(
        name="cu130",
        path=Path("/h/builds/cu130-x"),
        activated=True,
        passed=True,
        lock="/h/locks/l.toml",
        checks=[CheckResult(id="imports", status="pass", seconds=0.5, reason="ok")],
    )
    return dataclasses.replace(base, **changes)  # type: ignore[arg-type]


def test_created_exits_1_when_its_checks_failed_and_says_where_the_build_went() -> None:
    ok = views.created(_created())
    assert ok.exit_code == 0
    assert ok.document == _created().to_dict() and ok.document["accepted_dropped"] == []
    failed = views.created(
        _created(
            activated=False,
            passed=False,
            kept_as="cu130-failed-1",
            checks=[CheckResult(id="imports", status="fail", output_tail="Traceback")],
        )
    )
    assert failed.exit_code == 1
    lines = [b.text for b in failed.blocks if isinstance(b, (Info, Line))]
    assert any("--- imports output (last lines) ---\nTraceback" in t for t in lines)
    assert any("kept as cu130-failed-1" in t for t in lines)


def test_remove_and_gc_documents_are_their_records() -> None:
    from provision.commands.gc import GcResult
    from provision.stacks.caches import Cache

    assert views.removed(Removed("cu128")).document == {"removed": "cu128"}
    nothing = views.collected(GcResult())
    assert (
        nothing.document is not None
        and nothing.document["removed"] == []
        and nothing.document["caches"] == []
    )
    assert [b.text for b in nothing.blocks if isinstance(b, Info)] == ["nothing to clean"]
    wheels = Cache(
        name="wheels", path="/c/provision/wheels", entries=2, bytes=3 << 30, removed=1, removed_bytes=1 << 30
    )
    two = views.collected(GcResult(removed=("builds/a", "locks/b (unreadable)"), caches=(wheels,)))
    assert two.document is not None and two.document["removed"] == ["builds/a", "locks/b (unreadable)"]
    assert two.document["caches"] == [wheels.to_dict()] and two.document["schema_version"] == 1
    assert [b.text for b in two.blocks if isinstance(b, Info)] == [
        "removed builds/a\nremoved locks/b (unreadable)"
    ]
    (table,) = [b for b in two.blocks if isinstance(b, Table)]
    assert table.rows == (("wheels", "/c/provision/wheels", "2", "3.0 GiB", "1 (1.0 GiB)"),)
    alone = views.collected(GcResult(caches=(wheels,), cache_only=True))
    assert not [b for b in alone.blocks if isinstance(b, Info)]  # --cache: the home is not spoken of


def test_adopted_without_a_lock_says_why_and_keeps_lock_null() -> None:
    result = Adopted(
        name="old",
        venv=Path("/srv/v"),
        build=Path("/h/builds/old-adopted-x"),
        lock_error=LockError("uv named no default index", "set PROVISION_INDEX_DEFAULT"),
    )
    shown = views.adopted(result)
    assert shown.document == {
        "adopted": "old",
        "venv": "/srv/v",
        "path": "/h/builds/old-adopted-x",
        "lock": None,
        "notes": [],
        "lock_error": {"message": "uv named no default index", "hint": "set PROVISION_INDEX_DEFAULT"},
    }
    assert shown.exit_code == 0
    assert any("not locked: uv named no default index" in b.text for b in shown.blocks if isinstance(b, Line))


def test_shell_env_text_reaches_stdout_exactly(capsys: pytest.CaptureFixture[str]) -> None:
    lines = ["export A='x y'", "provision_deactivate() { unset A; }"]
    shown = views.shell_lines(lines)
    assert shown.document is None and shown.blocks == [
        Raw("export A='x y'\nprovision_deactivate() { unset A; }\n")
    ]
    assert render.render(shown, "table") == 0
    out, err = capsys.readouterr()
    assert out == "export A='x y'\nprovision_deactivate() { unset A; }\n" and err == ""


def _restore(tmp_path: Path, **changes: object) -> RestoreResult:
    before = Drift(
        venv=tmp_path,
        site=tmp_path,
        lock="/h/pylock.toml",
        findings=[Finding(kind="modified", distribution="tiny", path="tiny/__init__.py")],
    )
    base = RestoreResult(name="tiny", venv=tmp_path, dry_run=True, before=before, reinstall=("tiny",))
    return dataclasses.replace(base, **changes)  # type: ignore[arg-type]


def test_restore_exits_as_the_restore_did(tmp_path: Path) -> None:
    plan = restored(_restore(tmp_path))
    assert plan.exit_code == 0 and plan.document is not None and plan.document["reinstall"] == ["tiny"]
    assert [b.text for b in plan.blocks if isinstance(b, Line)][-1] == "would reinstall: tiny"
    # a dry run exits as the restore would
    assert restored(_restore(tmp_path, not_restorable=("other",))).exit_code == 1
    assert (
        restored(
            _restore(tmp_path, dry_run=False, checks=[CheckResult(id="imports", status="error")])
        ).exit_code
        == 1
    )
    assert restored(_restore(tmp_path, dry_run=False, baseline_error="no GPU")).exit_code == 1
