"""A fake `torch` for injecting failures that cannot be caused for real on a machine without a GPU.

Each behaviour is chosen by an environment variable, so one installed fake serves every test. The real paths behind
these failures are exercised on the GPU machine (docs/evidence/).
"""

import ctypes
import os
import time
import types

if os.environ.get("FAKE_TORCH_HANG"):
    time.sleep(3600)
if os.environ.get("FAKE_TORCH_CRASH"):
    os.abort()
# a line printed after the payload's verdict: what the runner reads as its answer
if os.environ.get("FAKE_TORCH_ANSWER"):
    import atexit

    atexit.register(lambda: print(os.environ["FAKE_TORCH_ANSWER"], flush=True))

__version__ = os.environ.get("FAKE_TORCH_VERSION", "2.16.0.dev20261126+cu130")
_cuda = os.environ.get("FAKE_TORCH_CUDA", "13.0")
version = types.SimpleNamespace(cuda=None if _cuda == "none" else _cuda)
float32 = bfloat16 = float16 = "dtype"
_loaded = []


def _load_libraries():
    for path in filter(None, os.environ.get("FAKE_TORCH_LOAD", "").split(":")):
        if path not in _loaded:
            ctypes.CDLL(path)
            _loaded.append(path)


class Tensor:
    def __getattr__(self, name):
        return lambda *a, **k: self

    def __matmul__(self, other):
        return self

    def item(self):
        return 0.0

    def __sub__(self, other):
        return self

    def __truediv__(self, other):
        return self

    def __float__(self):
        return 0.0


def isfinite(tensor):
    return tensor


def randn(*shape, device=None, **kwargs):
    if device and "cuda" in str(device):
        _load_libraries()
    return Tensor()


def device(*args):
    return args


class Generator:
    def __init__(self, device=None):
        pass

    def manual_seed(self, seed):
        return self


class _Cuda:
    def is_available(self):
        return os.environ.get("FAKE_TORCH_AVAILABLE", "1") == "1"

    def device_count(self):
        return int(os.environ.get("FAKE_TORCH_COUNT", "1"))

    def get_arch_list(self):
        return os.environ.get("FAKE_TORCH_ARCH", "sm_90 sm_120").split()

    def get_device_capability(self, index=0):
        major, minor = os.environ.get("FAKE_TORCH_CAP", "12.0").split(".")
        return int(major), int(minor)

    def get_device_name(self, index=0):
        return "Fake GPU"

    def synchronize(self, index=None):
        pass

    def set_device(self, index):
        pass


cuda = _Cuda()
backends = types.SimpleNamespace(cuda=types.SimpleNamespace(matmul=types.SimpleNamespace(allow_tf32=True)))
from . import nn  # noqa: E402,F401  (real torch imports it too)
