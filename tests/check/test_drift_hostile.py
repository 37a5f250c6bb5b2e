"""Hostile site-packages for the drift check (and so for restore's plan): RECORD paths out of the venv, links out of
it, RECORDs that are not CSV or not UTF-8. Nothing outside the venv is read; every case is a finding, not a traceback."""

from __future__ import annotations

import base64
import hashlib
import subprocess
import sys
from pathlib import Path

from provision.envs import drift


def _digest(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def _dist(site: Path, name: str, record: bytes, files: dict[str, bytes] | None = None) -> None:
    info = site / f"{name}-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
    (info / "RECORD").write_bytes(record)
    for relative, data in (files or {}).items():
        (site / relative).parent.mkdir(parents=True, exist_ok=True)
        (site / relative).write_bytes(data)


def test_paths_and_links_out_of_the_venv_are_never_read_and_bad_records_are_findings(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = drift.site_packages(venv)
    secret = tmp_path / "outside" / "secret.txt"
    secret.parent.mkdir()
    secret.write_bytes(b"secret\n")
    up = "../" * (len(site.relative_to(tmp_path).parts) + 1)
    rows = [
        f"evil/__init__.py,{_digest(b'x')},1",
        f"{secret},{_digest(b'other!')},7",
        f"{up}outside/secret.txt,{_digest(b'other!')},7",
        f"evil/link.py,{_digest(b'secret' + bytes([10]))},7",
        "evil-1.0.dist-info/RECORD,,",
    ]
    _dist(site, "evil", "\n".join(rows).encode() + b"\n", {"evil/__init__.py": b"x"})
    (site / "evil" / "link.py").symlink_to(secret)
    _dist(site, "huge", b"a" * 300_000 + b",,\n")  # one field past csv's limit
    _dist(site, "latin", b"\xff\xfe caf\xe9.py,,\n")  # not UTF-8

    result = drift.scan(venv)

    # evil/__init__.py read; the link and both paths out: not read
    assert result.files == 2 and result.hashed == 1
    found = {(f.kind, f.distribution, f.path): f.found for f in result.findings}
    # out of the venv: not the check's business
    assert all("secret" not in path for _, _, path in found), found
    assert "link out of the environment" in found["modified", "evil", "evil/link.py"]
    assert "unreadable (Error)" in found["modified", "huge", "huge-1.0.dist-info/RECORD"]
    assert "unreadable (UnicodeDecodeError)" in found["modified", "latin", "latin-1.0.dist-info/RECORD"]


def test_a_link_into_the_venv_is_still_checked(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = drift.site_packages(venv)
    _dist(site, "ok", f"ok/a.py,{_digest(b'a')},1\nok/b.py,{_digest(b'a')},1\n".encode(), {"ok/a.py": b"a"})
    (site / "ok" / "b.py").symlink_to(site / "ok" / "a.py")
    assert drift.scan(venv).findings == []


def test_a_metadata_folder_or_start_up_file_leading_out_is_a_finding_and_never_read(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = drift.site_packages(venv)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "meta").mkdir()
    (outside / "meta" / "METADATA").write_text("Metadata-Version: 2.1\nName: stolen\nVersion: 9.9\n")
    (outside / "meta" / "RECORD").write_text(f"stolen/x.py,{_digest(b'x')},1\n")
    (site / "stolen-9.9.dist-info").symlink_to(outside / "meta")
    _dist(site, "half", b"", {})
    (site / "half-1.0.dist-info" / "RECORD").unlink()
    (site / "half-1.0.dist-info" / "RECORD").symlink_to(outside / "meta" / "RECORD")
    (outside / "_virtualenv.pth").write_text("import _virtualenv\n")
    (site / "_virtualenv.pth").symlink_to(outside / "_virtualenv.pth")

    result = drift.scan(venv)

    found = {(f.kind, f.distribution, f.path): f.found for f in result.findings}
    assert result.distributions == 0 and result.files == 0, "no METADATA or RECORD was read from outside"
    assert f"leads out to {outside / 'meta'}: not read" in found["modified", "stolen", "stolen-9.9.dist-info"]
    assert (
        f"leads out to {outside / 'meta' / 'RECORD'}: not read"
        in found["modified", "half", "half-1.0.dist-info"]
    )
    assert ("unowned", None, "_virtualenv.pth") in found, (
        "a link out is not virtualenv's file, whatever it holds"
    )


def test_a_venv_named_by_a_relative_path_is_confined_as_well(tmp_path: Path, monkeypatch) -> None:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = drift.site_packages(venv)
    outside = tmp_path / "outside" / "ok"
    outside.mkdir(parents=True)
    (outside / "a.py").write_bytes(b"a")
    _dist(site, "ok", f"ok/a.py,{_digest(b'a')},1\n".encode())
    (site / "ok").symlink_to(outside)
    monkeypatch.chdir(tmp_path)

    result = drift.scan(Path("venv"))

    (finding,) = result.findings
    assert (
        finding.path == "ok/a.py" and f"leads out of the environment to {outside}: not read" in finding.found
    )
    assert result.hashed == 0
