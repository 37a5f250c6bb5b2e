"""Installed distributions matched to the wheels they were installed from, for a venv provision did not build: each
by name, version, tags and its RECORD's hashes against a wheel on the given indexes (PEP 691 pages; the wheel's RECORD
read from uv's cache where it has that very file, else out of the remote zip by range requests, else downloaded), or,
where no index answers, against a wheel uv's cache keeps with the URL and sha256 it came with. A wheel whose RECORD
differs from what is installed is another build (rebuilt under the same version), never this one."""

from __future__ import annotations

import base64
import csv
import io
import os
import re
import threading
import time
import zipfile
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from email.parser import HeaderParser
from pathlib import Path
from typing import TYPE_CHECKING

from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from provision import confined, regular
from provision.errors import ProvisionError
from provision.log import Progress
from provision.stacks import index, urls, uvcache, wheelmeta, wheelproof

if TYPE_CHECKING:
    pass

# Pages and RECORDs read at once, each thread over its own kept-alive connections. A slow index wants many; a loaded
# machine fewer, each thread paying its own TLS handshakes (the figures: docs/performance.md).
WORKERS = max(8, min(16, 2 * (os.cpu_count() or 1)))
# the most a wheel that is the only one of its tags may weigh to be downloaded without range reads first
ALONE_DOWNLOAD = 4 << 20
RECORD_LIMIT = 64 << 20  # as the drift check reads them: torch's RECORD, among the largest, is a few MB
HEADERS_LIMIT = 1 << 20  # of a METADATA, WHEEL or direct_url.json: the header fields come first
# written by the installer, not the wheel
INSTALLER_FILES = (
    "INSTALLER",
    "REQUESTED",
    "direct_url.json",
    "RECORD",
)
_URL = re.compile(rb"https?://[\x21-\x7e]+?\.whl")


@dataclass(frozen=True, kw_only=True)
class Installed:
    name: str  # canonical
    version: str
    info: Path
    files: dict[str, str]  # what the installed RECORD hashes in site-packages: path -> "sha256=..."
    tags: frozenset[str]  # the WHEEL file's Tag lines
    direct_url: str  # direct_url.json's url ("" for one from an index)
    editable: bool


@dataclass(frozen=True, kw_only=True)
class Matched:
    name: str
    version: str
    index: str  # the index's name ("default" for the default index)
    index_url: str
    filename: str
    url: str
    sha256: str
    record_from: (
        str  # where the proven RECORD was read: "uv-cache" (that very file), "download" (the whole wheel)
    )

    def to_dict(self) -> dict[str, str]:
        return self.__dict__.copy()


@dataclass(frozen=True, kw_only=True)
class Unmatched:
    name: str
    version: str
    reason: str

    def to_dict(self) -> dict[str, str]:
        return self.__dict__.copy()


@dataclass(kw_only=True)
class MatchResult:
    indexes: dict[str, str]  # name -> URL (credentials stripped), in the order asked
    matched: list[Matched] = field(default_factory=list)
    unmatched: list[Unmatched] = field(default_factory=list)
    unreachable: dict[str, str] = field(default_factory=dict)  # index name -> why
    pages: int = 0
    records: dict[str, int] = field(default_factory=dict)  # record_from -> how many
    seconds: float = 0.0


class _Asker:
    """The indexes, asked once per project each, with an index that failed once asked no more."""

    def __init__(self, indexes: dict[str, str]) -> None:
        self.indexes = indexes
        self.unreachable: dict[str, str] = {}
        # indexes that gave one page at least: a later failure is that page's own
        self.answered: set[str] = set()
        self.pages = 0
        self.lock = threading.Lock()

    def files(self, index_name: str, project: str, version: str) -> list[index.IndexFile] | None:
        """The wheels of `project` at `version` the index lists; None when it cannot be asked."""
        if index_name in self.unreachable:
            return None
        try:
            found = index.project_files(self.indexes[index_name], project, keep=_of_version(version))
        except ProvisionError as exc:
            with self.lock:
                if index_name in self.answered:
                    raise
                self.unreachable.setdefault(index_name, exc.message)
            return None
        with self.lock:
            self.pages += 1
            self.answered.add(index_name)
        return found


def _of_version(version: str) -> Callable[[str], bool]:
    """Whether a file name is a wheel of `version`: its version field compared as a version, each spelling parsed once."""
    try:
        wanted = Version(version)
    except InvalidVersion:
        return lambda _: False
    seen: dict[str, bool] = {}

    def keep(filename: str) -> bool:
        parts = filename.split("-")
        if not filename.endswith(".whl") or len(parts) < 5:
            return False
        if parts[1] not in seen:
            try:
                seen[parts[1]] = Version(parts[1]) == wanted
            except InvalidVersion:
                seen[parts[1]] = False
        return seen[parts[1]]

    return keep


