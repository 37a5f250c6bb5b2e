"""RECORDs read while uv still works: `lock` knows the wheels of the lock it is about to replace (a lock made again
after a small change keeps most of them) as soon as uv starts, and the new lock's wheels as soon as uv's first answer is
out, while the packages are attributed to their indexes and uv may resolve a second time. Their RECORDs are read in
the background from then on, as many at a time as wheelrecords.WORKERS, each once (wheelrecords waits for a read in
flight instead of starting it again); once the lock is known, what it does not hold is no longer started, and what
still runs when the lock ends is dropped with the process, never waited for (`DaemonPool`)."""

from __future__ import annotations

import contextlib
import os
import queue
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:  # loaded once uv runs, where a read starts: not on the way to uv
    from concurrent.futures import Future

    from provision.stacks import wheelrecords

T = TypeVar("T")


class DaemonPool:
    """`submit` as ThreadPoolExecutor's, on daemon threads: a read still running when the process ends is dropped
    with it. ThreadPoolExecutor's threads are joined at exit: a lock that uv failed in 0.4 s waited 20 s more for a
    read ahead that a slow index held, a read no one needed any more."""

    def __init__(self, workers: int | None, name: str) -> None:
        # None: as many as wheelrecords reads at a time, looked up at the first job (once uv runs)
        self.workers, self.name = workers, name
        self.jobs: queue.SimpleQueue[tuple[Future[Any], Callable[..., Any], tuple[Any, ...]] | None] = (
            queue.SimpleQueue()
        )
        self.threads: list[threading.Thread] = []
        self.closed = False
        self.guard = threading.Lock()

    def submit(self, fn: Callable[..., T], /, *args: Any) -> Future[T]:
        future: Future[T] = _future()
        with self.guard:
            if self.closed:
                raise RuntimeError("the pool is shut")
            self.jobs.put((future, fn, args))
            if self.workers is None:
                from provision.stacks import wheelrecords

                self.workers = wheelrecords.WORKERS
            if len(self.threads) < self.workers:  # a thread per job until there are `workers`
                thread = threading.Thread(
                    target=self._work, name=f"{self.name}-{len(self.threads)}", daemon=True
                )
                self.threads.append(thread)
                thread.start()
        return future

    def _work(self) -> None:
        behind_uv()
        while (job := self.jobs.get()) is not None:
            future, fn, args = job
            if not future.set_running_or_notify_cancel():
                continue
            try:
                result = fn(*args)
            except BaseException as exc:
                future.set_exception(exc)
            else:
                future.set_result(result)

    def shutdown(self) -> None:
        """Start nothing more: what waits is cancelled, what runs ends in its thread (or with the process)."""
        with self.guard:
            self.closed = True
            while True:
                try:
                    job = self.jobs.get_nowait()
                except queue.Empty:
                    break
                if job is not None:
                    job[0].cancel()
            for _ in self.threads:
                self.jobs.put(None)


BEHIND = 10  # the niceness of a read ahead's threads, as nice(1) gives it


def behind_uv() -> None:
    """Run this thread (and the threads it starts, which inherit it) behind uv and the main thread: a read ahead is
    only worth its CPU where uv, whose answer the lock waits for, is not slowed by it. On two cores the SGLang stack's
    first lock took 1.93-2.06 s with reads ahead at uv's priority, 1.80-1.89 s behind it (uv itself 1.50-1.59 s
    instead of 1.66-1.77). Linux sets a thread's niceness by its id; elsewhere nothing is changed."""
    import sys

    if sys.platform == "linux":
        with contextlib.suppress(OSError):  # a sandbox that refuses it: the read runs as it was
            os.setpriority(
                os.PRIO_PROCESS, threading.get_native_id(), os.getpriority(os.PRIO_PROCESS, 0) + BEHIND
            )


