"""Commands beyond `probe`, registered on the click group (kept apart so cli.py stays short)."""
