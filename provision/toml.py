"""Reading TOML: the standard library's tomllib from Python 3.11, tomli (the same module, a dependency there) on 3.10.
Writing goes through tomlkit, which keeps comments and layout."""

from __future__ import annotations

import sys

if sys.version_info >= (3, 11):
    from tomllib import TOMLDecodeError, loads
else:  # pragma: no cover
    from tomli import TOMLDecodeError, loads

__all__ = ["TOMLDecodeError", "loads"]
