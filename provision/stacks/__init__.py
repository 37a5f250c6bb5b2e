"""Stacks: profiles, package indexes, uv, and PEP 751 locks."""
