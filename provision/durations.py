"""Seconds given in an environment variable (PROVISION_HTTP_TIMEOUT, PROVISION_NVML_START_TIMEOUT,
PROVISION_CHECK_TIMEOUT): one rule for all, read where each is used."""

from __future__ import annotations

import math
import os

from provision.errors import InputError

# a week: past it a socket's or a thread's wait overflows (1e308 was an internal error)
LONGEST = 7 * 24 * 3600.0


def seconds(variable: str, default: float, example: str) -> float:
    """The positive number of seconds in `variable` (`default` when unset or empty), at most LONGEST; an InputError
    (exit 2) naming it and its value for anything else."""
    text = os.environ.get(variable) or str(default)
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value <= 0 or value > LONGEST:
        raise InputError(
            f"{variable}={text!r} is not a number of seconds",
            f"set it to a positive number such as {example} (at most {LONGEST:g}, a week), or unset it",
        )
    return value


CHECK_TIMEOUT = "PROVISION_CHECK_TIMEOUT"  # caps every check's timeout (seconds)


def check_timeout() -> float | None:
    """PROVISION_CHECK_TIMEOUT's seconds, None when unset; an InputError (exit 2) when it is no positive number (create
    asks before it makes anything: the checks read it only after the install)."""
    return seconds(CHECK_TIMEOUT, 1.0, "600") if os.environ.get(CHECK_TIMEOUT) else None
