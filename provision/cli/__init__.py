"""The command line: the group and its error handling in main.py, shared options in options.py, one module per
family of commands (machine, stacks, envs, checks)."""

import sys


def main() -> None:
    """The `provision` script (and `python -m provision`): a lock made again has its uv started before anything else
    is imported (stacks/ahead), then the command line runs (main.py)."""
    if "lock" in sys.argv[1:]:  # another command imports nothing of it
        from provision.stacks import ahead

        ahead.start(sys.argv[1:])
    from provision.cli.main import main as command_line

    command_line()
