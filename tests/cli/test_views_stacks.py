"""views/stacks.py: `profiles`, `profiles new` and `lock` shown from their typed results, with no uv and no index: the
rows and lines a person reads, the JSON document's keys, and the exit code (4 when a profiles folder holds a
*.toml that is no profile file)."""

from __future__ import annotations

from pathlib import Path

from provision.stacks.lock import HashSource, LockedPackage, LockResult, LockWarning, Target
from provision.stacks.newprofile import LeftOut, NewProfile, Pin
from provision.stacks.profiles import Found, Skipped, parse
from provision.stacks.relock import Changes, Pinned, Updated
from provision.views import stacks as views
from provision.views.render import Info, Line, Problem, Table

PROFILE = b'schema = 1\nname = "tiny"\ncuda = "13.0"\n[packages]\nalpha = "==1.0"\n'


def wheel(name: str, file: str, hash_source: HashSource = "index", url: str = "") -> LockedPackage:
    return LockedPackage(
        name=name,
        version="1.0",
        index="default",
        file=file,
        url=url or f"http://x/{file}",
        sha256="0" * 64,
        hash_source=hash_source,
    )


def test_profiles_lists_what_was_read_and_exits_4_for_what_was_passed_over(tmp_path: Path) -> None:
    tiny = parse(PROFILE, tmp_path / "tiny.toml")
    shown = views.profiles(Found(profiles=(tiny,)))
    assert shown.exit_code == 0 and not [b for b in shown.blocks if isinstance(b, Problem)]
    table = next(b for b in shown.blocks if isinstance(b, Table))
    assert table.rows == (("tiny", "13.0", "-", "", str(tmp_path / "tiny.toml")),)
    assert shown.document is not None and shown.document["skipped"] == []
    assert shown.document["profiles"][0]["packages"] == ["alpha==1.0"]

    pipe = Skipped(path=tmp_path / "pipe.toml", reason="not a regular file (a pipe)")
    skipped = views.profiles(Found(profiles=(tiny,), skipped=(pipe,)))
    assert skipped.exit_code == 4
    assert skipped.blocks[0] == Problem(
        f"{pipe.path}: not a regular file (a pipe): skipped, it is no profile file",
        "move it out of the profiles folder (or rename it)",
    )
    assert skipped.document is not None and skipped.document["skipped"] == [
        {"path": str(pipe.path), "reason": pipe.reason}
    ]


def test_a_lock_is_one_row_per_package_with_what_changed_and_what_to_heed(tmp_path: Path) -> None:
    result = LockResult(
        path=tmp_path / "pylock.tiny.toml",
        profile="tiny",
        target=Target(python="3.12", platform=None),
        packages=(
            wheel("alpha", "alpha-1.0-py3-none-any.whl"),
            wheel("alpha", "alpha-1.0-py3-none-manylinux_2_28_x86_64.whl", "computed"),
            wheel("beta", "beta-1.0-py3-none-any.whl", "computed"),
            LockedPackage(
                name="mine",
                version="0.1",
                index="",
                file="",
                url="/src/mine",
                sha256="",
                hash_source="editable",
            ),
        ),
        nightly="20260101",
        seconds=1.5,
        key="k",
        rebuild="provision lock tiny -o x",
        warnings=(LockWarning("cuda-mix", "CUDA 12: a; CUDA 13: b"),),
        changes=Changes(added=(Pinned("beta", "1.0"),), changed=(Updated("alpha", "0.9", "1.0"),)),
    )
    shown = views.locked(result)
    table = shown.blocks[0]
    assert isinstance(table, Table) and table.rows == (
        ("alpha", "1.0", "default", "2", "1 computed"),
        ("beta", "1.0", "default", "1", "computed"),
        ("mine", "0.1", "-", "-", "editable /src/mine: not hashed"),
    )
    lines = [b.text for b in shown.blocks if isinstance(b, Line)]
    assert lines[0].startswith(f"{result.path}: 3 packages, 4 files, 1.50 s")
    assert (
        lines[1]
        == f"changes since the {result.path} it replaced:\n  Added beta v1.0\n  Updated alpha v0.9 -> v1.0"
    )
    assert (
        "rebuild: provision lock tiny -o x" in lines and "warning (cuda-mix): CUDA 12: a; CUDA 13: b" in lines
    )
    assert any(line.startswith("nightly date: 20260101") for line in lines)
    assert (
        "hashed by provision (the index gives none): alpha-1.0-py3-none-manylinux_2_28_x86_64.whl, beta-1.0-py3-none-any.whl"
        in lines
    )
    document = shown.document
    assert document is not None and shown.exit_code == 0
    assert document["changes"] == {
        "added": [{"name": "beta", "version": "1.0"}],
        "removed": [],
        "changed": [{"name": "alpha", "from": "0.9", "to": "1.0"}],
    }
    assert document["warnings"] == [{"id": "cuda-mix", "reason": "CUDA 12: a; CUDA 13: b"}]
    assert set(document["packages"][0]) == {
        "name",
        "version",
        "index",
        "file",
        "url",
        "sha256",
        "hash_source",
    }
    unchanged = views.locked(
        LockResult(path=result.path, profile="tiny", target=result.target, changes=Changes())
    )
    assert any("  No changes" in b.text for b in unchanged.blocks if isinstance(b, Line))
    first = views.locked(LockResult(path=result.path, profile="tiny", target=result.target))
    assert first.document is not None and first.document["changes"] is None
    assert not any(
        "changes since" in b.text or "nightly" in b.text for b in first.blocks if isinstance(b, Line)
    )


def test_a_new_profile_shows_its_pins_and_says_what_was_left_out(tmp_path: Path) -> None:
    result = NewProfile(
        name="mine",
        path=tmp_path / "mine.toml",
        serving="sglang 0.5.23",
        cuda="13.0",
        python="3.12",
        metadata_from="pep658",
        wheel="sglang-0.5.23-py3-none-any.whl",
        pins=(
            Pin(
                name="torch",
                version="==2.11.0",
                index="pytorch",
                why="sglang 0.5.23 Requires-Dist: torch==2.11.0",
            ),
            Pin(name="flashinfer-python", version="==0.7.2", extras=("cu13",)),
        ),
        indexes={"pytorch": "https://download.pytorch.org/whl/cu130"},
        left_out=(LeftOut("cuda-toolkit", "the default index has no cuda-toolkit 13.0 release"),),
    )
    shown = views.new_profile(result)
    table = shown.blocks[0]
    assert isinstance(table, Table) and table.rows[1][:3] == ("flashinfer-python[cu13]", "==0.7.2", "default")
    assert shown.blocks[1] == Info(
        f"metadata of {result.wheel} read by pep658; next: provision lock {result.path}"
    )
    assert shown.document is not None and shown.document["left_out"] == [
        {"name": "cuda-toolkit", "reason": "the default index has no cuda-toolkit 13.0 release"}
    ]
    assert shown.document["packages"][0] == {
        "name": "torch",
        "version": "==2.11.0",
        "extras": [],
        "index": "pytorch",
        "source": "sglang 0.5.23 Requires-Dist: torch==2.11.0",
    }
