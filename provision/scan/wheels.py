"""Wheels scanned in place: every ELF or archive member read from the zip, in parallel, never unpacked to disk.

A large member is inflated once, front to back, in chunks, and never held whole: containers are found by magic and
header as the bytes go by, their payloads skipped; the section table at the end of the file then places each one as
the file scan would (`.nv_fatbin` and loaded data: code the driver loads; `__nv_relfatbin` of a shared library: the
relocatable copy kept for linking). Small members are read whole and scanned like a file on disk.
"""

from __future__ import annotations

import bisect
import os
import signal
import zipfile
import zlib
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any, Protocol

from provision.scan import archives, elf, fatbin, members

CHUNK = 1 << 20
WHOLE = 16 << 20  # members up to this size are read whole
PARALLEL = 64 << 20  # below this many candidate bytes in all, worker processes cost more than they save
MARK = 16 << 20  # a member of a wheel is marked this often, so a second look at its names starts near them
KEEP = 1 << 20  # bytes kept before the section table: where linkers put the section-name table
# the most of a section table (or of its name table) held: 65,280 sections of 64 bytes is 4 MiB
TABLE_MAX = 16 << 20
# what is read whole when it cannot be streamed (a 32-bit or big-endian ELF, a bare cubin)
WHOLE_MAX = 64 << 20


class Stream(Protocol):
    """What the streaming reader needs of a member: a file object, a zip member (members.Reader), a slice of one."""

    def read(self, count: int = -1, /) -> bytes: ...

    def __enter__(self) -> Stream: ...

    def __exit__(self, *exc: Any) -> Any: ...


Result = tuple[str, "fatbin.Code | None", str]  # member name, code found (None: not read), why not read


# Members whose names say they are text or Python: never opened to look for an ELF header (a wheel such as
# tensorflow's holds 24,000 members, 77 of them ELF).
NOT_BINARY = (
    ".py",
    ".pyi",
    ".pyc",
    ".h",
    ".hpp",
    ".cuh",
    ".inc",
    ".txt",
    ".md",
    ".rst",
    ".json",
    ".toml",
    ".cfg",
    ".ini",
    ".yaml",
    ".yml",
    ".html",
    ".css",
    ".js",
    ".csv",
    ".proto",
    ".typed",
)


def candidates(wheel: zipfile.ZipFile) -> list[zipfile.ZipInfo]:
    """Members that start like an ELF file or an ar archive (their first bytes inflated from the wheel's file)."""
    found = []
    fd = os.open(wheel.filename or "", os.O_RDONLY)
    try:
        for info in wheel.infolist():
            if (
                info.is_dir()
                or info.file_size < 8
                or info.filename.endswith(NOT_BINARY)
                or ".dist-info/" in info.filename
            ):
                continue
            with members.Reader(fd, members.Place.of(info), wheel.filename or "", chunk=4096) as member:
                head = member.read(8)
            if head[:4] == elf.ELF_MAGIC or head == archives.AR_MAGIC:
                found.append(info)
    finally:
        os.close(fd)
    return found


