"""The command line: the group and its error handling in main.py, shared options in options.py, one module per
family of commands (machine, stacks, envs, checks)."""
