"""A wheel's METADATA from its index without installing it: the PEP 658 `.metadata` file where the index serves one,
else the METADATA member read out of the remote zip with HTTP range requests (the central directory and one member,
a few hundred KiB of a 40 MB wheel), else the whole wheel, streamed. All through `index.get`: every request within
its deadline and byte bound, the METADATA read no further than METADATA_LIMIT and parsed only as far as its headers.
A wheel whose index gives its sha256 has its METADATA's headers kept by that sha256 in provision's `metadata/` cache
(provision/wheelfacts.py): read once, then from there, checked on every read as when it was fetched. That sha256 is the
index's word, which only a whole download checks: headers read from a .metadata file or by range requests answer only
for the URL they were read from (the entry holds its sha256), never for the same sha256 another index lists."""

from __future__ import annotations

import contextlib
import hashlib
import io
import re
import tempfile
import zipfile
import zlib
from collections.abc import Callable
from typing import IO, TYPE_CHECKING, Literal

from provision import wheelfacts
from provision.errors import IndexUnreachable
from provision.stacks import index, urls

if TYPE_CHECKING:
    from _typeshed import WriteableBuffer
    from packaging.metadata import Metadata

BLOCK = 256 * 1024  # one range request: the zip's tail usually holds the whole central directory
# the first request for a RECORD: the SGLang stack's 207 wheels need 4 KiB of their tail at the median (the central
# directory and the RECORD before it), and 183 of them no more than this; the rest read on by BLOCKs. A lock's reads
# fetch 12 MB instead of 42 MB, beside uv resolving on the same link
RECORD_TAIL = 64 * 1024
# a METADATA, long description and all (the largest real ones are a few hundred KiB)
METADATA_LIMIT = 16 << 20
RECORD_LIMIT = 64 << 20  # a RECORD (torch's, among the largest, is a few MB)
RANGE_LIMIT = 64 << 20  # bytes fetched by range requests before reading the wheel whole is cheaper
# how a METADATA was read: its own file, range requests, the whole wheel
Source = Literal["pep658", "range", "download"]


