"""The RECORD of each wheel of a lock, for `provision lock`'s conflict warning, read as cheaply as it can be: from
uv's cache where it unpacked the wheel, from provision's own wheel cache, from a RECORD read before (its rows kept by
the wheel's sha256 in `$XDG_CACHE_HOME/provision/records/`, provision/wheelfacts.py), else out of the remote zip by HTTP range requests (a few
hundred KiB of each wheel, never the whole of it)."""

from __future__ import annotations

import csv
import dataclasses
import io
import os
import threading
from collections.abc import Callable
from concurrent.futures import CancelledError, Future
from dataclasses import dataclass
from pathlib import Path

from provision import regular, wheelfacts
from provision.errors import ProvisionError
from provision.log import Progress
from provision.stacks import lockcheck, urls, uvcache, wheelcache

# reads at a time: each is a little network and a little CPU (TLS, the RECORD's rows), so past a few per core more
# threads only fight for the interpreter (on 2 cores 4 take less CPU than 8 for the same finish, behind uv)
WORKERS = max(4, min(16, 2 * (os.cpu_count() or 1)))


def folder() -> Path:
    return Path(wheelfacts.folder("records"))


# sha256 -> what its RECORD installs, for this process: nothing is read twice in one run (lock's early reads, then its
# gate; report --lock's conflict gate after its scans); a RECORD being read is waited for, not read again
_read: dict[tuple[str, str], dict[str, str] | None] = {}  # by (cache folder, sha256)
_reading: dict[tuple[str, str], threading.Event] = {}
# (cache folder, verdict key) -> a kept verdict found in this run
_judged: dict[tuple[str, str], Verdict] = {}
_claims = threading.Lock()
# URL -> its RECORD, read by range requests and parsed before the lock said which sha256 the URL serves (lock's reads
# while uv resolves: ahead)
_ahead: dict[str, Future[Ahead]] = {}
Job = tuple[str, str, str, str]  # project, wheel file name, URL, sha256


@dataclass(frozen=True)
class Parsed:
    """A RECORD's rows (path and hash) and what they install (lockcheck.installed), parsed once, where it was read."""

    rows: list[list[str]]
    installs: dict[str, str]
    entry: wheelfacts.Encoded | None = None  # its records/ entry, encoded where it was read by range


# whether the index was asked, and the RECORD it gave (None: none it could)
Ahead = tuple[bool, Parsed | None]
Unpacked = dict[tuple[str, str], uvcache.CachedWheel]


def read_all(
    wheels: list[Job], uv_cache: Callable[[], Path | None], progress: Progress = lambda _: None
) -> dict[str, dict[str, str] | None]:
    """wheel file name -> what its RECORD installs (None: not read) for each (project, file name, url, sha256);
    `uv_cache` says where uv's cache is, asked only when some RECORD was not read before."""
    found = {filename: remembered(sha256, url) for _, filename, url, sha256 in wheels}
    wheels = [job for job in wheels if found[job[1]] is None]  # a RECORD read before is not looked for again
    ended = {job for job in wheels if ahead_ended(job[2])}  # read while uv resolved: taken as it is
    for job in ended:
        found[job[1]] = read_one(job, {})
    wheels = [job for job in wheels if job not in ended]  # asked once: ended is ended, whatever it found
    if wheels:  # every RECORD read before (a lock made again): no thread, no zip or HTTP reader is loaded
        from concurrent.futures import ThreadPoolExecutor

        unpacked = in_uv_cache(wheels, uv_cache)
        progress(f"reading the RECORD of {len(wheels)} wheels")
        with ThreadPoolExecutor(max_workers=WORKERS) as pool:
            found.update(pool.map(lambda job: (job[1], read_one(job, unpacked)), wheels))
    return found


@dataclass(frozen=True)
class Verdict:
    """What the RECORDs of a set of wheels say together: the pairs that install one path, the wheels whose RECORD could
    not be read, and the paths shared (lockcheck.known, what a lock records)."""

    conflicts: tuple[lockcheck.Conflict, ...]
    unread: tuple[str, ...]
    known: tuple[dict[str, object], ...]


