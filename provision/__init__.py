"""provision: take a GPU machine from one CUDA stack to the next without breaking the one that works."""

__version__ = "0.1.0"
