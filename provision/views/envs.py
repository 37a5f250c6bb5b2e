"""Environments, shown: `create`, `envs`, `switch`, `rollback`, `adopt` and `lock --env`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from provision.views import ui
from provision.views.render import Info, Shown

if TYPE_CHECKING:  # annotations only: rendering one result must not import every operation
    from pathlib import Path

    from provision.envs.accept import AcceptResult
    from provision.envs.adopted import AdoptLock
    from provision.envs.lifecycle import CreateResult
    from provision.errors import ProvisionError


def created(result: CreateResult, as_json: bool) -> None:
    if as_json:
        ui.dump_json(result.to_dict())
        return
    if result.checks:
        from provision.views import checks as check_views
        from provision.views.render import render

        render(Shown(blocks=check_views.check_blocks(result.name, result.checks)), "table")
    if result.accepted_reapplied:
        ui.info(f"accepted files of the build it replaces, written again: {', '.join(result.accepted_reapplied)}")
    for dropped in result.accepted_dropped:
        ui.info(f"note: the accepted {dropped['path']} was not carried over: {dropped['reason']}")
    if result.passed:
        state = "and made it active" if result.activated else "(not activated)"
        ui.info(f"built {result.name} at {result.path} {state}; lock {result.lock}" + (" (reused)" if result.lock_reused else ""))
    elif result.kept_as:
        ui.info(f"{result.name}: checks failed; the build is kept as {result.kept_as} ({result.path}: never activated; "
                f"provision remove {result.kept_as} or provision gc removes it) and the active environment is unchanged")
    else:
        ui.info(f"{result.name}: checks failed; the build was removed and the active environment is unchanged "
                "(create --keep-failed keeps it to look into)")


def environments(root: object, rows: list[dict[str, object]], as_json: bool, uv_cache: str = "") -> None:
    if as_json:
        ui.dump_json({"home": str(root), "uv_cache": uv_cache, "environments": rows})
        return
    table = ui.table(f"Environments in {root}", "", "name", "profile", "CUDA", "Python", "size", "built", "checks", "baseline")
    for r in rows:
        base = r.get("baseline") or {}
        figure = f"{base['figure']:.1f} {base['unit']}" if isinstance(base, dict) and base.get("figure") is not None else "-"
        table.add_row("*" if r["active"] else "", str(r["name"]) + (" (adopted)" if r["adopted"] else "") + (" (failed)" if r.get("failed") else ""),
                      ui.dash(r["profile"]), ui.dash(r["cuda"]), ui.dash(r["python"]), ui.size(r["size_bytes"]),
                      str(r["created"] or "-")[:16], ui.status_text(str(r["check_status"])) if r["check_status"] else "-", figure)
    table.caption = f"* active; stable path: {root}/active/venv; uv's cache (UV_CACHE_DIR): {uv_cache or '-'}"
    ui.console().print(table)


def switched(previous: str | None, now_active: str, skipped: list[str]) -> Shown:
    note = f" (skipped removed: {', '.join(skipped)})" if skipped else ""
    return Shown({"previous": previous, "active": now_active, "skipped": skipped},
                 [Info(f"active: {now_active} (was {previous or 'none'}){note}")])


def adopted(name: str, venv: Path, build: Path, locked: AdoptLock | None, error: ProvisionError | None, as_json: bool) -> None:
    if as_json:
        document: dict[str, object] = {"adopted": name, "venv": str(venv), "path": str(build), "lock": None}
        if locked is not None:
            document.update(locked.to_dict())
        if error is not None:
            document["lock_error"] = {"message": error.message, "hint": error.hint}
        ui.dump_json(document)
        return
    ui.console().print(f"adopted {venv} as {name} ({build})")
    if locked is not None:
        env_locked(locked, False)
    elif error is not None:
        ui.console().print(f"not locked: {error.message}; once that is mended: provision lock --env {name}")
    else:
        ui.console().print(f"not locked (--no-lock): drift compares its files with their RECORDs only; provision lock --env {name} locks it")


def env_locked(locked: AdoptLock, as_json: bool) -> None:
    if as_json:
        ui.dump_json({"environment": locked.name, "venv": str(locked.venv), **locked.to_dict()})
        return
    out = ui.console()
    r = locked.result
    total = len(r.matched) + len(r.unmatched)
    sources = ", ".join(f"{n} from {where}" for where, n in sorted(r.records.items()))
    out.print(f"locked {locked.name}: {len(r.matched)} of {total} distributions matched to their wheels"
              + (f" (RECORDs: {sources})" if sources else "") + f" in {r.seconds:.1f} s; lock {locked.lock}")
    for index_name, why in r.unreachable.items():
        out.print(f"index {index_name} ({r.indexes.get(index_name, '')}) unreachable: {why}")
    if r.unmatched:
        out.print(f"not restorable ({len(r.unmatched)}; drift still compares their files with their RECORDs):")
        by_reason: dict[str, list[str]] = {}
        for u in r.unmatched:
            by_reason.setdefault(u.reason, []).append(f"{u.name} {u.version}")
        for reason, names in by_reason.items():  # one line per reason: an unreachable index is one line, not 200
            out.print(f"  {names[0]}: {reason}" if len(names) == 1 else f"  {reason}: {', '.join(names)}")


def accepted(result: AcceptResult, as_json: bool) -> None:
    if as_json:
        ui.dump_json(result.to_dict())
        return
    out = ui.console()  # results, on stdout: -q keeps them
    for file in result.accepted:
        owner = f" (over {file.owner})" if file.owner else ""
        out.print(f"accepted {file.path}{owner}: sha256 {file.sha256[:16]}..., kept in {result.build / 'accepted'}")
    for path in result.dropped:
        out.print(f"dropped {path}: drift judges it by its RECORD again (or as unowned)")
    for skipped in result.not_accepted:
        out.print(f"not accepted: {skipped['kind']} {skipped['path']}: {skipped['reason']}")
    if not (result.accepted or result.dropped or result.not_accepted):
        out.print(f"{result.name}: nothing differs from its known-good state; nothing to accept")
    out.print(f"{result.name}: {len(result.files)} accepted file(s)" + (": " + ", ".join(f.path for f in result.files) if result.files else ""))