def verdict(
    wheels: list[Job], uv_cache: Callable[[], Path | None], progress: Progress = lambda _: None
) -> Verdict:
    """lockcheck's conflicts and shared paths of these wheels' RECORDs (read_all), kept in verdicts/ by the set of
    wheels: a lock made again with the same wheels reads no RECORD, so long as records/ still holds each of them (what
    create's check of a new build compares its files with: one pruned since is read again). Kept only where every
    RECORD was read."""
    key = verdict_key(wheels)
    found = kept_verdict(wheels, key)
    if found is not None:
        return found
    records = read_all(wheels, uv_cache, progress)
    read = {k: v for k, v in records.items() if v is not None}
    found = Verdict(
        conflicts=tuple(sorted(lockcheck.conflicts(read), key=lockcheck.Conflict.rank)),
        unread=tuple(sorted(k for k, v in records.items() if v is None)),
        known=tuple(lockcheck.known(read)),
    )
    for _, filename, url, sha256 in wheels:
        if records.get(filename) is not None and wheelcache.SHA256.match(sha256):
            # for lock's reads ahead (`ahead`)
            wheelfacts.put_later("urls", urls.digest(url), {"sha256": sha256})
    if not found.unread:
        wheelfacts.put_later(
            "verdicts",
            key,
            {"conflicts": [dataclasses.asdict(c) for c in found.conflicts], "known": list(found.known)},
        )
    return found


def kept_verdict(wheels: list[Job], key: str | None = None) -> Verdict | None:
    """The verdict kept in verdicts/ for this set of wheels (`verdict`), where records/ still holds each of their
    RECORDs; found once per run (lock asks while uv resolves, of the lock it replaces, and again after)."""
    key = key or verdict_key(wheels)
    if (wheelfacts.root(), key) in _judged:
        return _judged[wheelfacts.root(), key]
    kept = wheelfacts.get("verdicts", key)
    found = _verdict_of(kept) if isinstance(kept, dict) else None
    if found is not None and wheelfacts.has("records", [sha256 for _, _, _, sha256 in wheels]):
        _judged[wheelfacts.root(), key] = found
        return found
    if kept is not None and found is None:
        wheelfacts.discard("verdicts", key)
    return None


def verdict_key(wheels: list[Job]) -> str:
    """The sha256 that names a set of wheels and the rules that judge them: each wheel's sha256 and URL (a RECORD read
    by range answers for its URL only), and lockcheck's source (rules changed, verdicts kept before are not taken)."""
    import hashlib
    import json

    try:
        rules = hashlib.sha256(regular.read_bytes(Path(lockcheck.__file__), 1 << 20)).hexdigest()
    except OSError:  # no source on disk (a zipapp): the release names the rules
        from provision import __version__

        rules = f"provision {__version__}"
    listed = sorted((filename, urls.digest(url), sha256) for _, filename, url, sha256 in wheels)
    return hashlib.sha256(json.dumps([rules, listed]).encode()).hexdigest()


def _verdict_of(data: dict[str, object]) -> Verdict | None:
    """A kept verdict, None unless it is exactly of the shape `verdict` writes."""
    conflicts, known = data.get("conflicts"), data.get("known")
    if not isinstance(conflicts, list) or not isinstance(known, list):
        return None
    fields = {f.name: f.type for f in dataclasses.fields(lockcheck.Conflict)}
    shapes = {"str": str, "int": int, "bool": bool}
    try:
        found = tuple(
            lockcheck.Conflict(**c)
            for c in conflicts
            if isinstance(c, dict)
            and set(c) == set(fields)
            and all(type(c[n]) is shapes[str(t)] for n, t in fields.items())
        )
    except (TypeError, KeyError):
        return None
    shared = all(
        isinstance(k, dict)
        and isinstance(k.get("path"), str)
        and isinstance(k.get("installs"), dict)
        and all(isinstance(a, str) and isinstance(b, str) for a, b in k["installs"].items())
        and set(k) == {"path", "installs"}
        for k in known
    )
    if len(found) != len(conflicts) or not shared:
        return None
    return Verdict(conflicts=found, unread=(), known=tuple(known))