def installed(site: Path, venv: Path) -> tuple[list[Installed], list[Unmatched]]:
    """Every distribution in site-packages, read from its .dist-info; those that no wheel can match, with why."""
    found: list[Installed] = []
    unmatched: list[Unmatched] = []
    confinement = confined.Confinement(venv)
    for info in sorted(site.glob("*.egg-info")):
        name, version = _name_version(info, "PKG-INFO")
        unmatched.append(
            Unmatched(
                name=name, version=version, reason="an .egg-info: installed from source without a wheel"
            )
        )
    for info in sorted(site.glob("*.dist-info")):
        if confinement.folder(str(info)) is not None or not info.is_dir():
            unmatched.append(
                Unmatched(
                    name=info.name, version="", reason="its .dist-info leads out of the environment: not read"
                )
            )
            continue
        name, version = _name_version(info, "METADATA")
        record = _text(info / "RECORD", RECORD_LIMIT + 1)
        if len(record) > RECORD_LIMIT:
            unmatched.append(
                Unmatched(
                    name=name,
                    version=version,
                    reason=f"its RECORD is larger than {RECORD_LIMIT >> 20} MiB: not read",
                )
            )
            continue
        try:
            rows = list(csv.reader(record.splitlines()))
        except (csv.Error, OSError, UnicodeDecodeError):
            unmatched.append(Unmatched(name=name, version=version, reason="no readable RECORD"))
            continue
        direct, editable = _direct_url(info)
        tags = frozenset(
            v.strip() for k, v in HeaderParser().parsestr(_text(info / "WHEEL")).items() if k == "Tag"
        )
        found.append(
            Installed(
                name=name,
                version=version,
                info=info,
                files=_installed_files(rows, info.name),
                tags=tags,
                direct_url=direct,
                editable=editable,
            )
        )
    return found, unmatched


def _text(path: Path, limit: int = HEADERS_LIMIT) -> str:
    """A metadata file's text, its first `limit` bytes ("" when it cannot be read): a pipe or a device there is not
    waited on, and a huge one (an 8 GB METADATA) is never read whole, as drift reads."""
    try:
        return regular.read_text(path, limit, errors="replace")
    except OSError:
        return ""


def _name_version(info: Path, member: str) -> tuple[str, str]:
    head = _text(info / member).replace("\r\n", "\n").split("\n\n", 1)[0]
    headers = HeaderParser().parsestr(head + "\n")
    stem = info.name.rsplit(".", 1)[0]
    name = headers.get("Name") or stem.split("-", 1)[0]
    return str(canonicalize_name(name)), headers.get("Version") or (
        stem.split("-", 1)[1] if "-" in stem else ""
    )


def _direct_url(info: Path) -> tuple[str, bool]:
    text = _text(info / "direct_url.json")
    if not text:
        return "", False
    import json

    try:
        document = json.loads(text)
        url = str(document.get("url") or "a direct URL")
        editable = bool((document.get("dir_info") or {}).get("editable"))
    # not JSON, another shape, nested past the recursion limit
    except (
        ValueError,
        AttributeError,
        RecursionError,
    ):
        return "a direct URL", False
    return urls.redact(url), editable


def _installed_files(rows: list[list[str]], info_name: str) -> dict[str, str]:
    """What the installed RECORD hashes inside site-packages, the installer's own files aside (entry-point scripts
    and a wheel's .data/scripts live outside it, rewritten; INSTALLER, REQUESTED, direct_url.json are the installer's)."""
    files = {}
    own = {f"{info_name}/{member}" for member in INSTALLER_FILES}
    for row in rows:
        if len(row) < 2 or not row[1] or row[0] in own:
            continue
        path = os.path.normpath(row[0])
        if path.startswith(("..", "/")):
            continue
        files[path] = row[1]
    return files


def wheel_files(record: str | list[list[str]]) -> dict[str, str]:
    """A wheel's own RECORD (its text, or its rows) as it lands in site-packages: `X.data/purelib|platlib/P` is
    installed as P; the rest of `.data` goes elsewhere (scripts are rewritten), so it is left out, as the installed side
    leaves it out."""
    files = {}
    for row in csv.reader(record.splitlines()) if isinstance(record, str) else record:
        if len(row) < 2 or not row[1]:
            continue
        path = os.path.normpath(row[0])
        first, _, rest = path.partition("/")
        if first.endswith(".data"):
            scheme, _, inner = rest.partition("/")
            if scheme not in ("purelib", "platlib") or not inner:
                continue
            path = inner
        files[path] = row[1]
    return files