class EarlyReads:
    """The background reads of one lock run; `keep_only` stops what the new lock does not need."""

    def __init__(self, uv_cache: Callable[[], Path | None], rank: Rank) -> None:
        self.uv_cache, self.rank = uv_cache, rank
        self.futures: dict[str, Future[object]] = {}
        self.wanted: set[str] | None = None
        self.closed = False  # keep_only shut the pool: nothing more is submitted
        self.guard = threading.Lock()
        self.previous: set[str] | None = None  # the URLs of the lock replaced, once read (`start_from`)
        self.waiting: list[str] = []  # URLs uv named before that lock was read
        # that lock's wheels, where their verdict was kept
        self.judged: frozenset[wheelrecords.Job] | None = None
        self.started = False  # start_from was asked
        self.pool = DaemonPool(None, "early-record")

    def start_from(self, packages: list[Any]) -> None:
        """Read, in a thread of its own, the RECORDs of the wheels of the lock replaced (its `packages`, parsed while uv
        resolves; [] where there is none or it does not read as a lock); asked again (uv run a second time), nothing
        more."""
        with self.guard:
            if self.started:
                return
            self.started = True
        threading.Thread(target=self._previous, args=(packages,), name="early-records", daemon=True).start()

    def _previous(self, packages: list[Any]) -> None:
        from provision.stacks import wheelrecords

        jobs: list[wheelrecords.Job] = []
        try:
            jobs = jobs_of(packages, self.rank)
        finally:
            with self.guard:  # what uv named meanwhile, less what that lock holds
                self.previous = {job[2] for job in jobs}
                waiting, self.waiting = self.waiting, []
            for url in waiting:
                self.ahead(url)
        if jobs and wheelrecords.kept_verdict(jobs) is not None:
            with self.guard:
                self.judged = frozenset(jobs)
            return  # judged before: made again with the same wheels, the lock reads none of their RECORDs
        self._start(self._claim(jobs))

    def add(self, jobs: list[wheelrecords.Job]) -> None:
        """Start reading these wheels' RECORDs, but for those read before or started already: the main thread only
        claims them; what was kept in records/ is looked up, and uv's cache searched, in a thread of its own."""
        with self.guard:
            if self.judged is not None and set(jobs) == self.judged:
                return  # the wheels of the lock replaced, judged before: the gate reads none of them
        claimed = self._claim(jobs)
        if claimed:
            threading.Thread(target=self._start, args=(claimed,), name="early-records", daemon=True).start()

    def _claim(self, jobs: list[wheelrecords.Job]) -> list[wheelrecords.Job]:
        with self.guard:
            jobs = [
                job
                for job in jobs
                if job[3] not in self.futures and (self.wanted is None or job[3] in self.wanted)
            ]
            for job in jobs:  # claimed before the slow part below: another batch does not start them again
                self.futures[job[3]] = _future()
        return jobs

    def _start(self, jobs: list[wheelrecords.Job]) -> None:
        from provision.stacks import wheelrecords

        jobs = [  # what is read ahead already is taken by the gate as it ends
            job
            for job in jobs
            if not wheelrecords.ahead_started(job[2]) and wheelrecords.remembered(job[3], job[2]) is None
        ]
        if not jobs:
            return
        try:
            unpacked = wheelrecords.in_uv_cache(jobs, self.uv_cache)
        except Exception:
            return
        with self.guard:
            for job in jobs:
                # keep_only comes once the lock is known: what it wants was started before
                if not self.closed:
                    self.futures[job[3]] = self.pool.submit(wheelrecords.read_one, job, unpacked)

    def ahead(self, url: str) -> None:
        """Start reading the RECORD of the wheel at `url`, which uv is looking at now (wheelrecords.ahead), unless the
        lock replaced holds it (read as that lock's, or judged with it); asked before that lock was read, it waits."""
        with self.guard:
            if self.previous is None:
                self.waiting.append(url)
            elif not self.closed and url not in self.previous:
                from provision.stacks import wheelrecords

                wheelrecords.ahead(url, self.pool.submit)

    def keep_only(self, sha256s: set[str]) -> None:
        """Stop the reads not yet started of wheels outside `sha256s`; the started ones end in their threads."""
        with self.guard:
            self.wanted = sha256s
            self.closed = True
            for sha256, future in self.futures.items():
                if sha256 not in sha256s:
                    future.cancel()
        self.pool.shutdown()  # reads ahead not started are not started


# a wheel's file name -> where the target's installer ranks it (lower: taken first)
Rank = Callable[[str], int]


def jobs_of(packages: list[Any], rank: Rank) -> list[wheelrecords.Job]:
    """(project, file name, URL, sha256) of the wheel `lock`'s gate reads for each package of a lock's `packages`: the
    one the target's installer takes (`rank`, the first of equals listed; uv reads that one's metadata while it
    resolves, so its RECORD is read ahead), those without a sha256 left out."""
    from packaging.utils import canonicalize_name

    from provision.stacks import urls

    jobs: dict[str, wheelrecords.Job] = {}
    for package in packages:
        if not isinstance(package, dict) or not isinstance(package.get("name"), str):
            continue
        name = str(canonicalize_name(package["name"]))
        wheels = package.get("wheels")
        for wheel in wheels if isinstance(wheels, list) else []:
            if not isinstance(wheel, dict) or not isinstance(wheel.get("url", ""), str):
                continue
            url = urls.strip_credentials(wheel.get("url", ""))
            named = wheel.get("name")
            filename = named if isinstance(named, str) else urls.filename(url)
            hashes = wheel.get("hashes")
            sha256 = hashes.get("sha256", "") if isinstance(hashes, dict) else ""
            if (
                filename.endswith(".whl")
                and isinstance(sha256, str)
                and sha256
                and (name not in jobs or rank(filename) < rank(jobs[name][1]))
            ):
                jobs[name] = (name, filename, url, sha256.lower())
    return list(jobs.values())


def _future() -> Future[Any]:
    from concurrent.futures import Future  # loaded once uv runs: the lock's way to uv loads none

    return Future()
