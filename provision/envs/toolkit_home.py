"""A CUDA_HOME for a compiler that came as NVIDIA's wheels: the folder layout nvcc-driven builds expect
(bin, include, nvvm, lib64 with unversioned names, lib64/stubs/libcuda.so), made of links into site-packages.

Why: FlashInfer's JIT links with `-L$CUDA_HOME/lib64 -L$CUDA_HOME/lib64/stubs -lcudart -lcuda`; the cu13 wheels put
their libraries in nvidia/cu13/lib with versioned names only and ship no libcuda stub (it belongs to the driver), so a
CUDA_HOME pointed straight at them compiles but does not link (docs/evidence/jit-with-wheel-nvcc.md).
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

from provision import proc
from provision.errors import EnvError

LIBCUDA_SONAME = "libcuda.so.1"


def make(home: Path, wheel_root: Path) -> Path:
    """Lay out `home` (the environment's cuda/ folder) over `wheel_root` (site-packages/nvidia/cu13)."""
    if not (wheel_root / "bin" / "nvcc").exists():
        raise EnvError(
            f"{wheel_root}/bin/nvcc is missing: the profile's [toolkit] names no installed compiler",
            "add cuda-toolkit[nvcc,crt,cudart,cccl,nvvm] (or nvidia-cuda-nvcc) to its [packages]",
        )
    if home.exists():
        shutil.rmtree(home)
    home.mkdir(parents=True)
    for name in ("bin", "include", "nvvm"):
        if (wheel_root / name).exists():
            os.symlink(wheel_root / name, home / name)
    lib64 = home / "lib64"
    (lib64 / "stubs").mkdir(parents=True)
    for library in sorted((wheel_root / "lib").iterdir()):
        os.symlink(library, lib64 / library.name)
        unversioned = re.sub(r"\.so(\.\d+)+$", ".so", library.name)
        if unversioned != library.name and not (lib64 / unversioned).exists():
            os.symlink(library, lib64 / unversioned)
    _libcuda_stub(lib64 / "stubs" / "libcuda.so")
    return home


def _libcuda_stub(path: Path) -> None:
    """An empty shared object named like the driver's libcuda: enough to link a shared object, never loaded
    (at run time the dynamic linker finds the driver's own libcuda.so.1)."""
    source = path.with_suffix(".c")
    source.write_text("/* link-time stand-in for the NVIDIA driver's libcuda.so.1 */\n")
    compiler = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        raise EnvError(
            "no C compiler to build the libcuda link stub", "install gcc (nvcc needs a host compiler anyway)"
        )
    proc.run(
        [compiler, "-shared", "-o", path, source, f"-Wl,-soname,{LIBCUDA_SONAME}"], timeout=120, check=True
    )
    source.unlink()
