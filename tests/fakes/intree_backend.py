"""A PEP 517 build backend in the source tree itself (stdlib only), so that tests build path and git sources with
the real uv and no registry: wheel and editable wheel of the one package named in NAME beside it."""

from __future__ import annotations

import base64
import hashlib
import os
import zipfile
from pathlib import Path

ROOT = Path(__file__).parent


def _meta() -> tuple[str, str]:
    name, version = (ROOT / "NAME").read_text().split()
    return name, version


def _write(directory: str, files: dict[str, bytes]) -> str:
    name, version = _meta()
    info = f"{name}-{version}.dist-info"
    files = {
        **files,
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n".encode(),
        f"{info}/WHEEL": b"Wheel-Version: 1.0\nGenerator: intree\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = [
        f"{p},sha256={base64.urlsafe_b64encode(hashlib.sha256(d).digest()).rstrip(b'=').decode()},{len(d)}"
        for p, d in files.items()
    ]
    files[f"{info}/RECORD"] = ("\n".join([*record, f"{info}/RECORD,,"]) + "\n").encode()
    filename = f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(os.path.join(directory, filename), "w") as archive:
        for path, data in files.items():
            archive.writestr(path, data)
    return filename


def build_wheel(
    wheel_directory: str, config_settings: object = None, metadata_directory: object = None
) -> str:
    name, _ = _meta()
    return _write(wheel_directory, {f"{name}/{p.name}": p.read_bytes() for p in (ROOT / name).glob("*.py")})


def build_editable(
    wheel_directory: str, config_settings: object = None, metadata_directory: object = None
) -> str:
    name, _ = _meta()
    return _write(wheel_directory, {f"_editable_{name}.pth": f"{ROOT}\n".encode()})


def build_sdist(sdist_directory: str, config_settings: object = None) -> str:
    raise NotImplementedError("wheels only")
