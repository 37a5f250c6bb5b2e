"""`provision run NAME -- CMD` with a CMD execve refuses otherwise than "not found" or "no permission": a script with
no #! line (shells run it with /bin/sh), a binary for another machine, an empty name, a name past NAME_MAX, a link
loop, a path through a file. Each was `error: Exec format error: ...` or an `internal error: ValueError` with exit 3;
now the script runs as a shell runs it, and the rest exit 126 or 127 as shells give, in one error and one hint."""

from __future__ import annotations

from pathlib import Path

import tiny

TOOL_WITH_ENV = True  # conftest's `tool`: a home with profile tiny served on 127.0.0.1, environment tiny made


def test_a_script_without_a_shebang_runs_as_a_shell_runs_it(tool: tiny.Tool, tmp_path: Path) -> None:
    script = tmp_path / "plain.sh"
    script.write_text('echo "ran with $# arguments: $1 $2"\nexit 4\n')
    script.chmod(0o755)
    done = tool("run", "tiny", "--", str(script), "a", "b c", check=False)
    assert done.returncode == 4 and done.stdout == "ran with 2 arguments: a b c\n", done.stderr


def test_commands_execve_refuses_exit_as_shells_give(tool: tiny.Tool, tmp_path: Path) -> None:
    binary = tmp_path / "foreign"
    binary.write_bytes(b"\x7fELF\x02\x01\x01\x00" + bytes(120))  # a first line with NUL bytes: no script
    binary.chmod(0o755)
    (tmp_path / "loop").symlink_to("loop")
    cases = {
        str(binary): 126,
        "": 127,
        "x" * 300: 127,
        str(tmp_path / ("x" * 300)): 126,
        str(tmp_path / "loop"): 126,
        f"{binary}/inside": 126,
    }
    for command, code in cases.items():
        done = tool("run", "tiny", "--", command, check=False)
        assert done.returncode == code and "Traceback" not in done.stderr, (
            command[:40],
            done.returncode,
            done.stderr,
        )
        error, hint = done.stderr.splitlines()
        assert error.startswith(f"error: {command}: ") and hint.startswith("hint: "), done.stderr
        assert "internal error" not in error