class RangeFile(io.RawIOBase):
    """A seekable, read-only view of a remote file, fetched in blocks by HTTP range requests (what zipfile needs);
    `tail` holds the bytes from `tail_start` to the end when they were fetched first (`opened`)."""

    def __init__(self, url: str, size: int, tail_start: int | None = None, tail: bytes = b"") -> None:
        super().__init__()
        self.url, self.size, self.position = url, size, 0
        self.tail_start, self.tail = (size if tail_start is None else tail_start), tail
        self.blocks: dict[int, bytes] = {}
        self.fetched = len(tail)

    @classmethod
    def opened(cls, url: str, tail: int = BLOCK) -> RangeFile | None:
        """The remote wheel, opened by one request for its last `tail` bytes (`bytes=-N`, whose answer also gives the
        size): a small wheel's central directory and RECORD are all in it, so no HEAD is asked first. None where the
        index answers no range request (a 200 is not read on) or answers one that does not add up."""
        response = index.get(
            url,
            headers={"Range": f"bytes=-{tail}", "Accept-Encoding": "identity"},
            limit=tail,
            bodies=(206,),
            what="the range",
        )
        # each number at most 18 digits: a size past any file's (and int() refuses a string of 4,300 digits)
        said = response.headers.get("Content-Range", "").strip()
        whole = re.fullmatch(r"bytes \*/(\d{1,18})", said)
        if response.status_code == 416 and whole and 0 < int(whole.group(1)) <= tail:
            # a server that refuses a suffix longer than the file: by ranges
            return cls(url, int(whole.group(1)))
        span = re.fullmatch(r"bytes (\d{1,18})-(\d{1,18})/(\d{1,18})", said)
        if response.status_code != 206 or span is None:
            return None
        first, last, size = (int(n) for n in span.groups())
        if not (first <= last == size - 1 and last - first + 1 == len(response.content)):
            return None  # not the tail asked for: read no further
        return cls(url, size, first, response.content)

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.position

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self.position, io.SEEK_END: self.size}[whence]
        self.position = max(0, base + offset)
        return self.position

    def readinto(self, buffer: WriteableBuffer) -> int:
        view = memoryview(buffer).cast("B")
        wanted = min(len(view), max(0, self.size - self.position))
        done = 0
        while done < wanted:
            if self.position >= self.tail_start:
                start, block = self.tail_start, self.tail
            else:  # aligned blocks from the server: the same bytes where they reach the tail
                start = (self.position // BLOCK) * BLOCK
                block = self._block(start)
            offset = self.position - start
            take = min(wanted - done, len(block) - offset)
            if take <= 0:
                break
            view[done : done + take] = block[offset : offset + take]
            done += take
            self.position += take
        return done

    def _block(self, start: int) -> bytes:
        if start not in self.blocks:
            if self.fetched >= RANGE_LIMIT:
                raise _NoRanges(f"more than {RANGE_LIMIT:,} bytes by range requests")
            end = min(self.size, start + BLOCK) - 1
            response = index.get(
                self.url,
                headers={"Range": f"bytes={start}-{end}", "Accept-Encoding": "identity"},
                limit=BLOCK,
                bodies=(206,),
                what="the range",
            )
            if response.status_code != 206:
                raise _NoRanges(f"HTTP {response.status_code} to a range request")
            self.fetched += len(response.content)
            self.blocks[start] = response.content
        return self.blocks[start]


class _NoRanges(Exception):
    pass


SOURCES: tuple[Source, ...] = ("pep658", "range", "download")


def metadata(
    url: str,
    *,
    core_metadata: bool | dict[str, str] = False,
    sha256: str | None = None,
    size: int | None = None,
) -> tuple[Metadata, Source]:
    """Return the wheel's core metadata and how it was read: "pep658", "range" or "download" (no more than `size`
    bytes, the index's, else what the server says, else index.DOWNLOAD_LIMIT). With the wheel's `sha256` (the
    index's), what was read of it before is taken from `metadata/` with how it was read then; what is read now is
    kept there."""
    key = sha256.lower() if sha256 else ""
    kept = _kept(key, url) if key else None
    if kept is not None:
        return kept
    raw, how = _read(url, core_metadata=core_metadata, sha256=sha256, size=size)
    meta = _parse(raw, url)
    if key:
        bound = {} if how == "download" else {"url": urls.digest(url)}  # what the sha256 does not prove
        with contextlib.suppress(UnicodeDecodeError):
            wheelfacts.put(
                "metadata", key, {"headers": _headers(raw).decode("utf-8"), "source": how, **bound}
            )
    return meta, how


def _kept(key: str, url: str) -> tuple[Metadata, Source] | None:
    """The metadata kept for the wheel of sha256 `key`, parsed and checked as a fetched one; an entry of another
    shape, or one that does not parse, is removed (and the METADATA read again), never trusted."""
    data = wheelfacts.get("metadata", key)
    if data is None:
        return None
    source = data.get("source") if isinstance(data, dict) else None
    headers = data.get("headers") if isinstance(data, dict) else None
    if source != "download" and isinstance(data, dict) and data.get("url") != urls.digest(url):
        return None  # read by another URL's word of this sha256: read again here (and kept for this URL)
    if isinstance(headers, str) and source in SOURCES:
        try:
            return _parse(headers.encode("utf-8"), url), source
        except IndexUnreachable:
            pass
    wheelfacts.discard("metadata", key)
    return None


def _read(
    url: str, *, core_metadata: bool | dict[str, str], sha256: str | None, size: int | None
) -> tuple[bytes, Source]:
    """The wheel's METADATA, read the cheapest way the index allows, and how."""
    if core_metadata:
        response = index.get(url + ".metadata", limit=METADATA_LIMIT, what="the metadata")
        if response.status_code == 200:
            expected = core_metadata.get("sha256") if isinstance(core_metadata, dict) else None
            if expected and hashlib.sha256(response.content).hexdigest() != expected:
                raise IndexUnreachable(
                    f"{urls.redact(url)}.metadata: its sha256 does not match the index",
                    "the index is inconsistent; retry or use a mirror",
                )
            return response.content, "pep658"
    remote = RangeFile.opened(url)
    if remote is not None:
        try:
            return _member(io.BufferedReader(remote, BLOCK)), "range"
        except (_NoRanges, zipfile.BadZipFile):
            pass
    with tempfile.TemporaryFile() as spool:
        index.download(
            url,
            spool,
            sha256=sha256,
            hint="check the index and the version; retry if the file changed",
            size=size or (remote.size if remote is not None else None),
        )
        spool.seek(0)
        try:
            return _member(spool), "download"
        except zipfile.BadZipFile as exc:
            raise IndexUnreachable(
                f"{urls.redact(url)}: not a wheel with a METADATA ({_one_line(str(exc))})",
                "the index serves something other than a wheel there; report it, or use a mirror",
            ) from None


def record(url: str) -> bytes | None:
    """The wheel's .dist-info/RECORD read by HTTP range requests (the zip's directory and that member); None where
    the index does not answer range requests (the whole wheel is never downloaded for it), or it is larger than
    RECORD_LIMIT."""
    remote = _ranged(url, RECORD_TAIL)
    if remote is None:
        return None
    try:
        return _member(remote, "RECORD", RECORD_LIMIT)
    except (_NoRanges, zipfile.BadZipFile):
        return None


def _ranged(url: str, tail: int = BLOCK) -> io.BufferedReader | None:
    """The remote wheel as a file read by range requests (its last `tail` bytes first); None where the index answers
    none."""
    remote = RangeFile.opened(url, tail)
    return io.BufferedReader(remote, BLOCK) if remote is not None else None


def sources(
    url: str, wanted: Callable[[str], bool], limit: int = 1 << 20, total: int = 8 << 20
) -> dict[str, bytes] | None:
    """The members of the remote wheel whose names `wanted` accepts, each at most `limit` bytes (a larger one is left
    out) and `total` together, read by HTTP range requests; None where the index answers no range requests (the
    whole wheel is never downloaded for it) or the zip is damaged."""
    remote = _ranged(url)
    if remote is None:
        return None
    found: dict[str, bytes] = {}
    try:
        with zipfile.ZipFile(remote) as wheel:
            # in file order: fewer ranges
            for info in sorted(wheel.infolist(), key=lambda i: i.header_offset):
                if (
                    wanted(info.filename)
                    and info.file_size <= limit
                    and sum(map(len, found.values())) + info.file_size <= total
                ):
                    with wheel.open(info) as opened:
                        found[info.filename] = opened.read(limit + 1)[:limit]
    except (_NoRanges, zipfile.BadZipFile, OSError, ValueError, EOFError, NotImplementedError, zlib.error):
        return None
    return found


def _member(
    stream: IO[bytes] | io.BufferedReader, member: str = "METADATA", limit: int = METADATA_LIMIT
) -> bytes:
    """The wheel's .dist-info/`member`, read no further than `limit`; BadZipFile for any damage, or a larger one. Read
    by its own directory entry where the zip is of the common case (zipentry), else by zipfile."""
    from provision.stacks import zipentry

    try:
        found = zipentry.member(stream, member, limit)
    except (OSError, ValueError) as exc:
        raise zipfile.BadZipFile(f"{type(exc).__name__}: {exc}") from exc
    if found is not None:
        return found
    try:
        with zipfile.ZipFile(stream) as wheel:
            names = [
                i
                for i in wheel.infolist()
                if i.filename.count("/") == 1 and i.filename.endswith(f".dist-info/{member}")
            ]
            if not names:
                raise zipfile.BadZipFile(f"no .dist-info/{member}")
            with wheel.open(names[0]) as opened:
                data = opened.read(limit + 1)
    except zipfile.BadZipFile:
        raise
    except (OSError, ValueError, EOFError, NotImplementedError, zlib.error) as exc:
        raise zipfile.BadZipFile(f"{type(exc).__name__}: {exc}") from exc
    if len(data) > limit:
        raise zipfile.BadZipFile(f"its {member} is larger than {limit:,} bytes")
    return data


def _parse(raw: bytes, url: str) -> Metadata:
    """The METADATA's header fields (the long description after them is never parsed), Requires-Dist checked
    here: a requirement that does not parse is an IndexUnreachable naming the URL, not a traceback later."""
    from packaging.metadata import Metadata  # email's parser with it: a RECORD alone is read without them

    if len(raw) > METADATA_LIMIT:
        raise IndexUnreachable(
            f"{urls.redact(url)}: its METADATA is larger than {METADATA_LIMIT:,} bytes",
            "report it to the package's maintainers",
        )
    head = _headers(raw)
    try:
        meta = Metadata.from_email(head, validate=False)
        # parsed now (and kept by packaging): a bad one is named here
        for requirement in meta.requires_dist or []:
            # a version packaging takes as text and fails on where it compares it
            for spec in requirement.specifier:
                _check_version(requirement.name, spec.operator, spec.version)
    except Exception as exc:
        raise IndexUnreachable(
            f"{urls.redact(url)}: its METADATA cannot be read ({_one_line(_reason(exc))})",
            "report it to the package's maintainers; choose another release",
        ) from None
    return meta


def _headers(raw: bytes) -> bytes:
    """A METADATA's header fields, without the long description after them: what is parsed, and kept."""
    return re.split(rb"\r?\n\r?\n", raw, maxsplit=1)[0] + b"\n"


def _check_version(name: str, operator: str, version: str) -> None:
    """A ValueError for a Requires-Dist version no release can have (a number past int()'s 4300 digits); `===` compares
    text, and is left alone."""
    from packaging.version import Version

    if operator == "===":
        return
    try:
        Version(version.removesuffix(".*"))
    except ValueError:
        raise ValueError(
            f"Requires-Dist {name} {operator} a version of {len(version)} characters that no release can have"
        ) from None


def _reason(exc: BaseException) -> str:
    inner = getattr(exc, "exceptions", None)
    return str(inner[0]) if inner else str(exc)


def _one_line(text: str) -> str:
    """`text` on one line, control characters shown as escapes, at most 200 characters."""
    shown = re.sub(r"[\x00-\x1f\x7f]", lambda m: f"\\x{ord(m.group()):02x}", text)
    return shown if len(shown) <= 200 else shown[:199] + "…"
