"""Profiles and locks, shown: `profiles`, `profiles new`, `lock`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from provision.views import ui

if TYPE_CHECKING:  # annotations only: rendering one result must not import every operation
    from pathlib import Path

    from provision.stacks.lock import LockResult
    from provision.stacks.newprofile import NewProfile
    from provision.stacks.profiles import Profile


def profiles(items: Sequence[Profile], as_json: bool, skipped: Sequence[tuple[Path, str]] = ()) -> None:
    for path, why in skipped:
        ui.error(f"{path}: {why}: skipped, it is no profile file", "move it out of the profiles folder (or rename it)")
    if as_json:
        ui.dump_json({"profiles": [
            {"name": p.name, "cuda": p.cuda, "python": p.python, "description": p.description, "path": str(p.path),
             "indexes": list(p.indexes), "packages": [pk.requirement() for pk in p.packages],
             "content_hash": p.content_hash,
             "files": [{"path": f.path, "source": str(f.source), "sha256": f.sha256} for f in p.files]}
            for p in items], "skipped": [{"path": str(path), "reason": why} for path, why in skipped]})
        return
    out = ui.table("Profiles", "name", "CUDA", "Python", "description", "path")
    for p in items:
        out.add_row(p.name, p.cuda, ui.dash(p.python), p.description, str(p.path))
    ui.console().print(out)


def new_profile(result: NewProfile, as_json: bool) -> None:
    if as_json:
        ui.dump_json(result.to_dict())
        return
    out = ui.table(f"{result.path}: the stack {result.serving} pins (CUDA {result.cuda})", "package", "version", "index", "from")
    for pin in result.pins:
        extras = f"[{','.join(pin.extras)}]" if pin.extras else ""
        out.add_row(f"{pin.name}{extras}", pin.version or "any", pin.index, pin.why)
    ui.console().print(out)
    ui.info(f"metadata of {result.wheel} read by {result.metadata_from}; next: provision lock {result.path}")


def locked(result: LockResult, as_json: bool) -> None:
    if as_json:
        ui.dump_json(result.to_dict())
        return
    by_package: dict[str, list[Any]] = {}
    for p in result.packages:  # one row per package, however many files (wheels per platform) it locks
        by_package.setdefault(p.name, []).append(p)
    table = ui.table("", "package", "version", "index", "files", "hashes")
    for name, files in by_package.items():
        hashed = sum(1 for f in files if f.hash_source == "computed")
        source = {"git": f"git {files[0].url}", "editable": f"editable {files[0].url}: not hashed",
                  "directory": f"{files[0].url}: not hashed"}.get(files[0].hash_source)
        table.add_row(name, files[0].version or "-", files[0].index or "-", str(len(files)) if not source else "-",
                      source or ("from index" if not hashed else f"{hashed} computed" if hashed < len(files) else "computed"))
    out = ui.console()
    out.print(table)
    plural = "" if len(by_package) == 1 else "s"  # a line of its own: as a title it folds beside a narrow table
    out.print(f"{result.path}: {len(by_package)} package{plural}, {len(result.packages)} files, {result.seconds:.2f} s")
    if result.changes is not None:
        from provision.stacks import relock

        out.print("\n".join([f"changes since the {result.path} it replaced:", *(f"  {line}" for line in relock.describe(result.changes))]))
    out.print(f"rebuild: {result.rebuild}")
    if result.nightly:
        out.print(f"nightly date: {result.nightly} (every nightly package from that one date)")
    computed = [p.file for p in result.packages if p.hash_source == "computed"]
    if computed:
        out.print(f"hashed by provision (the index gives none): {', '.join(computed)}")
    for warning in result.warnings:
        out.print(f"warning ({warning['id']}): {warning['reason']}", style="yellow" if warning["id"] == "conflict-unread" else "red")