def in_uv_cache(wheels: list[Job], uv_cache: Callable[[], Path | None]) -> Unpacked:
    """uv's unpacked copies of these wheels' projects."""
    cache = uv_cache()
    return uvcache.wheels(cache, {p for p, _, _, _ in wheels}) if cache and cache.is_dir() else {}


def read_one(job: Job, unpacked: Unpacked) -> dict[str, str] | None:
    """What one wheel's RECORD installs, read the cheapest way; once per run, whichever thread asks first."""
    project, filename, url, sha256 = job
    key = (wheelfacts.root(), sha256)
    with _claims:
        if key in _read:
            return _read[key]
        waiting = _reading.get(key)
        if waiting is None:
            _reading[key] = threading.Event()
    if waiting is not None:
        waiting.wait()
        return _read.get(key)
    try:
        cached = unpacked.get((project, uvcache.stem_of(filename)))
        if cached and sha256 in cached.sha256s():
            text = text_in_folder(cached.archive)
            if text is not None:
                return keep(sha256, text, "uv cache")
        found = _elsewhere(filename, url, sha256)
        _read.setdefault(key, found)
        return found
    finally:
        with _claims:
            _reading.pop(key).set()


def remembered(sha256: str, url: str) -> dict[str, str] | None:
    """What the RECORD of the wheel with this sha256 at `url` installs, as read before (in this run, or kept in
    records/: one read by range requests only where it was read from `url`, see `answers`)."""
    if (wheelfacts.root(), sha256) in _read:
        return _read[wheelfacts.root(), sha256]
    data = wheelfacts.get("records", sha256)
    if not isinstance(data, dict) or not _rows_shape(data.get("rows")):
        if data is not None:
            wheelfacts.discard("records", sha256)
        return None
    if not answers(data, url):
        return None
    found = _read[wheelfacts.root(), sha256] = lockcheck.installed(data["rows"])
    return found


def known(sha256: str, filename: str, url: str) -> list[list[str]] | None:
    """The rows of the RECORD of the wheel with this sha256 from what provision holds of that very file: kept in
    records/ when read from the index by range or from a kept wheel (never one read from uv's unpacked copy, which is
    what create's fresh check distrusts), else a kept wheel whose sha256 was checked; None when it holds neither. No
    network, and uv's cache is not read."""
    data = wheelfacts.get("records", sha256) if wheelcache.SHA256.match(sha256) else None
    if (
        isinstance(data, dict)
        and _rows_shape(data.get("rows"))
        and data.get("from") != "uv cache"
        and answers(data, url)
    ):
        return data["rows"]  # type: ignore[no-any-return]
    kept = wheelcache.cached(sha256, filename) if wheelcache.SHA256.match(sha256) else None
    text = text_in_wheel(kept) if kept is not None else None
    return rows_of(text) if text is not None else None


def remembered_rows(sha256: str, url: str) -> list[list[str]] | None:
    """The rows of the RECORD of the wheel with this sha256 at `url` as kept in records/ (adopt reads them its own way)."""
    data = wheelfacts.get("records", sha256)
    if isinstance(data, dict) and _rows_shape(data.get("rows")):
        if not answers(data, url):
            return None
        return data["rows"]  # type: ignore[no-any-return]
    if data is not None:
        wheelfacts.discard("records", sha256)
    return None


# Where a kept RECORD was read from that proves it is the RECORD of the bytes its sha256 names (what adopt may pin):
# uv's unpacked copy of that very file, or the whole wheel downloaded, its sha256 checked and every member hashed
# against that RECORD (wheelproof). Range requests prove nothing (nothing ties the ranges to the bytes a full GET gives).
VERIFIED = "verified wheel"
PROVEN = ("uv cache", VERIFIED)


