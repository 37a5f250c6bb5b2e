"""A real libnvidia-ml.so.1 that answers NVML's start with one error code: compiled here with the system's C compiler
and put first on the loader's path, so that provision's ctypes start and nvidia-ml-py's own loading (CDLL of
libnvidia-ml.so.1, nvmlInitWithFlags, NVMLError(code)) run as they do on a machine whose driver answers so."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

CODE_VARIABLE = "STANDIN_NVML_INIT"  # the code every nvmlInit* returns (0: NVML_SUCCESS), or "crash": SIGSEGV
SOURCE = r"""
#include <signal.h>
#include <stdlib.h>
#include <string.h>
static int code(void) {
    const char *s = getenv("STANDIN_NVML_INIT");
    if (s && strcmp(s, "crash") == 0) raise(SIGSEGV);  /* a library that kills the process that starts it */
    return s ? atoi(s) : 0;
}
int nvmlInitWithFlags(unsigned int flags) { (void)flags; return code(); }
int nvmlInit_v2(void) { return code(); }
int nvmlInit(void) { return code(); }
int nvmlShutdown(void) { return 0; }
const char *nvmlErrorString(int result) { (void)result; return "stand-in NVML error"; }
"""
CC = shutil.which("cc") or shutil.which("gcc")


def build(folder: Path) -> Path:
    """Compile the stand-in into folder/lib/libnvidia-ml.so.1; return that folder (for LD_LIBRARY_PATH)."""
    source = folder / "standin_nvml.c"
    source.write_text(SOURCE)
    library = folder / "lib" / "libnvidia-ml.so.1"
    library.parent.mkdir(parents=True, exist_ok=True)
    assert CC, "no C compiler"
    subprocess.run([CC, "-shared", "-fPIC", "-o", library, source], check=True, timeout=120)
    return library.parent


def environment(lib: Path, code: int | str) -> dict[str, str | None]:
    """The variables of a process whose NVML start answers `code`, through the stand-in (no replay)."""
    return {"LD_LIBRARY_PATH": str(lib), CODE_VARIABLE: str(code), "PROVISION_NVML_REPLAY": None}
