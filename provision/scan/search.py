"""Every offset of the fatbin container magic in the data sections of a mapped file, searched by several processes.

Containers kept outside `.nv_fatbin` (cuBLASLt's `.cask_resource`, cuFFT's `.data`, TensorFlow's `.rodata`) are
found only by searching for their magic: 150-300 MB of loaded data in the largest libraries. `bytes.find` (what
`mmap.find` runs) is C, about 1-3 GB/s on one core, and holds the GIL, so threads would take turns. Forked children
share the parent's read-only mapping, each searches its slice with the same `find` and sends the offsets it found
back over a pipe (a few integers; marshal). The walk over those offsets (fatbin.parse) stays in the parent, so the
answer is the one a single process gives; a child that fails leaves its slice to the parent.
"""

from __future__ import annotations

import marshal
import os
from typing import Any

from provision.scan import fatbin

MAGIC = fatbin.CONTAINER_START
SLICE_MIN = 16 << 20  # a process is worth starting for this many bytes or more (a fork here is ~1 ms)

Piece = tuple[int, int]  # (first offset a hit may start at, end of the bytes searched)


def hits(buffer: Any, pieces: list[Piece]) -> list[int]:
    """Every offset of the magic that starts in a piece, in order."""
    found = []
    for start, end in pieces:
        at = buffer.find(MAGIC, start, end)
        while at >= 0:
            found.append(at)
            at = buffer.find(MAGIC, at + 1, end)
    return found


def split(ranges: list[tuple[int, int]], count: int) -> list[list[Piece]]:
    """`ranges` (start, end) cut into `count` groups of about equal bytes; a piece cut inside a range searches 3 bytes
    past its cut (still inside the range), so the magic that starts before the cut is found by that piece only."""
    share = -(-sum(end - start for start, end in ranges) // count)
    groups: list[list[Piece]] = [[]]
    room = share
    for start, end in ranges:
        while start < end:
            if not room:
                groups.append([])
                room = share
            stop = start + min(room, end - start)
            groups[-1].append((start, min(stop + len(MAGIC) - 1, end)))
            room -= stop - start
            start = stop
    return groups


class Search:
    """Start searching `ranges` of `buffer` over up to `jobs` processes (the caller's one included); `result()` then
    searches the caller's share and gathers the rest. Meanwhile the caller may do other work (walk `.nv_fatbin`):
    with `walking`, that work is its share, and every share of the search goes to a child (cuBLASLt: a walk of
    2,782 containers beside 258 MB searched; the caller's share after its walk was the longest path)."""

    def __init__(
        self, buffer: Any, ranges: list[tuple[int, int]], jobs: int = 1, walking: bool = False
    ) -> None:
        self.buffer = buffer
        count = min(jobs, sum(end - start for start, end in ranges) // SLICE_MIN)
        if count < 2 or not _may_fork():
            count = 1
        groups = split(ranges, count) if ranges else []
        self.own, spawned = (groups[:0], groups) if walking and count > 1 else (groups[:1], groups[1:])
        self.children = [(_spawn(buffer, group), group) for group in spawned]

    def result(self) -> list[int]:
        found = hits(self.buffer, self.own[0]) if self.own else []
        for child, group in self.children:
            if child is None:  # never forked: its slice is searched here
                found.extend(hits(self.buffer, group))
                continue
            pid, fd = child
            with os.fdopen(fd, "rb") as pipe:
                data = pipe.read()
            try:
                status = os.waitpid(pid, 0)[1]
            except ChildProcessError:  # SIGCHLD ignored by whoever runs us: the child was reaped for us
                status = 0
            try:
                found.extend(marshal.loads(data) if status == 0 else hits(self.buffer, group))
            except (EOFError, ValueError, TypeError):  # a child cut short: its slice is searched here
                found.extend(hits(self.buffer, group))
        return sorted(found)


def _may_fork() -> bool:
    """Only a process with one thread forks: a child of a threaded one could inherit a lock another thread held."""
    import threading

    return hasattr(os, "fork") and threading.active_count() == 1


def _spawn(buffer: Any, group: list[Piece]) -> tuple[int, int] | None:
    """A child that searches `group` and writes its hits to a pipe: (its pid, the pipe's reading end); None where
    none could be started (fork's EAGAIN: out of processes; ENOMEM; no descriptor for the pipe): the parent
    searches `group` itself."""
    try:
        read, write = os.pipe()
    except OSError:
        return None
    try:
        pid = os.fork()
    except OSError:
        os.close(read)
        os.close(write)
        return None
    if pid == 0:  # the child: search, write, leave without running the parent's exit handlers
        code = 1
        try:
            os.close(read)
            with os.fdopen(write, "wb") as pipe:
                pipe.write(marshal.dumps(hits(buffer, group)))
            code = 0
        finally:
            os._exit(code)
    os.close(write)
    return pid, read