def proven_rows(sha256: str) -> list[list[str]] | None:
    """remembered_rows, for a RECORD kept from a proven read only (PROVEN): what adopt may pin."""
    data = wheelfacts.get("records", sha256)
    if isinstance(data, dict) and data.get("from") in PROVEN and _rows_shape(data.get("rows")):
        return data["rows"]  # type: ignore[no-any-return]
    return None


RANGE = "range"  # read by range requests: the sha256 the index gave proves nothing of it


def answers(data: dict[str, object], url: str) -> bool:
    """Whether a kept RECORD answers for the wheel at `url`: one read from that wheel's bytes (uv's copy, a kept or
    downloaded wheel, its sha256 checked) anywhere; one read by range requests only where it was read from `url`
    (another index listing the same sha256 could have answered ranges from a wheel of another RECORD)."""
    return data.get("from") != RANGE or data.get("url") == urls.digest(url)


def _rows_shape(rows: object) -> bool:
    return isinstance(rows, list) and all(
        isinstance(r, list) and all(isinstance(f, str) for f in r) for r in rows
    )


def rows_of(text: str) -> list[list[str]] | None:
    """A RECORD's rows (path and hash, the size left out); None when csv cannot read it (a field past its limit)."""
    try:
        return [row[:2] for row in csv.reader(io.StringIO(text)) if row]
    except csv.Error:
        return None


def parsed(text: str) -> Parsed | None:
    """A RECORD's text parsed (rows_of, lockcheck.installed); None where csv cannot read it."""
    rows = rows_of(text)
    installs = lockcheck.installed(rows) if rows is not None else None
    return Parsed(rows, installs) if rows is not None and installs is not None else None


def keep(sha256: str, text: str, source: str, url: str = "") -> dict[str, str] | None:
    """What the RECORD `text` of the wheel with this sha256 installs, kept in records/ (with where it was read) and for
    this run. A RECORD csv cannot read is not kept: nothing is said of it, and it is read again next time."""
    found = parsed(text)
    return keep_parsed(sha256, found, source, url) if found is not None else None


def keep_parsed(sha256: str, found: Parsed, source: str, url: str = "") -> dict[str, str]:
    """keep, of a RECORD parsed before (a read ahead parses it in its own thread, while uv resolves)."""
    if wheelcache.SHA256.match(sha256):
        wheelfacts.put_later(  # written when the caller settles (wheelfacts.settle)
            "records",
            sha256,
            found.entry if source == RANGE and found.entry is not None else _entry(found.rows, source, url),
        )
    _read[wheelfacts.root(), sha256] = found.installs
    return found.installs


def _entry(rows: list[list[str]], source: str, url: str) -> dict[str, object]:
    """A records/ entry: the rows, where they were read, and for a read by range the URL's digest (`answers`)."""
    return {"rows": rows, "from": source, **({"url": urls.digest(url)} if source == RANGE else {})}


def _elsewhere(filename: str, url: str, sha256: str) -> dict[str, str] | None:
    kept = wheelcache.cached(sha256, filename)
    if kept is not None:
        text = text_in_wheel(kept)
        return keep(sha256, text, "provision cache") if text is not None else None
    if not url.lower().startswith(("http://", "https://")):
        return None
    asked, found = _read_ahead(url)
    if not asked:  # an answer of the index read ahead is its answer, found or not: it is not asked again
        found = _fetched(url)
    if found is None:
        return None
    # by the lock's sha256: read from that URL for that lock, as the lock's own file
    return keep_parsed(sha256, found, RANGE, url)


def _fetched(url: str) -> Parsed | None:
    """The RECORD of the wheel at `url`, read by range requests and parsed; None where the index gives none (a warning
    that cannot be given is not an error of the lock)."""
    from provision.stacks import wheelmeta  # packaging.metadata and the index client: a remote zip is read

    try:
        raw = wheelmeta.record(url)
    except ProvisionError:
        return None
    found = parsed(raw.decode("utf-8", "replace")) if raw is not None else None
    if found is None:
        return None
    # its entry encoded here too: a read ahead runs while uv resolves, and what is left after uv is only written
    return dataclasses.replace(found, entry=wheelfacts.encoded("records", _entry(found.rows, RANGE, url)))


