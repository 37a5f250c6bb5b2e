"""provision: take a GPU machine from one CUDA stack to the next without breaking the one that works."""

__version__ = "0.1.0"
DISTRIBUTION = "cuda-provision"  # the name on package indexes (`provision` there is an unrelated project)
