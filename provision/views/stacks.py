"""Profiles and locks, shown: `profiles`, `profiles new`, `lock`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from provision.errors import ProfileError
from provision.views import ui
from provision.views.render import Block, Info, Line, Problem, Shown, TableBuilder

if TYPE_CHECKING:  # annotations only: rendering one result must not import every operation
    from provision.stacks.lock import LockedPackage, LockResult
    from provision.stacks.newprofile import NewProfile
    from provision.stacks.profiles import Found


def profiles(found: Found) -> Shown:
    """The profiles found; what was passed over is an error line each, and exits as a profile's error does (4)."""
    document = {
        "profiles": [
            {
                "name": p.name,
                "cuda": p.cuda,
                "python": p.python,
                "description": p.description,
                "path": str(p.path),
                "indexes": list(p.indexes),
                "packages": [pk.requirement() for pk in p.packages],
                "content_hash": p.content_hash,
                "files": [{"path": f.path, "source": str(f.source), "sha256": f.sha256} for f in p.files],
            }
            for p in found.profiles
        ],
        "skipped": [{"path": str(s.path), "reason": s.reason} for s in found.skipped],
        "folders": [str(f) for f in found.folders],
    }
    # where they are read from: a checkout's profiles/ edited after `pip install .` is not one of these folders
    shipped = found.folders[-1] if found.folders else None
    own = [str(f) for f in found.folders[:-1]]
    caption = (
        f"read from PROVISION_PROFILES ({', '.join(own)}), then "
        if own
        else "read from the folders in PROVISION_PROFILES (none set), then "
    ) + f"the profiles shipped with provision ({shipped})"
    table = TableBuilder("Profiles", "name", "CUDA", "Python", "description", "path", caption=caption)
    for p in found.profiles:
        table.add(p.name, p.cuda, ui.dash(p.python), p.description, str(p.path))
    problems = [
        Problem(
            f"{s.path}: {s.reason}: skipped, it is no profile file",
            "move it out of the profiles folder (or rename it)",
        )
        for s in found.skipped
    ]
    return Shown(document, [*problems, table.done()], ProfileError.exit_code if found.skipped else 0)


def new_profile(result: NewProfile) -> Shown:
    table = TableBuilder(
        f"{result.path}: the stack {result.serving} pins (CUDA {result.cuda})",
        "package",
        "version",
        "index",
        "from",
    )
    for pin in result.pins:
        extras = f"[{','.join(pin.extras)}]" if pin.extras else ""
        table.add(f"{pin.name}{extras}", pin.version or "any", pin.index, pin.why)
    return Shown(
        result.to_dict(),
        [
            table.done(),
            Info(
                f"metadata of {result.wheel} read by {result.metadata_from}; next: provision lock {result.path}"
            ),
        ],
    )


def locked(result: LockResult) -> Shown:
    by_package: dict[str, list[LockedPackage]] = {}
    for p in result.packages:  # one row per package, however many files (wheels per platform) it locks
        by_package.setdefault(p.name, []).append(p)
    table = TableBuilder("", "package", "version", "index", "files", "hashes")
    for name, files in by_package.items():
        hashed = sum(1 for f in files if f.hash_source == "computed")
        source = {
            "git": f"git {files[0].url}",
            "editable": f"editable {files[0].url}: not hashed",
            "directory": f"{files[0].url}: not hashed",
        }.get(files[0].hash_source)
        table.add(
            name,
            files[0].version or "-",
            files[0].index or "-",
            str(len(files)) if not source else "-",
            source
            or ("from index" if not hashed else f"{hashed} computed" if hashed < len(files) else "computed"),
        )
    # a line of its own: as a title it folds beside a narrow table
    plural = "" if len(by_package) == 1 else "s"
    blocks: list[Block] = [
        table.done(),
        Line(
            f"{result.path}: {len(by_package)} package{plural}, {len(result.packages)} files, "
            f"{result.seconds:.2f} s"
            + (" (unchanged: the lock in place is this lock, left as it was)" if result.unchanged else "")
        ),
    ]
    if result.changes is not None:
        blocks.append(
            Line(
                "\n".join(
                    [
                        f"changes since the {result.path} it replaced"
                        + (
                            " (its versions kept where the profile allows them; --upgrade resolves afresh):"
                            if result.preferred
                            else ":"
                        ),
                        *(f"  {line}" for line in result.changes.describe()),
                    ]
                )
            )
        )
    blocks.append(Line(f"rebuild: {result.rebuild}"))
    if result.nightly:
        blocks.append(Line(f"nightly date: {result.nightly} (every nightly package from that one date)"))
    computed = [p.file for p in result.packages if p.hash_source == "computed"]
    if computed:
        blocks.append(Line(f"hashed by provision (the index gives none): {', '.join(computed)}"))
    blocks += [Line(f"warning ({w.id}): {w.reason}") for w in result.warnings]
    return Shown(result.to_dict(), blocks)
