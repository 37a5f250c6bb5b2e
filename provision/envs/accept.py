"""`provision accept`: the present content of files in an environment's venv becomes part of its known-good state (a
sitecustomize.py of the team's own, an edited module while a fix waits upstream). Each is kept in the build folder by
its sha256 and listed in env.json; drift then judges it by that content, and restore puts that content back."""

from __future__ import annotations

import dataclasses
import datetime
from dataclasses import dataclass
from pathlib import Path

from provision.envs import drift as drifting
from provision.envs import kept, records, trialfiles
from provision.envs.home import Home
from provision.envs.records import KeptFile
from provision.errors import EnvError, InputError

# What a drift finding of these kinds names is a file whose present content can be kept (a `shared` path's too: which
# distribution's bytes are known-good is then said once); the other kinds name a distribution (its version, its
# source, whether it is installed), which the lock decides.
FILE_KINDS = ("modified", "unowned", "shared")


@dataclass(frozen=True)
class NotAccepted:
    """A drift finding `accept` left as it is (without PATH), with why."""

    path: str
    kind: str
    reason: str

    def to_dict(self) -> dict[str, str]:
        return {"path": self.path, "kind": self.kind, "reason": self.reason}


@dataclass(frozen=True)
class NotCarried:
    """An accepted file of the build `create --replace` replaces that was not written into the new one, with why."""

    path: str
    reason: str

    def to_dict(self) -> dict[str, str]:
        return {"path": self.path, "reason": self.reason}


@dataclass(frozen=True, kw_only=True)
class AcceptResult:
    """What `accept` took or dropped, what it left, and every accepted file of the environment afterwards."""

    name: str
    venv: Path
    build: Path
    accepted: tuple[KeptFile, ...] = ()  # taken by this call
    dropped: tuple[str, ...] = ()
    not_accepted: tuple[NotAccepted, ...] = ()  # drift findings left as they are
    files: tuple[KeptFile, ...] = ()  # every accepted file after this call

    def to_dict(self) -> dict[str, object]:
        def shown(file: KeptFile) -> dict[str, object]:
            return {**file.to_dict(), "copy": str(self.build / kept.STORE / file.sha256)}

        return {
            "name": self.name,
            "venv": str(self.venv),
            "accepted": [shown(f) for f in self.accepted],
            "dropped": list(self.dropped),
            "not_accepted": [n.to_dict() for n in self.not_accepted],
            "files": [shown(f) for f in self.files],
        }


def accept(home: Home, name: str, paths: tuple[str, ...] = (), drops: tuple[str, ...] = ()) -> AcceptResult:
    """Accept `paths` (every file drift finds changed or unowned, when none are given), or forget `drops`."""
    with home.locked():
        build = home.build_of(name)
    with home.restoring(build, name):  # what a restore would swap in meanwhile is not what was read
        if trialfiles.under_way(build):  # a trial's file never becomes part of the known-good state
            raise EnvError(
                f"a trial is under way on {name}: the files it wrote are not {name}'s",
                "wait for provision try to finish (it puts them back), then accept",
            )
        record = records.read(build)
        venv = record.venv_path(build).resolve()
        site = drifting.site_packages(venv)
        result = AcceptResult(name=name, venv=venv, build=build)
        if drops:
            result = dataclasses.replace(result, dropped=_drop(name, build, record, venv, site, drops))
        else:
            taken, left = _accept(build, record, venv, site, paths)
            result = dataclasses.replace(result, accepted=taken, not_accepted=left)
        return dataclasses.replace(result, files=tuple(records.read(build).accepted))


