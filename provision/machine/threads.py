"""Run a few blocking reads side by side on plain threads: concurrent.futures would import logging and more, which
the probe's whole-process time cannot afford."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from typing import Any, Generic, TypeVar

T = TypeVar("T")


class Background(Generic[T]):
    """fn(*args) started on a daemon thread; `result()` waits for it and returns its value or raises its error."""

    def __init__(self, fn: Callable[..., T], *args: Any) -> None:
        self._value: T | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(fn, args), daemon=True)
        self._thread.start()

    def _run(self, fn: Callable[..., T], args: tuple[Any, ...]) -> None:
        try:
            self._value = fn(*args)
        except BaseException as exc:
            self._error = exc

    def result(self) -> T:
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self._value  # type: ignore[return-value]


def parallel_map(fn: Callable[[Any], T], items: Iterable[Any]) -> list[T]:
    """fn over items, all at once, results in order."""
    jobs = [Background(fn, item) for item in items]
    return [job.result() for job in jobs]
