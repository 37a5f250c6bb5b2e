"""A real libnvidia-ml.so.1 that answers NVML's start with one error code: compiled here with the system's C compiler
and put first on the loader's path, so that provision's ctypes start and nvidia-ml-py's own loading (CDLL of
libnvidia-ml.so.1, nvmlInitWithFlags, NVMLError(code)) run as they do on a machine whose driver answers so."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

# the code every nvmlInit* returns (0: NVML_SUCCESS), or "crash": SIGSEGV, "hang": never returns, "exit:N": exit(N),
# "signal:N": raise(N)
CODE_VARIABLE = "STANDIN_NVML_INIT"
LATER_VARIABLE = "STANDIN_NVML_LATER"  # "crash": NVML starts, then nvmlSystemGetDriverVersion raises SIGSEGV
SOURCE = r"""
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
static int code(void) {
    const char *s = getenv("STANDIN_NVML_INIT");
    if (s && strcmp(s, "crash") == 0) raise(SIGSEGV);  /* a library that kills the process that starts it */
    if (s && strcmp(s, "hang") == 0) for (;;) pause();  /* a driver that never answers */
    if (s && strncmp(s, "exit:", 5) == 0) exit(atoi(s + 5));  /* a library that ends the process */
    if (s && strncmp(s, "signal:", 7) == 0) raise(atoi(s + 7));
    return s ? atoi(s) : 0;
}
int nvmlInitWithFlags(unsigned int flags) { (void)flags; return code(); }
int nvmlInit_v2(void) { return code(); }
int nvmlInit(void) { return code(); }
int nvmlShutdown(void) { return 0; }
const char *nvmlErrorString(int result) { (void)result; return "stand-in NVML error"; }
int nvmlSystemGetDriverVersion(char *version, unsigned int length) {
    const char *s = getenv("STANDIN_NVML_LATER");
    (void)version; (void)length;
    if (s && strcmp(s, "crash") == 0) raise(SIGSEGV);  /* starts cleanly, dies in its first reading */
    return 13;  /* NVML_ERROR_FUNCTION_NOT_FOUND: what pynvml said when this stand-in had no such function */
}
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