def _accept(
    build: Path, record: records.EnvRecord, venv: Path, site: Path, paths: tuple[str, ...]
) -> tuple[tuple[KeptFile, ...], tuple[NotAccepted, ...]]:
    """Keep each file's present content; (what was taken, the drift findings left as they are)."""
    contents: dict[str, tuple[bytes, int]] = {}
    left: list[NotAccepted] = []
    if paths:
        for given in paths:  # every one read before anything is kept: one refused, none accepted
            key = kept.key_of(venv, site, given)
            contents[key] = kept.read_in_venv(venv, kept.location(venv, site, key), given)
    else:
        for finding in drifting.scan_env(venv, build, record).findings:
            if finding.kind not in FILE_KINDS or not finding.path:
                why = (
                    "gone: drop it with --drop, or restore puts it back"
                    if finding.known_good
                    else "the lock decides a distribution's files, version and source: provision restore puts them back"
                )
                left.append(NotAccepted(finding.path, finding.kind, why))
                continue
            try:
                contents[finding.path] = kept.read_in_venv(
                    venv, kept.location(venv, site, finding.path), finding.path
                )
            except InputError as exc:  # a link out, a pipe: named, the rest accepted
                left.append(NotAccepted(finding.path, finding.kind, exc.message))
    if not contents:
        return (), tuple(left)
    now = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    digests = {key: kept.sha256(content) for key, (content, _) in contents.items()}
    owners = drifting.scan(
        venv,
        lock=None,
        cache=build / drifting.CACHE_NAME,
        kept={key: KeptFile(path=key, sha256=digest) for key, digest in digests.items()},
    ).owners
    taken = [KeptFile(path=key, sha256=digests[key], at=now, owner=owners.get(key)) for key in contents]
    with kept.kept_for(build, contents.values()):
        after = records.set_accepted(
            build, lambda current: [k for k in current if k.path not in contents] + taken
        )
    kept.drop_unused(build, [*after.accepted, *after.profile_files])
    return tuple(taken), tuple(left)


def _drop(
    name: str, build: Path, record: records.EnvRecord, venv: Path, site: Path, drops: tuple[str, ...]
) -> tuple[str, ...]:
    """Forget each accepted file of `drops`; their keys (relative to site-packages)."""
    known = {k.path for k in record.accepted}
    keys = [kept.key_of(venv, site, given) for given in drops]
    for given, key in zip(drops, keys, strict=True):
        if key not in known:
            listed = ", ".join(sorted(known)) or "none"
            hint = (
                "a profile's file goes with its [files] entry"
                if key in {k.path for k in record.profile_files}
                else f"accepted: {listed}"
            )
            raise InputError(f"{given}: not an accepted file of {name}", hint)
    after = records.set_accepted(build, lambda current: [k for k in current if k.path not in keys])
    kept.drop_unused(build, [*after.accepted, *after.profile_files])
    return tuple(keys)


def carry_over(previous: Path, build: Path, venv: Path) -> tuple[list[KeptFile], list[NotCarried]] | None:
    """`create --replace`: write the old build's accepted files into the new venv where the file still belongs to
    what it was accepted over (no distribution, or the same distribution at the same version); the others are left
    out with why (a patch of sglang 0.5.0's file over sglang 0.5.1's would undo that release's change). None when the
    old build accepted nothing."""
    old = records.read(previous).accepted
    if not old:
        return None
    site = drifting.site_packages(venv)
    owners = drifting.scan(venv, cache=build / drifting.CACHE_NAME, kept={k.path: k for k in old}).owners
    reapplied: list[KeptFile] = []
    dropped: list[NotCarried] = []
    for file in old:
        now = owners.get(file.path)
        if now != file.owner:
            dropped.append(
                NotCarried(
                    file.path,
                    f"accepted over {file.owner or 'no distribution'}, and this build has "
                    f"{now or 'no distribution owning it'}: check the patch, then provision accept it again",
                )
            )
            continue
        try:
            content, mode = kept.kept_content(previous, file)
        except EnvError as exc:
            dropped.append(NotCarried(file.path, exc.message))
            continue
        kept.keep(build, content, mode)
        kept.put(venv, site, file.path, content, mode)
        reapplied.append(file)
    records.set_accepted(build, lambda _: reapplied)
    return reapplied, dropped
