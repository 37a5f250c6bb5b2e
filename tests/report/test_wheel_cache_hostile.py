"""provision's wheel cache against its own attacks (issue 39, item 7): `wheels/<sha256>/checked` as a link is never
written through (a canary outside the cache keeps its content), `wheels/<sha256>` as a link is removed, never followed,
and a kept wheel edited in place with its size and mtime put back is hashed again before use (its ctime, which no
edit can put back, is in the stamp), so the genuine wheel is fetched again."""

from __future__ import annotations

import os
from pathlib import Path

from test_lockscan import H200, lock_target, report, serve, write_lock


def _packages(done) -> dict[str, dict]:
    return {p["name"]: p for p in lock_target(done)["packages"]}


def _forget_what_was_read(cache: Path) -> None:
    """scans/ and records/ answer by the sha256 without reading the wheel: gone, the kept wheel itself is read."""
    import shutil

    for kind in ("scans", "records", "metadata"):
        shutil.rmtree(Path(f"{cache}-xdg") / "provision" / kind, ignore_errors=True)


def test_a_link_in_the_wheel_cache_is_never_written_through_and_an_edit_in_place_is_seen(
    index_server, provision_bin: str, tmp_path: Path
) -> None:
    default, wheels = serve(index_server)
    lock = write_lock(tmp_path / "pylock.toml", default, wheels)
    cache = tmp_path / "uv-cache"
    assert _packages(report(provision_bin, lock, H200, cache))["torch"]["origin"] == "fetched"
    kept_root = Path(f"{cache}-xdg") / "provision" / "wheels"
    torch_folder = next(p.parent for p in kept_root.glob("*/torch-*.whl"))
    (kept,) = torch_folder.glob("torch-*.whl")
    canary = tmp_path / "canary.txt"
    canary.write_text('{"keep": "me"}\n')  # JSON: read as a stamp, it differs from the wheel's

    # the stamp no longer matches (a touch changes the ctime) with `checked` a link: replaced, not written through
    (torch_folder / "checked").unlink()
    (torch_folder / "checked").symlink_to(canary)
    os.utime(kept)
    _forget_what_was_read(cache)
    assert _packages(report(provision_bin, lock, H200, cache))["torch"]["origin"] == "provision cache"
    assert canary.read_text() == '{"keep": "me"}\n' and not (torch_folder / "checked").is_symlink()

    # an edit in place of the same size, its mtime put back: hashed again, found changed, fetched anew
    before = kept.stat()
    data = bytearray(kept.read_bytes())
    data[len(data) // 2] ^= 0xFF
    with open(kept, "r+b") as handle:
        handle.write(data)
    os.utime(kept, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert kept.stat().st_size == before.st_size and kept.stat().st_mtime_ns == before.st_mtime_ns
    _forget_what_was_read(cache)
    packages = _packages(report(provision_bin, lock, H200, cache))
    assert packages["torch"]["origin"] == "fetched", packages["torch"]
    assert packages["torch"]["cubin"] == {"sm_90": 1, "sm_120": 1}

    # the wheel's folder a link to a folder outside: the link goes, what it leads to stays as it was
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "precious").write_text("keep me\n")
    for name in os.listdir(torch_folder):
        os.unlink(torch_folder / name)
    torch_folder.rmdir()
    torch_folder.symlink_to(outside)
    _forget_what_was_read(cache)
    assert _packages(report(provision_bin, lock, H200, cache))["torch"]["origin"] == "fetched"
    assert sorted(os.listdir(outside)) == ["precious"] and (outside / "precious").read_text() == "keep me\n"
    assert torch_folder.is_dir() and not torch_folder.is_symlink()
