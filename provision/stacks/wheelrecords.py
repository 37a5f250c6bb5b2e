"""The RECORD of each wheel of a lock, for `provision lock`'s conflict warning, read as cheaply as it can be: from
uv's cache where it unpacked the wheel, from provision's own wheel cache, from a RECORD read before (kept by the
wheel's sha256 under `$XDG_CACHE_HOME/provision/records/`), else out of the remote zip by HTTP range requests (a few
hundred KiB of each wheel, never the whole of it)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from provision import regular
from provision.atomic import write_atomic
from provision.errors import ProvisionError
from provision.log import Progress
from provision.stacks import lockcheck, uvcache, wheelcache, wheelproof

WORKERS = 16


def folder() -> Path:
    return wheelcache.folder().parent / "records"


def read_all(wheels: list[tuple[str, str, str, str]], uv_cache: Callable[[], Path | None],
             progress: Progress = lambda _: None) -> dict[str, dict[str, str] | None]:
    """wheel file name -> what its RECORD installs (None: not read) for each (project, file name, url, sha256);
    `uv_cache` says where uv's cache is, asked only when some RECORD was not read before."""
    found = {filename: _remembered(sha256) for _, filename, _, sha256 in wheels}
    wheels = [job for job in wheels if found[job[1]] is None]  # a RECORD read before is not looked for again
    cache = uv_cache() if wheels else None
    unpacked = uvcache.wheels(cache, {p for p, _, _, _ in wheels}) if cache and cache.is_dir() else {}
    if wheels:
        progress(f"reading the RECORD of {len(wheels)} wheels")

    def one(job: tuple[str, str, str, str]) -> tuple[str, dict[str, str] | None]:
        project, filename, url, sha256 = job
        cached = unpacked.get((project, uvcache.stem_of(filename)))
        found = in_folder(cached.archive) if cached and sha256 in cached.sha256s() else None
        return filename, found if found is not None else _elsewhere(filename, url, sha256)

    if wheels:  # every RECORD read before (a lock made again): no thread, no zip or HTTP reader is loaded
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(max_workers=WORKERS) as pool:
            found.update(pool.map(one, wheels))
    return found


def _remembered(sha256: str) -> dict[str, str] | None:
    """The RECORD kept by an earlier read of the wheel with this sha256, if any."""
    path = folder() / sha256 if len(sha256) == 64 and sha256.isalnum() else None
    try:
        return lockcheck.installed(regular.read_bytes(path).decode("utf-8", "replace")) if path else None
    except OSError:
        return None


def _elsewhere(filename: str, url: str, sha256: str) -> dict[str, str] | None:
    kept = wheelcache.cached(sha256, filename)
    if kept is not None:
        return in_wheel(kept)
    remembered = folder() / sha256 if len(sha256) == 64 and sha256.isalnum() else None
    if remembered is not None:
        try:
            return lockcheck.installed(regular.read_bytes(remembered).decode("utf-8", "replace"))
        except OSError:
            pass
    if not url.lower().startswith(("http://", "https://")):
        return None
    from provision.stacks import wheelmeta  # packaging.metadata and the index client: a remote zip is read

    try:
        raw = wheelmeta.record(url)
    except ProvisionError:
        return None  # a warning that cannot be given is not an error of the lock
    if raw is None:
        return None
    text = raw.decode("utf-8", "replace")
    if remembered is not None:  # by the lock's sha256: read from that URL for that lock, as the lock's own file
        os.makedirs(remembered.parent, exist_ok=True)
        write_atomic(remembered, text)
    return lockcheck.installed(text)


def in_folder(archive: Path) -> dict[str, str] | None:
    """What an unpacked wheel's RECORD says it installs; None when it has no readable RECORD."""
    for record in sorted(archive.glob("*.dist-info/RECORD")):
        try:
            return lockcheck.installed(regular.read_bytes(record).decode("utf-8", "replace"))
        except OSError:
            return None
    return None


def in_wheel(wheel: Path) -> dict[str, str] | None:
    """What a wheel file's RECORD says it installs; None when it has none."""
    import zipfile
    import zlib

    try:
        with zipfile.ZipFile(wheel) as archive:
            infos = [i for i in archive.infolist() if i.filename.count("/") == 1 and i.filename.endswith(".dist-info/RECORD")]
            if not infos:
                return None
            # inflated no further than the bound, as a METADATA is: a 2 MB wheel's RECORD may inflate to 1.2 GB
            text = wheelproof.bounded_member(archive, infos[0], wheelproof.RECORD_LIMIT).decode("utf-8", "replace")
            return lockcheck.installed(text)
    except (OSError, zipfile.BadZipFile, zlib.error, EOFError, NotImplementedError, wheelproof.NotProven):  # as scan reads a damaged wheel
        return None
