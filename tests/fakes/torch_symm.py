import os


def empty(*args, **kwargs):
    behaviour = os.environ.get("FAKE_SYMM", "keyerror")
    if behaviour == "keyerror":
        raise KeyError(12)
    raise RuntimeError("CUDA driver error: invalid device ordinal")


def rendezvous(*args, **kwargs):
    raise AssertionError("not reached")
