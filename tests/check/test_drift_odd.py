"""Odd files in an environment that once made `check --only drift` and `restore` raise: METADATA or WHEEL not UTF-8,
direct_url.json a JSON list, a RECORD hash named shake_128 (a digest of no fixed length), env.json's `lock` naming a
file that is not TOML. Each is a finding or one error line, never a traceback."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import tiny

from provision.envs import drift

TOOL_WITH_ENV = True  # conftest's `tool`: a home with profile tiny served on 127.0.0.1, environment tiny made


def info_of(tool: tiny.Tool) -> Path:
    (build,) = (tool.home / "builds").iterdir()
    (info,) = drift.site_packages(build / "venv").glob("alpha-*.dist-info")
    return info


def _metadata_latin1(info: Path) -> None:
    (info / "METADATA").write_bytes((info / "METADATA").read_bytes() + b"Author: Jos\xe9\n")


def _wheel_latin1(info: Path) -> None:
    (info / "WHEEL").write_bytes((info / "WHEEL").read_bytes() + b"Generator: caf\xe9\n")


def _direct_url_list(info: Path) -> None:
    (info / "direct_url.json").write_text("[1, 2]")


def _shake(info: Path) -> None:
    with open(info / "RECORD", "a") as handle:
        handle.write("alpha/x.py,shake_128=abc,2\n")
    (info.parent / "alpha" / "x.py").write_text("x\n")


def _direct_url_no_url(info: Path) -> None:
    (info / "direct_url.json").write_text('{"url": 5}')


DAMAGE: dict[str, Callable[[Path], None]] = {
    "metadata-latin1": _metadata_latin1,
    "wheel-latin1": _wheel_latin1,
    "direct-url-list": _direct_url_list,
    "record-shake128": _shake,
    "direct-url-url-not-a-string": _direct_url_no_url,
}


def test_odd_files_in_a_dist_info_are_findings_not_tracebacks(tool: tiny.Tool) -> None:
    """Each damage in turn in one build: check finds it, restore puts it back, and check passes again before the next
    (a build per damage made five environments to damage one file in each)."""
    for damage, make in DAMAGE.items():
        make(info_of(tool))
        check = tool("check", "tiny", "--only", "drift", "--json", check=False)
        assert "Traceback" not in check.stderr and check.returncode in (0, 1), (damage, check.stderr)
        (result,) = json.loads(check.stdout)["checks"]
        assert result["status"] in ("pass", "warn", "fail"), (damage, result)
        for extra in (("--dry-run",), ()):
            done = tool("restore", "tiny", "--no-checks", *extra, check=False)
            assert "Traceback" not in done.stderr and done.returncode == 0, (damage, extra, done.stderr)
        after = json.loads(tool("check", "tiny", "--only", "drift", "--json").stdout)["checks"][0]
        assert after["status"] == "pass", (damage, after)


def test_env_json_lock_naming_a_file_that_is_not_toml_is_one_error(tool: tiny.Tool, tmp_path: Path) -> None:
    """Each content in turn in one build (restore refuses each and changes nothing it reads)."""
    (build,) = (tool.home / "builds").iterdir()
    record = json.loads((build / "env.json").read_text())
    (info_of(tool).parent / "alpha" / "__init__.py").write_text("patched = True\n")
    for number, content in enumerate([b"not = [toml", b"\xff\xfe binary", b""]):
        bad = tmp_path / f"not-a-lock-{number}.toml"
        bad.write_bytes(content)
        (build / "env.json").write_text(json.dumps({**record, "lock": str(bad)}))
        check = tool("check", "tiny", "--only", "drift", "--json", check=False)
        assert "Traceback" not in check.stderr, (content, check.stderr)
        for extra in (("--dry-run",), ()):
            done = tool("restore", "tiny", "--no-checks", *extra, check=False)
            assert "Traceback" not in done.stderr and done.returncode in (1, 2, 7), (content, done.stderr)
            assert str(bad) in done.stderr and done.stderr.count("error: ") == 1, (content, done.stderr)
        assert bad.read_bytes() == content
