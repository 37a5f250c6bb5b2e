"""Environments: where they live, how they are built, switched and rolled back."""