def difference(installed: dict[str, str], wheel: dict[str, str]) -> str | None:
    """None when the wheel installs exactly these files with these hashes; else the first path that tells them apart."""
    for path in sorted(set(installed) | set(wheel)):
        if installed.get(path) != wheel.get(path):
            where = (
                "not in the wheel"
                if path not in wheel
                else "not installed"
                if path not in installed
                else "differs"
            )
            return f"{path} {where}"
    return None


def match(
    site: Path,
    venv: Path,
    indexes: dict[str, str],
    *,
    bound: dict[str, str] | None = None,
    cache: Path | None = None,
    pypi_index: Callable[[], str] = lambda: "",
    progress: Progress = lambda _: None,
) -> MatchResult:
    """Match every distribution installed in `site` to a wheel on `indexes` (name -> URL, asked in that order; a
    distribution in `bound` is looked for on its own index only) or in uv's cache at `cache` (whose `pypi` bucket
    holds what came from uv's built-in default index, `pypi_index()`: asked here, where uv runs from the main thread, and
    only where that bucket holds a wheel of one of these distributions)."""
    start = time.perf_counter()
    result = MatchResult(indexes={n: urls.strip_credentials(u) for n, u in indexes.items()})
    dists, result.unmatched = installed(site, venv)
    lookups = []
    for dist in dists:
        if dist.editable:
            result.unmatched.append(
                Unmatched(
                    name=dist.name, version=dist.version, reason=f"an editable install of {dist.direct_url}"
                )
            )
        elif dist.direct_url:
            result.unmatched.append(
                Unmatched(
                    name=dist.name,
                    version=dist.version,
                    reason=f"installed from {dist.direct_url} (direct_url.json), not from an index",
                )
            )
        else:
            lookups.append(dist)
    cached = uvcache.wheels(cache, {d.name for d in lookups}) if cache is not None and cache.is_dir() else {}
    default = _pypi_index_of(pypi_index) if any(_bucket(w) == "pypi" for w in cached.values()) else ""
    asker = _Asker(indexes)
    progress(
        f"matching {len(lookups)} distributions to wheels on {', '.join(indexes) or 'no index'} and in uv's cache"
    )
    bound = bound or {}

    def one(dist: Installed) -> Matched | Unmatched:
        names = [bound[dist.name]] if dist.name in bound else list(indexes)
        try:
            return _match_one(dist, [n for n in names if n in indexes], asker, cached, default)
        # one odd page or wheel: that one unmatched
        except (
            ProvisionError,
            OSError,
            ValueError,
            zipfile.BadZipFile,
        ) as exc:
            return Unmatched(
                name=dist.name,
                version=dist.version,
                reason=f"could not be matched: {getattr(exc, 'message', exc)}",
            )

    with ThreadPoolExecutor(max_workers=WORKERS) as pool:
        for found in pool.map(one, lookups):
            if isinstance(found, Matched):
                result.matched.append(found)
                result.records[found.record_from] = result.records.get(found.record_from, 0) + 1
            else:
                result.unmatched.append(found)
    result.matched.sort(key=lambda m: m.name)
    result.unmatched.sort(key=lambda u: u.name)
    result.unreachable, result.pages = dict(asker.unreachable), asker.pages
    result.seconds = time.perf_counter() - start
    return result


def _candidates(dist: Installed, files: list[index.IndexFile]) -> list[index.IndexFile]:
    """The wheels of this name and version whose tags the installed WHEEL file names (some of them: a repaired wheel's
    WHEEL may list fewer than its name does); the RECORD then decides."""
    try:
        version = Version(dist.version)
    except InvalidVersion:
        return []
    found = []
    for file in files:
        try:
            name, wheel_version, _, wheel_tags = parse_wheel_filename(file.filename)
        except InvalidWheelFilename:
            continue
        if (
            name == dist.name
            and wheel_version == version
            and (not dist.tags or not dist.tags.isdisjoint(str(t) for t in wheel_tags))
        ):
            found.append(file)
    return found


