"""The command line: the group and its error handling in main.py, shared options in options.py, one module per
family of commands (machine, stacks, envs, checks)."""

import sys


def main() -> None:
    """The `provision` script (and `python -m provision`): a lock made again has its uv started before anything else
    is imported (stacks/ahead), then the command line runs (main.py)."""
    # another command imports nothing of it, one that names a `lock` too (an environment, a word given to `run`)
    if _command(sys.argv[1:]) == "lock":
        from provision.stacks import ahead

        ahead.start(sys.argv[1:])
    from provision.cli.main import main as command_line

    command_line()


def _command(argv: list[str]) -> str | None:
    """The command's name: the first word that is none of the group's options (-v, -q, --home PATH; --help and
    --version end there)."""
    words = iter(argv)
    for word in words:
        if word == "--home":
            next(words, None)
        elif not word.startswith("-"):
            return word
    return None
