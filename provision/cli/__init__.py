"""The command line: the click group and one module per family of commands."""
