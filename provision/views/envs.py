"""Environments, shown: `create`, `envs`, `switch`, `rollback`, `remove`, `gc`, `adopt`, `shell-env`, `accept` and
`lock --env`. Each builds a `Shown` from its operation's record; nothing here prints or imports rich."""

from __future__ import annotations

from typing import TYPE_CHECKING

from provision.views import ui
from provision.views.render import Block, Info, Line, Raw, Shown, TableBuilder, Verdict

if TYPE_CHECKING:  # annotations only: rendering one result must not import every operation
    from provision.commands.create import CreateResult
    from provision.commands.gc import GcResult
    from provision.envs.accept import AcceptResult
    from provision.envs.adopted import Adopted, AdoptLock
    from provision.envs.cleanup import Removed
    from provision.envs.inventory import Listing


def created(result: CreateResult) -> Shown:
    """The checks' table, then what became of the build; exit 1 when its checks failed."""
    blocks: list[Block] = []
    if result.checks:
        from provision.views.checks import check_blocks

        blocks += check_blocks(result.name, result.checks)
    if result.accepted_reapplied:
        blocks.append(
            Info(
                f"accepted files of the build it replaces, written again: {', '.join(result.accepted_reapplied)}"
            )
        )
    blocks += [
        Info(f"note: the accepted {d.path} was not carried over: {d.reason}") for d in result.accepted_dropped
    ]
    if result.passed:
        state = "and made it active" if result.activated else "(not activated)"
        blocks.append(Info(f"built {result.name} at {result.path} {state}; {_lock_said(result)}"))
    elif result.kept_as:
        blocks.append(
            Info(
                f"{result.name}: checks failed; the build is kept as {result.kept_as} ({result.path}: never activated; "
                f"provision remove {result.kept_as} or provision gc removes it) and the active environment is unchanged"
            )
        )
    else:
        blocks.append(
            Info(
                f"{result.name}: checks failed; the build was removed and the active environment is unchanged "
                "(create --keep-failed keeps it to look into)"
            )
        )
    if result.lock_note:  # the profile's lock in lockfiles/ (what report --lock judged) is not what was built
        blocks.append(Info(f"note: {result.lock_note}"))
    return Shown(result.to_dict(), blocks, exit_code=0 if result.passed else 1)


def _lock_said(result: CreateResult) -> str:
    """Which lock the build was made from, and why that one."""
    if result.lock_origin == "given":
        return f"lock {result.lock_source} (given; copied into the build)"
    if result.lock_origin == "lockfiles":
        return f"lock {result.lock_source} (the profile's own, current; copied into the build)"
    return f"lock {result.lock}" + (" (reused)" if result.lock_reused else "")


def environments(listing: Listing) -> Shown:
    root = listing.home
    table = TableBuilder(
        f"Environments in {root}",
        "",
        "name",
        "profile",
        "CUDA",
        "Python",
        "size",
        "built",
        "checks",
        "baseline",
        caption=f"* active; stable path: {root}/active/venv; uv's cache (UV_CACHE_DIR): {listing.uv_cache or '-'}",
    )
    for r in listing.environments:
        base = r.baseline
        figure = f"{base.figure:.1f} {base.unit}" if base is not None and base.figure is not None else "-"
        table.add(
            "*" if r.active else "",
            r.name + (" (adopted)" if r.adopted else "") + (" (failed)" if r.failed else ""),
            ui.dash(r.profile),
            ui.dash(r.cuda),
            ui.dash(r.python),
            ui.size(r.size_bytes),
            ui.moment(r.created),
            Verdict(r.check_status) if r.check_status else "-",
            figure,
        )
    blocks: list[Block] = [table.done()]
    for r in listing.environments:  # the upgrade that built or moved to it: its decision and its undo
        if r.upgrade is not None:
            said = r.upgrade.get("error") or (
                f"{r.upgrade.get('decision') or 'unfinished'}"
                + (f" (undo: {r.upgrade['undo']})" if r.upgrade.get("undo") else "")
            )
            blocks.append(Line(f"{r.name}: upgrade from {r.upgrade.get('from', '?')}: {said}"))
    return Shown(listing.to_dict(), blocks)


def switched(previous: str | None, now_active: str, skipped: list[str]) -> Shown:
    note = f" (skipped removed: {', '.join(skipped)})" if skipped else ""
    return Shown(
        {"previous": previous, "active": now_active, "skipped": skipped},
        [Info(f"active: {now_active} (was {previous or 'none'}){note}")],
    )


