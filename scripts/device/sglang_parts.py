"""Issue 20's parts that a GPU machine without a registry can prove (run by scripts/device/sglang.sh from the repo root):

python3 scripts/device/sglang_parts.py imports OUT_JSON   the imports check (the real runner and payload) in a venv
    holding `needsdriver` (its import opens libcuda.so.1 with ctypes, as sgl_kernel's extension does), `flashinfer`
    (imports) and `broken` (fails for another reason); the JSON is the check's result.
python3 scripts/device/sglang_parts.py lock FOLDER        a real index on 127.0.0.1 (tests/wheelhouse.py) holding a
    torch 2.14.1+cu130 wheel with sm_90 and sm_120 cubins, cuda-python 12.6.2.post1 and cuda-bindings 13.5.0 that
    install the same file; a profile of them locked by `provision lock` with the real uv; the profile then deleted,
    so that `report --lock` judges the lock from the lock alone. Prints the index URL.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path("tests").resolve()))

from wheelhouse import IndexServer, build_wheel

TAG = "py3-none-manylinux_2_28_x86_64"


def cubin(sm: int) -> bytes:
    """A bare cubin as nvcc writes its ELF header (as tests/report/test_lockscan.py builds it; that module needs pytest)."""
    import struct

    ident = b"\x7fELF" + bytes([2, 1, 1, 0x33, 8]) + bytes(7)
    return ident + struct.pack("<HHIQQQIHHHHHH", 2, 190, 1, 0, 0, 0, sm << 8, 64, 56, 0, 64, 0, 0)


def imports(out: Path) -> None:
    from provision.checks import runner
    from provision.envs.records import EnvRecord

    base = Path("/tmp/sglang-imports")
    subprocess.run(["rm", "-rf", str(base)], check=True)
    wheels = base / "wheels"
    build_wheel(
        wheels,
        "needsdriver",
        "1.0",
        files={"needsdriver/__init__.py": b"import ctypes\nctypes.CDLL('libcuda.so.1')\n"},
    )
    build_wheel(wheels, "flashinfer-python", "0.7.2", files={"flashinfer/__init__.py": b""})
    build_wheel(wheels, "broken", "1.0", files={"broken/__init__.py": b"import no_such_module_anywhere\n"})
    subprocess.run([sys.executable, "-m", "venv", str(base / "venv")], check=True)
    subprocess.run(
        [
            str(base / "venv/bin/python"),
            "-m",
            "pip",
            "install",
            "-q",
            "--no-index",
            "--find-links",
            str(wheels),
            "needsdriver",
            "flashinfer-python",
            "broken",
        ],
        check=True,
    )
    record = EnvRecord(
        name="imports",
        cuda="13.0",
        env={},
        packages=["needsdriver", "flashinfer-python", "broken"],
        venv=str(base / "venv"),
    )
    (result,) = runner.run(base, record, only=("imports",), gpus=[], driver_cuda=None, notes=[])
    out.write_text(json.dumps(result, indent=1))
    print(
        json.dumps(
            {"status": result["status"], "modules": result.get("details", {}).get("modules")}, indent=1
        )
    )


def lock(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    server = IndexServer(folder / "indexes")
    default = server.index("default")
    default.add(
        "torch",
        "2.14.1+cu130",
        tag=TAG,
        files={"torch/lib/a.cubin": cubin(90), "torch/lib/b.cubin": cubin(120), "torch/__init__.py": b""},
    )
    default.add(
        "stack", "1.0", tag="py3-none-any", requires=("cuda-python==12.6.2.post1", "cuda-bindings==13.5.0")
    )
    default.add(
        "cuda-python", "12.6.2.post1", tag="py3-none-any", files={"cuda/bindings/driver.py": b"# 12.6\n"}
    )
    default.add("cuda-bindings", "13.5.0", tag=TAG, files={"cuda/bindings/driver.py": b"# 13.5\n"})
    profile = folder / "made" / "device.toml"
    profile.parent.mkdir(exist_ok=True)
    profile.write_text(
        f'schema = 1\nname = "device"\ncuda = "13.0"\n[indexes]\ndefault = "{default.url}"\n'
        '[packages]\ntorch = "==2.14.1"\nstack = "==1.0"\n'
    )
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "provision",
            "lock",
            str(profile),
            "--python",
            "3.12",
            "-o",
            str(folder / "pylock.device.toml"),
            "--json",
        ],
        capture_output=True,
        text=True,
    )
    (folder / "lock.json").write_text(done.stdout)
    (folder / "lock.err").write_text(done.stderr)
    profile.unlink()
    print(default.url, flush=True)
    time.sleep(float(sys.argv[3]) if len(sys.argv) > 3 else 120)  # keep serving while report --lock fetches
    server.close()


if __name__ == "__main__":
    {"imports": imports, "lock": lock}[sys.argv[1]](Path(sys.argv[2]))