def _match_one(
    dist: Installed,
    index_names: list[str],
    asker: _Asker,
    cached: dict[tuple[str, str], uvcache.CachedWheel],
    pypi_index: str,
) -> Matched | Unmatched:
    others: list[str] = []
    listed: list[str] = []
    for index_name in index_names:
        files = asker.files(index_name, dist.name, dist.version)
        if files is None:
            continue
        listed.append(index_name)
        candidates = _candidates(dist, files)
        for file in candidates:
            try:
                record, how, sha256 = _record(
                    file,
                    cached.get((dist.name, uvcache.stem_of(file.filename))),
                    dist,
                    alone=len(candidates) == 1,
                )
            except (
                ProvisionError,
                zipfile.BadZipFile,
                wheelproof.NotProven,
                OSError,
                UnicodeDecodeError,
            ) as exc:
                others.append(
                    f"{file.filename} on {index_name} could not be read ({getattr(exc, 'message', exc)})"
                )
                continue
            differs = difference(dist.files, wheel_files(record)) if record is not None else how
            if differs is None and sha256:
                return Matched(
                    name=dist.name,
                    version=dist.version,
                    index=index_name,
                    index_url=urls.strip_credentials(asker.indexes[index_name]),
                    filename=file.filename,
                    url=urls.strip_credentials(file.url),
                    sha256=sha256,
                    record_from=how,
                )
            others.append(f"{file.filename} on {index_name} is another build ({differs})")
    from_cache = _from_cache(dist, cached, {n: asker.indexes[n] for n in index_names}, pypi_index)
    if isinstance(from_cache, Matched):
        return from_cache
    # why: once, in `unreachable`
    unreachable = [f"index {n} unreachable" for n in index_names if n in asker.unreachable]
    if others:
        reasons = others + unreachable
    elif listed:
        reasons = [
            f"no wheel of {dist.name} {dist.version} ({', '.join(sorted(dist.tags)) or 'any tags'}) on {', '.join(listed)}",
            *unreachable,
        ]
    else:
        reasons = unreachable or [f"no index to look on for {dist.name}"]
    reasons.append(from_cache or "uv's cache has no wheel of this build")
    reason = "; ".join(reasons)
    return Unmatched(name=dist.name, version=dist.version, reason=reason)


def _record(
    file: index.IndexFile, cached: uvcache.CachedWheel | None, dist: Installed, *, alone: bool = False
) -> tuple[str | list[list[str]] | None, str, str]:
    """(the wheel's RECORD, its text or its rows where read before; where it was read; the sha256 of the bytes it was
    read from): provision's records/ cache where a proven read kept it by that sha256, uv's unpacked copy of that very
    file (same sha256), else the whole wheel downloaded and its members checked against its RECORD (wheelproof). Range
    requests only tell a wheel apart: a RECORD read by them that differs from what is installed needs no download, one
    that matches proves nothing, and neither is kept by the sha256 the page claims; so they are not made for a small
    wheel that is the only one its tags allow (`alone`). (None, why, "") when its PEP 658 metadata tells it apart."""
    from provision.stacks import wheelrecords

    rows = wheelrecords.proven_rows(file.sha256) if file.sha256 else None
    if rows is not None and file.sha256:  # read before from those very bytes (provision/wheelfacts.py)
        return rows, "cache", file.sha256
    rows = wheelrecords.remembered_rows(file.sha256, file.url) if file.sha256 else None
    if rows is not None and difference(dist.files, wheel_files(rows)) is not None:
        return rows, "cache", ""  # read before by range requests: enough to tell it apart, never to pin it
    if cached is not None and file.sha256 and file.sha256 in cached.sha256s():
        text = _cached_record(cached)
        if text is not None:
            return _kept(file.sha256, text, "uv cache"), "uv-cache", file.sha256
    metadata_hash = file.core_metadata.get("sha256") if isinstance(file.core_metadata, dict) else None
    installed_metadata = dist.files.get(f"{dist.info.name}/METADATA", "")
    if (
        metadata_hash
        and installed_metadata.startswith("sha256=")
        and _hex(installed_metadata) != metadata_hash
    ):
        return None, "METADATA differs (PEP 658)", ""
    # the only wheel of its tags (`alone`), and a small one: a range read could spare its download only where the
    # installed files are not this wheel's; in the common case, where they are, it is a request more before the
    # download (a range request reads 256 KiB: the median wheel of a real venv is 67 KB)
    small = alone and file.size is not None and file.size <= ALONE_DOWNLOAD
    tail = None if small else wheelmeta.RangeFile.opened(file.url)
    if tail is not None:
        try:
            ranged = wheelproof.record_of(io.BufferedReader(tail, wheelmeta.BLOCK), verify=False)
        except (wheelmeta._NoRanges, wheelproof.NotProven):  # the server would not after all: read it whole
            ranged = None
        if ranged is not None and difference(dist.files, wheel_files(ranged)) is not None:
            return _kept(file.sha256, ranged, "range", file.url), "range", ""
    record, sha256 = wheelproof.downloaded(file.url, file.sha256, file.size)
    return _kept(sha256, record, wheelrecords.VERIFIED), "download", sha256


