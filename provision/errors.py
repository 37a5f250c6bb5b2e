"""The one exception root. Core code raises; only `cli` prints and exits."""

from __future__ import annotations


class ProvisionError(Exception):
    """A failure the user can act on: one line of what went wrong, one line of what to do."""

    code = "error"
    exit_code = 3

    def __init__(self, message: str, hint: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint


class UsageError(ProvisionError):
    """The command line itself is wrong: an option's value, a name, options that do not go together."""

    code = "usage"
    exit_code = 2


class InputError(ProvisionError):
    """What the command line named turned out wrong when read: a file that is not what it should be (a lock, a probe
    document, a recording, a wheel), a path that is missing or cannot be written, an environment variable's value."""

    code = "input"
    exit_code = 2


class ProfileError(ProvisionError):
    code = "profile"
    exit_code = 4


class IndexUnreachable(ProvisionError):
    """An index could not be read (down, slow, 404, no file for this platform)."""

    code = "index"
    exit_code = 5


class ResolveError(ProvisionError):
    code = "resolve"
    exit_code = 6


class EnvError(ProvisionError):
    code = "env"
    exit_code = 7


class ToolError(ProvisionError):
    """An external tool (uv, nvcc) failed or is missing."""

    code = "tool"
    exit_code = 8


class CommandNotFound(ProvisionError):
    """`run NAME -- CMD`: CMD is nowhere on the environment's PATH (a shell says 127)."""

    code = "command-not-found"
    exit_code = 127


class CommandNotExecutable(ProvisionError):
    """`run NAME -- CMD`: CMD exists but cannot be executed (a shell says 126)."""

    code = "command-not-executable"
    exit_code = 126


class Interrupted(ProvisionError):
    code = "interrupted"
    exit_code = 130
