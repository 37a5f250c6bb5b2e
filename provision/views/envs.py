"""Environments, shown: `create`, `envs`, `switch` and `rollback`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from provision.views import checks as check_views
from provision.views import ui

if TYPE_CHECKING:  # annotations only: rendering one result must not import every operation
    from provision.envs.lifecycle import CreateResult


def created(result: CreateResult, as_json: bool) -> None:
    if as_json:
        ui.dump_json(result.to_dict())
        return
    if result.checks:
        check_views.checks(result.name, result.checks, False)
    if result.passed:
        state = "and made it active" if result.activated else "(not activated)"
        ui.info(f"built {result.name} at {result.path} {state}; lock {result.lock}" + (" (reused)" if result.lock_reused else ""))
    else:
        ui.info(f"{result.name}: checks failed; the build was removed and the active environment is unchanged")


def environments(root: object, rows: list[dict[str, object]], as_json: bool, uv_cache: str = "") -> None:
    if as_json:
        ui.dump_json({"home": str(root), "uv_cache": uv_cache, "environments": rows})
        return
    table = ui.table(f"Environments in {root}", "", "name", "profile", "CUDA", "Python", "size", "built", "checks", "baseline")
    for r in rows:
        base = r.get("baseline") or {}
        figure = f"{base['figure']:.1f} {base['unit']}" if isinstance(base, dict) and base.get("figure") is not None else "-"
        table.add_row("*" if r["active"] else "", str(r["name"]) + (" (adopted)" if r["adopted"] else ""),
                      ui.dash(r["profile"]), ui.dash(r["cuda"]), ui.dash(r["python"]), ui.size(r["size_bytes"]),
                      str(r["created"] or "-")[:16], ui.status_text(str(r["check_status"])) if r["check_status"] else "-", figure)
    table.caption = f"* active; stable path: {root}/active/venv; uv's cache (UV_CACHE_DIR): {uv_cache or '-'}"
    ui.console().print(table)


def switched(previous: str | None, now_active: str, skipped: list[str], as_json: bool) -> None:
    if as_json:
        ui.dump_json({"previous": previous, "active": now_active, "skipped": skipped})
        return
    note = f" (skipped removed: {', '.join(skipped)})" if skipped else ""
    ui.info(f"active: {now_active} (was {previous or 'none'}){note}")