def ahead(url: str, submit: Callable[[Callable[[], Ahead]], Future[Ahead]]) -> None:
    """Start reading the RECORD of the wheel at `url` (through `submit`, a pool's) before its sha256 is known, unless
    it was started before or provision holds the RECORD of the wheel last read from that URL (urls/ names its sha256):
    the gate's read of that wheel later takes what this read (`_elsewhere`)."""
    with _claims:
        if url not in _ahead:
            _ahead[url] = submit(lambda: _fetch_ahead(url))


def _fetch_ahead(url: str) -> Ahead:
    last = wheelfacts.get("urls", urls.digest(url))
    sha256 = last.get("sha256") if isinstance(last, dict) else None
    if isinstance(sha256, str) and remembered(sha256, url) is not None:
        # read before: the gate finds it kept (or, the URL serving another file now, reads it)
        return (
            False,
            None,
        )
    return True, _fetched(url)  # parsed here, while uv resolves; None: the index failed it, not asked again


def ahead_ended(url: str) -> bool:
    """Whether a read ahead of the RECORD at `url` has ended, its answer waiting to be taken (`_read_ahead`)."""
    with _claims:
        future = _ahead.get(url)
    return future is not None and future.done() and not future.cancelled()


def ahead_started(url: str) -> bool:
    """Whether the RECORD at `url` is being read ahead, or was and waits to be taken."""
    with _claims:
        return url in _ahead


def drop_ahead() -> None:
    """Forget the reads ahead of a lock that has ended (those not started are not started): a later lock in this
    process reads its own."""
    with _claims:
        left = list(_ahead.values())
        _ahead.clear()
    for future in left:
        future.cancel()


def _read_ahead(url: str) -> Ahead:
    """Whether the index was asked for the RECORD at `url` ahead, and what it gave (waited for while it runs);
    (False, None) where it was not (no read ahead, one not started yet, or one that found it kept)."""
    with _claims:
        future = _ahead.pop(url, None)
    if future is None or future.cancel():  # not started yet: read now rather than wait behind the others
        return False, None
    try:
        return future.result()
    except CancelledError:
        return False, None


def text_in_folder(archive: Path) -> str | None:
    """An unpacked wheel's RECORD; None when it has no readable one."""
    for record in sorted(archive.glob("*.dist-info/RECORD")):
        try:
            return regular.read_bytes(record).decode("utf-8", "replace")
        except OSError:
            return None
    return None


def in_folder(archive: Path) -> dict[str, str] | None:
    """What an unpacked wheel's RECORD says it installs; None when it has no readable RECORD."""
    text = text_in_folder(archive)
    return lockcheck.installed(text) if text is not None else None


def text_in_wheel(wheel: Path) -> str | None:
    """A wheel file's RECORD; None when it has none."""
    import zipfile
    import zlib

    from provision.stacks import wheelproof  # a wheel is read

    try:
        with zipfile.ZipFile(wheel) as archive:
            infos = [
                i
                for i in archive.infolist()
                if i.filename.count("/") == 1 and i.filename.endswith(".dist-info/RECORD")
            ]
            if not infos:
                return None
            # inflated no further than the bound, as a METADATA is: a 2 MB wheel's RECORD may inflate to 1.2 GB
            return wheelproof.bounded_member(archive, infos[0], wheelproof.RECORD_LIMIT).decode(
                "utf-8", "replace"
            )
    # as scan reads a damaged wheel
    except (
        OSError,
        zipfile.BadZipFile,
        zlib.error,
        EOFError,
        NotImplementedError,
        wheelproof.NotProven,
    ):
        return None


def in_wheel(wheel: Path) -> dict[str, str] | None:
    """What a wheel file's RECORD says it installs; None when it has none."""
    text = text_in_wheel(wheel)
    return lockcheck.installed(text) if text is not None else None
