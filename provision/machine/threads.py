"""Run a few blocking reads side by side on plain threads: concurrent.futures would import logging and more, which
the probe's whole-process time cannot afford."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from typing import Generic, TypeVar

A = TypeVar("A")
T = TypeVar("T")


class Background(Generic[T]):
    """fn(arg) started on a daemon thread; `result()` waits for it and returns its value or raises its error."""

    def __init__(self, fn: Callable[[A], T], arg: A) -> None:
        self._value: list[T] = []  # its one value once fn has returned
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(fn, arg), daemon=True)
        self._thread.start()

    def _run(self, fn: Callable[[A], T], arg: A) -> None:
        try:
            self._value.append(fn(arg))
        except BaseException as exc:
            self._error = exc

    def running(self) -> bool:
        return self._thread.is_alive()

    def wait(self, seconds: float) -> bool:
        """Wait up to `seconds` for fn to end; False when it still runs (its thread is left to the process's end)."""
        self._thread.join(seconds)
        return not self._thread.is_alive()

    def result(self) -> T:
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self._value[0]


def parallel_map(fn: Callable[[A], T], items: Iterable[A]) -> list[T]:
    """fn over items, all at once, results in order."""
    jobs = [Background(fn, item) for item in items]
    return [job.result() for job in jobs]
