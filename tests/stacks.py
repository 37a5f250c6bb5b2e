"""Package indexes shaped like the real cu128 and cu130 ones, served on 127.0.0.1, with the decoys that a correct
lock must refuse: a higher plain-version torch and sgl-kernel on the default index, a public pytorch-triton."""

from __future__ import annotations

import sys

from wheelhouse import Index, IndexServer

# Wheels are tagged for the Python running the tests, so that a lock made for it can really be installed.
PYTHON = f"{sys.version_info.major}.{sys.version_info.minor}"
CP = f"cp{sys.version_info.major}{sys.version_info.minor}"
CP312 = f"{CP}-{CP}-manylinux_2_28_x86_64"
ABI3 = "cp310-abi3-manylinux2014_x86_64"
PY3 = "py3-none-any"
PLATFORM = "x86_64-manylinux_2_28"
TORCH_DATES = ("20261124", "20261125", "20261126")


def cu130(server: IndexServer) -> dict[str, Index]:
    """The four indexes of the cu130 profile; returns them by the profile's index names."""
    pytorch = server.index("pytorch", hashes=False)  # like download.pytorch.org nightlies: no #sha256
    sglang = server.index("sglang")
    flashinfer = server.index("flashinfer")
    default = server.index("default")
    for date in TORCH_DATES:
        pytorch.add(
            "torch",
            f"2.16.0.dev{date}+cu130",
            tag=CP312,
            requires=("pytorch-triton==3.6.0+git1234", "filelock"),
        )
    pytorch.add("pytorch-triton", "3.6.0+git1234", tag=CP312)
    pytorch.add("filelock", "3.20.0", tag=PY3)
    sglang.add("sgl-kernel", "0.3.21+cu130", tag=ABI3)
    flashinfer.add("flashinfer-jit-cache", "0.6.17+cu130", tag=ABI3)
    default.add("flashinfer-python", "0.6.17", tag=PY3, requires=("ninja",))
    default.add("flashinfer-cubin", "0.6.17", tag=PY3)
    default.add("ninja", "1.13.0", tag=PY3)
    extras = ("nvcc", "crt", "cudart", "cccl", "nvvm")
    default.add(
        "cuda-toolkit",
        "13.0.2",
        tag=PY3,
        extras=extras,
        requires=tuple(f"nvidia-cuda-{e}==13.0.88; extra == '{e}'" for e in ("nvcc", "crt")),
    )
    default.add(
        "nvidia-cuda-nvcc",
        "13.0.88",
        tag="py3-none-manylinux_2_28_x86_64",
        files={
            "nvidia/cu13/bin/nvcc": b"#!/bin/sh\necho 'Cuda compilation tools, release 13.0, V13.0.88'\n",
            "nvidia/cu13/include/cuda.h": b"",
            "nvidia/cu13/lib/libcudart.so.13": b"",
        },
    )
    default.add("nvidia-cuda-crt", "13.0.88", tag=PY3)
    # decoys: higher versions on the default index that bound packages must never take
    default.add("torch", "9.0.0", tag=PY3)
    default.add("sgl-kernel", "9.9.9", tag=PY3)
    default.add("pytorch-triton", "9.9.9", tag=PY3)
    default.add("filelock", "9.0.0", tag=PY3)
    return {"pytorch": pytorch, "sglang": sglang, "flashinfer": flashinfer, "default": default}


def cu128(server: IndexServer) -> dict[str, Index]:
    """The cu128 profile's indexes (served under cu128-* names beside the cu130 ones)."""
    pytorch = server.index("cu128-pytorch")
    sglang = server.index("cu128-sglang")
    flashinfer = server.index("cu128-flashinfer")
    default = server.index("cu128-default")
    pytorch.add("torch", "2.9.1+cu128", tag=CP312, requires=("filelock",))
    pytorch.add("filelock", "3.20.0", tag=PY3)
    sglang.add("sgl-kernel", "0.3.21", tag=ABI3)
    flashinfer.add("flashinfer-jit-cache", "0.6.9+cu128", tag=ABI3)
    default.add("flashinfer-python", "0.6.9", tag=PY3)
    default.add("flashinfer-cubin", "0.6.9", tag=PY3)
    return {"pytorch": pytorch, "sglang": sglang, "flashinfer": flashinfer, "default": default}


def index_args(indexes: dict[str, Index]) -> list[str]:
    args = []
    for name, index in indexes.items():
        args += ["--index", f"{name}={index.url}"]
    return args