def removed(result: Removed) -> Shown:
    return Shown(result.to_dict(), [Info(f"removed {result.name}")])


def collected(result: GcResult) -> Shown:
    lines = [f"removed {r}" for r in result.removed]
    table = TableBuilder(
        "provision's caches",
        "cache",
        "where",
        "entries",
        "size",
        "removed",
        caption=f"removed: cached wheels no lock names, and what was not used for {result.older_than_days:g} days",
    )
    for cache in result.caches:
        table.add(
            cache.name,
            cache.path,
            str(cache.entries),
            ui.size(cache.bytes),
            f"{cache.removed} ({ui.size(cache.removed_bytes)})" if cache.removed else "-",
        )
    blocks: list[Block] = [] if result.cache_only else [Info("\n".join(lines) or "nothing to clean")]
    return Shown(result.to_dict(), [*blocks, table.done()])


def adopted(result: Adopted) -> Shown:
    blocks: list[Block] = [Line(f"adopted {result.venv} as {result.name} ({result.build})")]
    blocks += [Line(f"note: {note}") for note in result.notes]
    if result.locked is not None:
        blocks += _locked_lines(result.locked)
    elif result.lock_error is not None:
        # the hint too: it is what mends it (a text adopt said only what failed, the JSON alone how to mend it)
        mend = f" ({result.lock_error.hint})" if result.lock_error.hint else ""
        blocks.append(
            Line(
                f"not locked: {result.lock_error.message}{mend}; once that is mended: "
                f"provision lock --env {result.name}"
            )
        )
    else:
        blocks.append(
            Line(
                f"not locked (--no-lock): drift compares its files with their RECORDs only; "
                f"provision lock --env {result.name} locks it"
            )
        )
    return Shown(result.to_dict(), blocks)


def env_locked(locked: AdoptLock) -> Shown:
    return Shown(
        {"environment": locked.name, "venv": str(locked.venv), **locked.to_dict()}, _locked_lines(locked)
    )


def _locked_lines(locked: AdoptLock) -> list[Block]:
    r = locked.result
    total = len(r.matched) + len(r.unmatched)
    sources = ", ".join(f"{n} from {where}" for where, n in sorted(r.records.items()))
    lines = [
        f"locked {locked.name}: {len(r.matched)} of {total} distributions matched to their wheels"
        + (f" (RECORDs: {sources})" if sources else "")
        + f" in {r.seconds:.1f} s; lock {locked.lock}"
    ]
    lines += [
        f"index {index_name} ({r.indexes.get(index_name, '')}) unreachable: {why}"
        for index_name, why in r.unreachable.items()
    ]
    if r.unmatched:
        lines.append(
            f"not restorable ({len(r.unmatched)}; drift still compares their files with their RECORDs):"
        )
        by_reason: dict[str, list[str]] = {}
        for u in r.unmatched:
            by_reason.setdefault(u.reason, []).append(f"{u.name} {u.version}")
        # one line per reason: an unreachable index is one line, not 200
        for (
            reason,
            names,
        ) in by_reason.items():
            lines.append(f"  {names[0]}: {reason}" if len(names) == 1 else f"  {reason}: {', '.join(names)}")
    return [Line(line) for line in lines]


def shell_lines(lines: list[str]) -> Shown:
    """What a shell evals, as it is: never folded, escaped or coloured."""
    return Shown(None, [Raw("".join(f"{line}\n" for line in lines))])


def accepted(result: AcceptResult) -> Shown:
    lines = [
        f"accepted {file.path}"
        + (f" (over {file.owner})" if file.owner else "")
        + f": sha256 {file.sha256[:16]}..., kept in {result.build / 'accepted'}"
        for file in result.accepted
    ]
    lines += [
        f"dropped {path}: drift judges it by its RECORD again (or as unowned)" for path in result.dropped
    ]
    lines += [f"not accepted: {n.kind} {n.path}: {n.reason}" for n in result.not_accepted]
    if not (result.accepted or result.dropped or result.not_accepted):
        lines.append(f"{result.name}: nothing differs from its known-good state; nothing to accept")
    lines.append(
        f"{result.name}: {len(result.files)} accepted file(s)"
        + (": " + ", ".join(f.path for f in result.files) if result.files else "")
    )
    return Shown(result.to_dict(), [Line(line) for line in lines])