def scan_wheel(path: Path, jobs: int | None = None) -> Iterator[Result]:
    """Yield (member, code, problem) for every candidate member of the wheel at `path`, biggest first in parallel
    over `jobs` processes (default: every core this process may use). The central directory is read here, once;
    the workers get each member's place and inflate it from their own descriptor (provision.scan.members)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        with zipfile.ZipFile(path) as wheel:
            places = [members.Place.of(i) for i in sorted(candidates(wheel), key=lambda i: -i.file_size)]
        jobs = jobs or len(os.sched_getaffinity(0))
        if jobs > 1 and len(places) > 1 and sum(p.size for p in places) > PARALLEL:
            import multiprocessing
            from concurrent.futures.process import BrokenProcessPool

            from provision import proc

            _imported_for_workers()
            pool = ProcessPoolExecutor(
                min(jobs, len(places)),
                mp_context=multiprocessing.get_context("fork"),
                initializer=_start_worker,
                initargs=(str(path), proc.death_signal(os.getpid())),
            )
            try:
                scanned = pool.map(_scan_member, places)  # the workers are forked here, all of them
            # one could not be forked (EAGAIN: out of processes; ENOMEM): the members are scanned here
            except OSError:
                _stop(pool)
            else:
                given = 0
                try:
                    for result in scanned:
                        yield result
                        given += 1
                # a worker was killed (the OOM killer, kill -9): the rest is scanned here
                except BrokenProcessPool:
                    _stop(pool)
                    places = places[given:]
                # Ctrl-C, the reader stopped (GeneratorExit), a damaged member: no waiting for the rest of the
                # wheel, no worker left behind
                except BaseException:
                    _stop(pool)
                    raise
                else:
                    pool.shutdown()
                    return
        for place in places:
            yield _scan_place(fd, str(path), place)
    finally:
        os.close(fd)


def _imported_for_workers() -> None:
    """Import, here and now, every module a worker may import later. The workers are forked from a process whose
    other threads may be importing at that moment (report --lock scans several wheels at once, each forking its own
    workers): a module half imported by another thread is held by that thread's import lock, which no thread of the
    child will ever release, so a worker that imports it waits forever (and holds the caller's stdout open). Imported
    here first, each is whole before any fork: another thread's import of it has ended, or this one waited for it.
    tests/scan/test_scan_fork_imports.py holds a worker's whole path to the modules imported here."""
    import elftools.elf.elffile  # noqa: F401  (a 32-bit or big-endian ELF)

    from provision.scan import search  # noqa: F401  (elf.code_in_image)


def _stop(pool: ProcessPoolExecutor) -> None:
    """End a pool at once, its workers killed: one was not forked, one died, or the scan ends early. Left to
    themselves they would go on with members nobody reads, or wait for work no manager will send, holding the
    caller's stdout open (its reader waits for them)."""
    started = list((getattr(pool, "_processes", None) or {}).values())
    pool.shutdown(wait=False, cancel_futures=True)
    for worker in started:
        worker.kill()
        worker.join(5)


_WHEEL: tuple[int, str] | None = None  # in a worker: the wheel's descriptor (opened once) and path


def _start_worker(path: str, die_with_parent: Callable[[], None] | None) -> None:
    """A worker's first step: it dies with the scan's process (PR_SET_PDEATHSIG: a scan killed leaves no worker
    holding its stdout), leaves Ctrl-C to that process (which ends the workers itself; a worker interrupted would
    print its traceback and take its next member), and opens the wheel."""
    if die_with_parent is not None:
        die_with_parent()
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _open_wheel(path)


def _open_wheel(path: str) -> None:
    global _WHEEL
    _WHEEL = os.open(path, os.O_RDONLY), path


def _scan_member(place: members.Place) -> Result:
    assert _WHEEL is not None, "a worker opens its wheel first"
    return _scan_place(*_WHEEL, place)


def _scan_place(fd: int, path: str, place: members.Place) -> Result:
    def open_member() -> members.Reader:
        return members.Reader(fd, place, path)

    try:
        if place.size <= WHOLE:
            with open_member() as member:
                return place.name, code_in_bytes(member.read(WHOLE + 1)), ""
        return place.name, code_in_stream(open_member, place.size), ""
    except (zipfile.BadZipFile, zlib.error, EOFError):
        raise  # the zip itself is damaged (a bad CRC): the wheel cannot be trusted, the caller says so
    except Exception as exc:
        return place.name, None, f"{type(exc).__name__}: {exc}"


def code_in_bytes(data: bytes | bytearray) -> fatbin.Code:
    """The device code of an ELF file or ar archive held in memory."""
    if data[:8] == archives.AR_MAGIC:
        total = fatbin.Code()
        for _name, offset, size in archives.members(data):
            if data[offset : offset + 4] == elf.ELF_MAGIC:
                total.add(elf.code_in_image(data, offset, size))
        return total
    if data[:4] == elf.ELF_MAGIC:
        return elf.code_in_image(data)
    return fatbin.Code()


class _Window:
    """The bytes of a stream from absolute offset `base` on; older bytes are dropped as the reader moves on, except
    those from `keep_from` on, which are kept (the section table and its names, at the end of the file)."""

    def __init__(
        self, read: Callable[[int], bytes], mark: Callable[[], Any] | None = None, base: int = 0
    ) -> None:
        self.source, self.data, self.base, self.eof = read, bytearray(), base, False
        self.keep_from, self.keep_to, self.kept = 1 << 62, 1 << 62, bytearray()
        # (offset, where the stream stood there) every MARK bytes
        self.mark, self.marks = (
            mark,
            [(base, None)],
        )

    def read(self, count: int) -> bytes:
        if self.mark is not None and self.end >= self.marks[-1][0] + MARK:
            self.marks.append((self.end, self.mark()))
        return self.source(count)

    def mark_before(self, offset: int) -> tuple[int, Any]:
        """The last (offset, mark) taken at or before `offset`; (0, None) when none was."""
        return max(
            (m for m in self.marks if m[0] <= offset and m[1] is not None),
            default=(0, None),
            key=lambda m: m[0],
        )

    @property
    def end(self) -> int:
        return self.base + len(self.data)

    def fill(self, upto: int) -> bool:
        """Read until bytes up to `upto` are held; False when the stream ends first."""
        while self.end < upto and not self.eof:
            chunk = self.read(CHUNK)
            if chunk:
                self.data += chunk
            else:
                self.eof = True
        return self.end >= upto

    def _drop(self, count: int) -> None:
        # only [keep_from, keep_to) is kept
        if self.end > self.keep_from and count and self.base < self.keep_to:
            self.kept += self.data[max(0, self.keep_from - self.base) : min(count, self.keep_to - self.base)]
        del self.data[:count]
        self.base += count

    def skip_to(self, offset: int) -> None:
        """Drop everything before `offset`, reading what lies between."""
        while self.end < offset and not self.eof:
            self._drop(len(self.data))
            chunk = self.read(min(CHUNK, offset - self.base) if self.keep_from > offset else CHUNK)
            if chunk:
                self.data += chunk
            else:
                self.eof = True
        self._drop(max(0, min(offset, self.end) - self.base))

    def finish(self) -> bytes:
        """Read to the end; return the kept bytes (from `keep_from` to `keep_to`)."""
        while not self.eof:
            self.skip_to(self.end + CHUNK)
        self._drop(len(self.data))
        return bytes(self.kept)


def code_in_stream(open_member: Callable[[], Stream], size: int | None = None) -> fatbin.Code:
    """The device code of an ELF file or ar archive read front to back: the same answer as `elf.code_in_image` on
    the whole file, holding only a chunk, the container being walked, and the section table (at most TABLE_MAX,
    and KEEP bytes before it). An archive's members are streamed the same way; a 32-bit or big-endian ELF or a
    bare cubin is read whole up to WHOLE_MAX, a larger one is a ValueError (a note), never held."""
    with open_member() as member:
        window = _Window(member.read, getattr(member, "mark", None))
        window.fill(4096)
        if window.data[:8] == archives.AR_MAGIC:
            return _archive_in_stream(window, open_member)
        header = None if window.end < 64 else elf.read_header(window.data)
        if header is None or header.machine == elf.EM_CUDA:  # rare: read whole, within a bound
            if (size or 0) > WHOLE_MAX or window.fill(WHOLE_MAX + 1):
                raise ValueError(
                    f"a 32-bit or big-endian ELF, or a bare cubin, larger than {WHOLE_MAX >> 20} MiB: not read"
                )
            return code_in_bytes(window.data)
        window.keep_from = max(0, header.shoff - KEEP)
        window.keep_to = header.shoff + min(
            header.shnum * header.shentsize if header.shnum else TABLE_MAX, TABLE_MAX
        )
        found = _containers(window)
        tail = window.finish()
        end = min(window.end, window.keep_to)
    table = header.shoff - window.keep_from
    rows, names = elf.section_rows(header, tail, table, max(0, len(tail) - table))
    if names >= len(rows):
        raise ValueError("no section-name table")
    # names past TABLE_MAX are never read
    names_at, names_size = (
        rows[names][4],
        min(rows[names][5], TABLE_MAX),
    )
    if names_at >= window.keep_from and names_at + names_size <= end:
        sections = elf.name_sections(rows, tail, names_at - window.keep_from, names_size)
    else:  # the name table lies further from the end than kept (before a large `.strtab`): read it again, from the
        # last mark before it (a member of a wheel), else from the start
        start, mark = window.mark_before(names_at)
        resumed = getattr(member, "resumed", None)
        with resumed(mark) if resumed and mark else open_member() as again_member:
            again = _Window(again_member.read, base=start if resumed and mark else 0)
            again.skip_to(names_at)
            again.fill(names_at + names_size)
            sections = elf.name_sections(rows, again.data, 0, min(names_size, len(again.data)))
    image = elf.Image(header.type, header.machine, header.flags, header.abi_version, sections)
    return place(image, found)


def _archive_in_stream(window: _Window, open_member: Callable[[], Stream]) -> fatbin.Code:
    """The device code of the ELF members of an ar archive read front to back: each header read as the bytes go by,
    a small member scanned whole, a large one streamed from a reopened copy of the archive (a second pass over it)."""
    total = fatbin.Code()
    offset = len(archives.AR_MAGIC)
    while True:
        window.skip_to(offset)
        if not window.fill(offset + archives.HEADER):
            return total
        name, start, length, offset = archives.header_at(bytes(window.data[: archives.HEADER]), offset)
        if (
            name is None
            or not window.fill(start + 4)
            or window.data[start - window.base : start - window.base + 4] != elf.ELF_MAGIC
        ):
            continue
        if length <= WHOLE:
            window.fill(start + length)
            total.add(code_in_bytes(bytes(window.data[start - window.base : start - window.base + length])))
        else:
            total.add(code_in_stream(_slice_opener(open_member, start, length), length))


def _slice_opener(open_member: Callable[[], Stream], at: int, length: int) -> Callable[[], Stream]:
    return lambda: _Slice(open_member(), at, length)


class _Slice:
    """`length` bytes from offset `at` of a stream, read by skipping to it (what a zip member allows): a file object
    for `code_in_stream`."""

    def __init__(self, stream: Stream, at: int, length: int) -> None:
        self.stream, self.left = stream, length
        while at > 0:
            skipped = len(stream.read(min(CHUNK, at)))
            if not skipped:
                break
            at -= skipped

    def read(self, count: int = -1) -> bytes:
        count = self.left if count < 0 else min(count, self.left)
        data = self.stream.read(count) if count else b""
        self.left -= len(data)
        return data

    def __enter__(self) -> _Slice:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stream.__exit__(*exc)


def place(image: elf.Image, found: list[tuple[int, int, fatbin.Counts]]) -> fatbin.Code:
    """Put each container (offset, size, counts) where `elf.role` puts the section holding it, as the file scan does."""
    ordered = sorted((s.offset, s.offset + s.size, s) for s in image.sections if elf.role(image, s))
    starts = [start for start, _end, _s in ordered]
    code = fatbin.Code()
    for offset, size, counts in found:
        index = bisect.bisect_right(starts, offset) - 1
        if index < 0 or offset + size > ordered[index][1]:
            continue
        target = elf.role(image, ordered[index][2])
        (code.relocatable if target == "relocatable" else code.loadable).add(counts)
    return code


def _containers(window: _Window) -> list[tuple[int, int, fatbin.Counts]]:
    """Every container in the stream: (offset, size, counts), found by magic and header, payloads skipped."""
    found: list[tuple[int, int, fatbin.Counts]] = []
    position = 0
    while True:
        hit = window.data.find(fatbin.CONTAINER_START, max(0, position - window.base))
        if hit < 0:
            if window.eof:
                return found
            window.skip_to(max(position, window.end - len(fatbin.CONTAINER_START) + 1))
            window.fill(window.end + CHUNK)
            continue
        at = window.base + hit
        window.fill(at + fatbin.CONTAINER_HEADER + fatbin.ENTRY_HEADER_MIN)
        size = fatbin.container_at(window.data, at - window.base)
        if not size:
            position = at + 1
            continue
        counts = fatbin.Counts(containers=1)
        entry = at + fatbin.CONTAINER_HEADER
        while entry + fatbin.ENTRY_HEADER_MIN <= at + size:
            window.skip_to(entry)
            if not window.fill(entry + fatbin.ENTRY_HEADER_MIN) or not (
                step := fatbin.count_entry(window.data, 0, counts)
            ):
                break
            entry += step
        found.append((at, size, counts))
        position = at + size