def _kept(sha256: str | None, text: str, source: str, url: str = "") -> str:
    """`text`, a wheel's RECORD, kept by its sha256 in records/ for the next reader."""
    from provision.stacks import wheelrecords

    if sha256:
        wheelrecords.keep(sha256.lower(), text, source, url)
    return text


def _hex(record_hash: str) -> str:
    digest = record_hash.partition("=")[2]
    return base64.urlsafe_b64decode(digest + "=" * (-len(digest) % 4)).hex()


def _cached_record(cached: uvcache.CachedWheel) -> str | None:
    for info in cached.archive.glob("*.dist-info"):
        text = _text(info / "RECORD", RECORD_LIMIT)
        if text:
            return text
    return None


def _from_cache(
    dist: Installed,
    cached: dict[tuple[str, str], uvcache.CachedWheel],
    indexes: dict[str, str],
    pypi_index: str,
) -> Matched | str | None:
    """A wheel of this build in uv's cache, with the URL, sha256 and index it was fetched with: a match where that
    index is one of `indexes`; else why not (None: uv's cache has no such wheel)."""
    for (project, stem), wheel in sorted(cached.items()):
        if project != dist.name:
            continue
        filename = f"{project.replace('-', '_')}-{stem}.whl"
        if not _candidates(dist, [index.IndexFile(filename=filename, url="", sha256=None)]):
            continue
        record = _cached_record(wheel)
        if record is None or difference(dist.files, wheel_files(record)) is not None:
            continue
        url, sha256s, index_url = _origin(wheel, pypi_index)
        if not url or len(sha256s) != 1:
            return "uv's cache holds this build, but not the URL and sha256 it came with"
        name = next((n for n, u in indexes.items() if index_url and _same_index(u, index_url)), None)
        if name is None:
            return f"uv's cache holds this build, from {index_url or 'an index'} that is not among {', '.join(indexes)}"
        return Matched(
            name=dist.name,
            version=dist.version,
            index=name,
            index_url=urls.strip_credentials(indexes[name]),
            filename=urls.filename(url),
            url=url,
            sha256=sha256s.pop(),
            record_from="uv-cache",
        )
    return None


def _pypi_index_of(pypi_index: Callable[[], str]) -> str:
    """uv's built-in default index, for the wheels of its cache's `pypi` bucket; "" where uv cannot say it: the cache is a
    shortcut, and those wheels are looked for on the indexes instead (a lock the indexes given can make all the same)."""
    try:
        return pypi_index()
    except ProvisionError:
        return ""


def _bucket(wheel: uvcache.CachedWheel) -> str:
    """The bucket of uv's cache a wheel is kept in: wheels-v*/index/<hash of its index> or wheels-v*/pypi."""
    return wheel.link.parent.parent.name


def _origin(wheel: uvcache.CachedWheel, pypi_index: str) -> tuple[str, set[str], str]:
    """(wheel URL, sha256s, index URL) from uv's pointer files: the URL uv fetched, and the page of the index uv
    read it from (simple-v*/index/<the same hash>/<project>.rkyv); the default index for its `pypi` bucket."""
    try:
        found = _URL.search(regular.read_bytes(wheel.link.with_name(wheel.link.name + ".http"), 16 << 20))
    except OSError:
        found = None
    url = found.group(0).decode() if found else ""
    bucket = wheel.link.parent.parent
    index_url = ""
    if _bucket(wheel) == "pypi":
        index_url = pypi_index
    else:
        for page in sorted(
            bucket.parent.parent.parent.glob(f"simple-v*/index/{bucket.name}/{wheel.project}.rkyv"),
            reverse=True,
        ):
            try:
                hit = re.search(
                    rb"(https?://[\x21-\x7e]+?/)" + re.escape(wheel.project.encode()) + rb"/",
                    regular.read_bytes(page, 64 << 20),
                )
            except OSError:
                continue
            if hit:
                index_url = hit.group(1).decode()
                break
    return url, wheel.sha256s(), index_url


def _same_index(a: str, b: str) -> bool:
    return urls.strip_credentials(a).rstrip("/") == b.rstrip("/")
