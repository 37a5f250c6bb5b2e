"""A RECORD is bounded wherever it is read (issue 39, item 4): a wheel whose RECORD member inflates far past the
RECORD bound is read no further than it, as a METADATA is (report --lock, adopt); and a large RECORD in a venv (60 MB of
rows, under the bound) is checked by drift in bounded time and memory. Peak memory measured from outside."""

from __future__ import annotations

import base64
import hashlib
import json
import time
import zipfile
from pathlib import Path

import pytest
import tiny
from launch import environment
from test_bounded_memory import PEAK, peak

pytestmark = pytest.mark.timeout(300)


def test_drift_of_a_60_mb_record_is_bounded_in_time_and_memory(
    index_server, provision_bin: str, tmp_path: Path
) -> None:
    tool = tiny.tool_with_env(tmp_path, provision_bin, tiny.index(index_server))
    site = next((tool.home / "envs" / "tiny" / "venv").resolve().glob("lib/python3*/site-packages"))
    record = site / "alpha-1.0.dist-info" / "RECORD"
    digest = base64.urlsafe_b64encode(hashlib.sha256(b"x").digest()).rstrip(b"=").decode()
    row = f"alpha/gone/{{:07d}}/module_with_a_long_name.py,sha256={digest},1\n"
    with open(record, "a") as handle:
        n = 0
        while handle.tell() < 60 << 20:
            handle.write("".join(row.format(n + i) for i in range(10_000)))
            n += 10_000
    started = time.monotonic()
    code, rss, out, err = peak(
        tool.binary, "check", "tiny", "--only", "drift", "--json", env=environment(tool.env())
    )
    seconds = time.monotonic() - started
    assert code in (0, 1) and "Traceback" not in err, err
    print(f"drift of a 60 MB RECORD: {seconds:.1f} s, {rss >> 20} MiB")
    assert rss < 2 * PEAK, f"{rss >> 20} MiB"
    assert seconds < 30, seconds
    result = json.loads(out)["checks"][0]
    assert result["status"] == "warn"
    (finding,) = result["details"]["findings"]
    assert finding["path"] == "alpha-1.0.dist-info/RECORD" and "more than 100,000 rows" in finding["found"], (
        finding
    )


def test_drift_lists_the_first_thousand_of_many_findings(
    index_server, provision_bin: str, tmp_path: Path
) -> None:
    """Under the row bound, 90,000 files that are not there: all counted, the first 1,000 listed (env.json and the
    JSON on stdout stay small)."""
    tool = tiny.tool_with_env(tmp_path, provision_bin, tiny.index(index_server))
    site = next((tool.home / "envs" / "tiny" / "venv").resolve().glob("lib/python3*/site-packages"))
    digest = base64.urlsafe_b64encode(hashlib.sha256(b"x").digest()).rstrip(b"=").decode()
    with open(site / "alpha-1.0.dist-info" / "RECORD", "a") as handle:
        handle.write("".join(f"alpha/gone/{n}/m.py,sha256={digest},1\n" for n in range(90_000)))
    code, rss, out, err = peak(
        tool.binary, "check", "tiny", "--only", "drift", "--json", env=environment(tool.env())
    )
    assert code == 0 and "Traceback" not in err, err
    assert rss < PEAK, f"{rss >> 20} MiB"
    details = json.loads(out)["checks"][0]["details"]
    assert (
        details["counts"]["missing"] == 90_000
        and len(details["findings"]) == 1000
        and details["findings_left_out"] == 89_000
    )
    assert ((tool.home / "envs" / "tiny").resolve() / "env.json").stat().st_size < 4 << 20


def test_a_wheels_record_that_inflates_past_the_bound_is_never_held_whole(
    index_server, provision_bin: str, tmp_path: Path
) -> None:
    """A wheel of a few MiB whose RECORD inflates to 600 MiB: `report --lock` reads it no further than 64 MiB (it took
    5.8 GB resident for a 1.2 GB one), and the wheel's conflict reading says it was not read."""
    from test_lockscan import H200, write_lock

    default = index_server.index("default")
    folder = default.root / "bomb"
    folder.mkdir(parents=True)
    wheel = folder / "bomb-1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as archive:
        archive.writestr("bomb/__init__.py", b"")
        archive.writestr("bomb-1.0.dist-info/METADATA", b"Metadata-Version: 2.1\nName: bomb\nVersion: 1.0\n")
        archive.writestr(
            "bomb-1.0.dist-info/WHEEL", b"Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
        )
        with archive.open("bomb-1.0.dist-info/RECORD", "w", force_zip64=True) as record:
            record.write(b"bomb/__init__.py,sha256=47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU,0\n")
            block = b"\n" * (8 << 20)
            for _ in range(75):
                record.write(block)
    assert wheel.stat().st_size < 8 << 20
    lock = write_lock(tmp_path / "pylock.toml", default, [wheel])
    cache = tmp_path / "empty-cache"
    env = environment({"UV_CACHE_DIR": str(cache), "XDG_CACHE_HOME": f"{cache}-xdg"})
    code, rss, out, err = peak(
        provision_bin, "report", "--lock", str(lock), "--machine", str(H200), "--json", env=env
    )
    print(f"report --lock of a wheel whose RECORD inflates to 600 MiB: {rss >> 20} MiB")
    assert code in (0, 1) and "Traceback" not in err, err
    assert rss < PEAK, f"{rss >> 20} MiB"


def test_a_record_of_rows_ended_by_carriage_returns_is_counted_too(
    index_server, provision_bin: str, tmp_path: Path
) -> None:
    """csv ends a row at \\r as at \\n: 150,000 rows ended by \\r alone are past the bound all the same."""
    tool = tiny.tool_with_env(tmp_path, provision_bin, tiny.index(index_server))
    site = next((tool.home / "envs" / "tiny" / "venv").resolve().glob("lib/python3*/site-packages"))
    digest = base64.urlsafe_b64encode(hashlib.sha256(b"x").digest()).rstrip(b"=").decode()
    with open(site / "alpha-1.0.dist-info" / "RECORD", "a", newline="") as handle:
        handle.write("".join(f"alpha/gone/{n}/m.py,sha256={digest},1\r" for n in range(150_000)))
    done = tool("check", "tiny", "--only", "drift", "--json", check=False)
    (finding,) = json.loads(done.stdout)["checks"][0]["details"]["findings"]
    assert "more than 100,000 rows" in finding["found"], finding
