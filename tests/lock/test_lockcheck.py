"""`provision lock` warns, before anything is downloaded whole, of what `report --lock` FAILs: two wheels installing
one path (their RECORDs read by HTTP range requests) and NVIDIA libraries of two CUDA majors."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import stacks
from launch import run_provision
from test_lockscan import TAG

from provision.stacks import lockcheck


def test_record_paths_land_where_an_installer_puts_them() -> None:
    record = (
        "cuda/bindings/driver.py,sha256=abc,10\nx-1.0.data/purelib/cuda/bindings/nvrtc.py,sha256=def,5\n"
        "x-1.0.data/scripts/tool,sha256=0,1\nx-1.0.dist-info/METADATA,sha256=1,2\nx-1.0.dist-info/RECORD,,\n"
    )
    assert lockcheck.installed(record) == {
        "cuda/bindings/driver.py": "sha256=abc",
        "cuda/bindings/nvrtc.py": "sha256=def",
        "../bin/tool": "sha256=0",
        "x-1.0.dist-info/METADATA": "sha256=1",
    }
    found = lockcheck.conflicts(
        {
            "a.whl": {"p/x.py": "sha256=1", "nvidia/__init__.py": "sha256=e"},
            "b.whl": {"p/x.py": "sha256=2", "nvidia/__init__.py": "sha256=e"},
        }
    )
    assert [(c.first, c.second, c.path, c.count) for c in found] == [("a.whl", "b.whl", "p/x.py", 1)]
    assert lockcheck.cuda_mix([("torch", "2.9.1+cu130"), ("nvidia-nccl-cu13", "2.28.3")]) == ""
    assert "CUDA 12: nvidia-cublas-cu12 12.8.4.1" in lockcheck.cuda_mix(
        [("torch", "2.9.1+cu130"), ("nvidia-cublas-cu12", "12.8.4.1")]
    )


def test_a_path_already_normal_lands_as_it_is_and_every_other_as_normpath_puts_it() -> None:
    """landing's shortcut (a path with no empty or dot segment, not under NAME.data/, is its own landing) agrees with
    the whole rule on every path of up to four segments drawn from the awkward ones."""
    import itertools
    import posixpath

    def whole(path: str) -> str | None:
        parts = [p for p in path.split("/") if p not in ("", ".")]
        if not parts:
            return None
        if parts[0].endswith(".data") and len(parts) > 2:
            where = lockcheck.SCHEMES.get(parts[1], f"../{parts[1]}/") + "/".join(parts[2:])
            return lockcheck._SITE.sub("", posixpath.normpath(where))
        return posixpath.normpath("/".join(parts))

    segments = ["a", ".", "..", "", "x.data", "purelib", "...", ".a", "a.", "data", "scripts", "b.data"]
    for size in range(1, 5):
        for parts in itertools.product(segments, repeat=size):
            path = "/".join(parts)
            assert lockcheck.landing(path) == whole(path), path


def test_one_search_over_a_whole_record_agrees_with_each_paths_landing() -> None:
    """installed's shortcut (one search over every path of a RECORD, joined by newlines) takes a RECORD's paths as
    they are only where each is its own landing: one awkward path among normal ones, wherever it stands, and paths
    holding a newline (csv reads a quoted one) go the whole way."""
    import itertools

    def each(rows: list[list[str]]) -> dict[str, str]:
        found = {}
        for row in rows:
            path = lockcheck.landing(row[0]) if row and row[0] else None
            if path is not None and not (
                path.endswith("/RECORD")
                and path.count("/") == 1
                and path.split("/")[0].endswith(".dist-info")
            ):
                found[path] = row[1]
        return found

    awkward = [
        "./a",
        "a//b",
        "a/",
        "/a",
        "x.data/purelib/p.py",
        "a/../b",
        "a/.",
        "..",
        "p\n/b",
        "p\n../b",
        "q/\n",
        "\n",
    ]
    normal = ["pkg/__init__.py", "pkg/x.data", "pkg/a.py", "x-1.0.dist-info/RECORD", "a.data"]
    for odd, at in itertools.product(awkward, range(len(normal) + 1)):
        paths = normal[:at] + [odd] + normal[at:]
        rows = [[path, f"sha256={i}", "1"] for i, path in enumerate(paths)]
        assert lockcheck.installed(rows) == each(rows), paths
    rows = [[path, "sha256=0", "1"] for path in normal]
    assert lockcheck.installed(rows) == each(rows)


def test_known_names_each_distributions_last_hash_of_a_path_installed_by_two() -> None:
    """known keeps only paths two distributions install with different hashes, each distribution's hash the last of
    its wheels', in whatever order the wheels come."""
    import itertools

    wheels = {
        "a-1.0-py3-none-any.whl": {"p/x.py": "sha256=1", "a/only.py": "sha256=9"},
        "a-1.0-cp312-cp312-linux_x86_64.whl": {"p/x.py": "sha256=3"},
        "b-1.0-py3-none-any.whl": {"p/x.py": "sha256=2", "same.py": "sha256=5"},
        "c-1.0-py3-none-any.whl": {"same.py": "sha256=5"},
    }
    for order in itertools.permutations(wheels):
        records = {name: wheels[name] for name in order}
        last_a = next(wheels[n]["p/x.py"] for n in reversed(order) if n.startswith("a-"))
        assert lockcheck.known(records) == [{"path": "p/x.py", "installs": {"a": last_a, "b": "sha256=2"}}], (
            order
        )


def test_a_file_where_another_wheel_has_a_folder_is_found_wherever_it_lies() -> None:
    found = lockcheck.conflicts(
        {
            "a-1.0-py3-none-any.whl": {"pkg/sub": "sha256=1", "pkg/a.py": "sha256=2"},
            "b-1.0-py3-none-any.whl": {"pkg/sub/deep/x.py": "sha256=3", "pkg/sub/y.py": "sha256=4"},
        }
    )
    assert [(c.first, c.second, c.count) for c in found] == [
        ("a-1.0-py3-none-any.whl", "b-1.0-py3-none-any.whl", 2)
    ]
    assert found[0].path == "pkg/sub (a file) and pkg/sub/deep/x.py"
    assert not lockcheck.conflicts(
        {"a-1.0-py3-none-any.whl": {"pkg/sub": "sha256=1", "pkg/sub/x.py": "sha256=2"}}
    )


def test_lock_warns_of_a_shared_path_and_mixed_cuda_majors(
    index_server, tmp_path: Path, provision_bin: str
) -> None:
    default = index_server.index("default")
    default.ranges = default.pep658 = (
        True  # as the default registry: uv reads .metadata; RECORDs are read by range
    )
    default.add(
        "stack", "1.0", tag=stacks.PY3, requires=("cuda-python==12.6.2.post1", "cuda-bindings==13.5.0")
    )
    default.add("cuda-python", "12.6.2.post1", tag=stacks.PY3, files={"cuda/bindings/driver.py": b"# 12.6\n"})
    default.add(
        "cuda-bindings", "13.5.0", tag=TAG, files={"cuda/bindings/driver.py": b"# 13.5\n" + b"x" * 300_000}
    )
    profile = tmp_path / "stack.toml"
    profile.write_text(
        f'schema = 1\nname = "stack"\ncuda = "13.0"\n[indexes]\ndefault = "{default.url}"\n[packages]\nstack = "==1.0"\n'
    )
    env = {**os.environ, "UV_CACHE_DIR": str(tmp_path / "uv"), "XDG_CACHE_HOME": str(tmp_path / "xdg")}
    argv = [
        "lock",
        str(profile),
        "--platform",
        stacks.PLATFORM,
        "--python",
        stacks.PYTHON,
        "-o",
        str(tmp_path / "pylock.stack.toml"),
    ]
    done = run_provision(*argv, "--json", env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    warnings = {w["id"]: w["reason"] for w in json.loads(done.stdout)["warnings"]}
    assert warnings["conflict"].startswith(
        "cuda_bindings-13.5.0-py3-none-manylinux_2_28_x86_64.whl and "
        "cuda_python-12.6.2.post1-py3-none-any.whl both install cuda/bindings/driver.py"
    )
    assert "CUDA 12: cuda-python 12.6.2.post1; CUDA 13: cuda-bindings 13.5.0" in warnings["cuda-mix"]
    assert "conflict-unread" not in warnings
    # RECORDs by range only
    assert default.range_requests >= 2 and not (tmp_path / "xdg/provision/wheels").exists()
    # kept by sha256: a second lock reads none
    assert len(list((tmp_path / "xdg/provision/records").iterdir())) == 3
    before = default.range_requests
    table = run_provision(*argv, env=env, cwd=tmp_path)
    assert table.returncode == 0 and "warning (conflict): cuda_bindings-13.5.0" in table.stdout.replace(
        "\n", " "
    )
    assert default.range_requests == before  # no RECORD read again
    # records/ removed: the RECORDs are read again, early (the lock being replaced names them before uv answers), and
    # each once in the run, though the early reads, uv's answer and the gate all ask for them
    import shutil

    shutil.rmtree(tmp_path / "xdg/provision/records")
    again = run_provision(*argv, "--json", env=env, cwd=tmp_path)
    assert again.returncode == 0 and {w["id"] for w in json.loads(again.stdout)["warnings"]} == set(warnings)
    assert default.range_requests - before == before  # as many range requests as the first lock: none twice


def test_what_is_meant_to_sit_side_by_side_is_not_a_failure() -> None:
    """nvidia-cutlass-dsl 4.8.0 requires its -libs-cu12 beside -libs-cu13 (SGLang 0.5.23's stack locks both), and
    flashinfer-python 0.7.2 and torch-c-dlpack-ext 0.1.5 each ship a stray top-level build_backend.py: neither splits
    a package. nvidia-cudnn-cu12 beside cu13 libraries still is a mix."""
    stack = [
        ("torch", "2.14.1"),
        ("cuda-bindings", "13.4.4"),
        ("nvidia-cutlass-dsl-libs-cu12", "4.8.0"),
        ("nvidia-cutlass-dsl-libs-cu13", "4.8.0"),
    ]
    assert lockcheck.cuda_mix(stack) == ""
    assert "CUDA 12: nvidia-cudnn-cu12 9.10.2.21" in lockcheck.cuda_mix(
        [*stack, ("nvidia-cudnn-cu12", "9.10.2.21")]
    )
    (loose,) = lockcheck.conflicts(
        {"flashinfer.whl": {"build_backend.py": "sha256=a"}, "dlpack.whl": {"build_backend.py": "sha256=b"}}
    )
    assert loose.loose
    (split,) = lockcheck.conflicts(
        {
            "a.whl": {"build_backend.py": "sha256=a", "cuda/bindings/x.py": "sha256=1"},
            "b.whl": {"build_backend.py": "sha256=b", "cuda/bindings/x.py": "sha256=2"},
        }
    )
    assert not split.loose and split.path == "cuda/bindings/x.py" and split.count == 2


A = "a-1.0-py3-none-any.whl"
B = "b-1.0-py3-none-any.whl"


def pair(
    first: str, second: str, first_hash: str = "sha256=1", second_hash: str = "sha256=2"
) -> list[lockcheck.Conflict]:
    """The conflicts of wheel a's RECORD listing `first` and wheel b's listing `second`."""
    a = lockcheck.installed(f"{first},{first_hash},1\na-1.0.dist-info/RECORD,,\n")
    b = lockcheck.installed(f"{second},{second_hash},1\nb-1.0.dist-info/RECORD,,\n")
    assert a is not None and b is not None
    return lockcheck.conflicts({A: a, B: b})


def test_one_path_however_it_is_spelled_is_one_path() -> None:
    """`pkg/./x.py`, `pkg//x.py`, `./pkg/x.py` and a data file that lands in site-packages are all pkg/x.py."""
    for spelled in (
        "pkg/./x.py",
        "pkg//x.py",
        "./pkg/x.py",
        "pkg/sub/../x.py",
        "b-1.0.data/purelib/pkg/x.py",
        "b-1.0.data/platlib/pkg/x.py",
        "b-1.0.data/data/lib/python3.12/site-packages/pkg/x.py",
    ):
        (found,) = pair("pkg/x.py", spelled)
        assert found.path == "pkg/x.py" and not found.loose and found.comparable, spelled
    # lands in the venv's own folder, not site-packages
    assert pair("pkg/x.py", "b-1.0.data/data/pkg/x.py") == []


def test_a_wheel_writing_into_anothers_metadata_or_a_file_where_a_folder_is() -> None:
    (intrusion,) = pair("pkg/x.py", "a-1.0.dist-info/entry_points.txt")
    assert intrusion.second == B and intrusion.first == A and not intrusion.loose
    assert "writes into a-1.0.dist-info" in intrusion.message()
    (ghost,) = pair("pkg/x.py", "pip-99.dist-info/METADATA")  # a distribution no wheel of the lock is
    assert ghost.first == "pip-99.dist-info" and not ghost.loose
    (clash,) = pair("pkg", "pkg/x.py")
    assert clash.path == "pkg (a file) and pkg/x.py" and not clash.loose


def test_hashes_are_compared_like_with_like() -> None:
    digest = "sha256=47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU"
    assert pair("pkg/x.py", "pkg/x.py", digest, digest) == []
    assert pair("pkg/x.py", "pkg/x.py", digest, "SHA256=47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU") == []
    (unknown,) = pair(
        "pkg/x.py",
        "pkg/x.py",
        digest,
        "sha384=OLBgp1GsljhM2TJ-sbHjaiH9txEUvgdDTAzHv2P24donTt6_529l-9Ua0vFImLlb",
    )
    assert not unknown.comparable and "different algorithms" in unknown.message()
    from provision.report import lockgates
    from provision.report.lockscan import WheelScan

    wheels = [
        WheelScan(name=n, version="1.0", wheel=w, origin="fetched", record={"pkg/x.py": h})
        for n, w, h in (("a", A, digest), ("b", B, "sha384=OLBg"))
    ]
    assert lockgates.conflict(wheels).status == "warn"  # cannot be told: never a FAIL, never a PASS


def test_cuda_majors_from_every_naming() -> None:
    torch = ("torch", "2.11.0+cu130")
    for other, major in (
        (("nvidia-cublas-cu12", "12.8.4.1"), 12),
        (("cupy-cuda12x", "13.6.0"), 12),
        (("tensorrt-cu12", "10.13.3.9"), 12),
        (("tensorrt-cu12-libs", "10.13.3.9"), 12),
        (("jax-cuda12-plugin", "0.7.2"), 12),
        (("cupy-cuda117", "10.6.0"), 11),
    ):
        assert f"CUDA {major}: {other[0]}" in lockcheck.cuda_mix([torch, other]), other
    assert "CUDA 12: nvidia-cublas-cu12" in lockcheck.cuda_mix(
        [("nvidia-cublas", "13.0.0.19"), ("nvidia-cublas-cu12", "12.8.4.1")]
    )
    assert lockcheck.cuda_majors([("somepkg", "1.0+cu12")]) == {12: ["somepkg 1.0+cu12"]}  # never CUDA 1
    assert lockcheck.cuda_majors([("somepkg", "1.0+cu118")]) == {11: ["somepkg 1.0+cu118"]}
    assert (
        lockcheck.cuda_mix(
            [
                torch,
                ("nvidia-cublas", "13.0.0.19"),
                ("nvidia-cudnn-cu13", "9.13.0.50"),
                ("cupy-cuda13x", "13.6.0"),
            ]
        )
        == ""
    )


def test_report_lock_fails_a_crafted_lock_whose_wheels_spell_one_path_two_ways(
    index_server, provision_bin: str, tmp_path: Path
) -> None:
    from test_lockscan import H200, lock_target, report, write_lock

    default = index_server.index("default")
    wheels = [
        default.add("alpha", "1.0", tag=stacks.PY3, files={"shared/x.py": b"# alpha\n"}),
        default.add("beta", "1.0", tag=stacks.PY3, files={"shared/./x.py": b"# beta\n"}),
        default.add(
            "gamma",
            "1.0",
            tag=stacks.PY3,
            files={"gamma/x.py": b"", "alpha-1.0.dist-info/entry_points.txt": b""},
        ),
        default.add("jax-cuda12-plugin", "0.7.2", tag=stacks.PY3),
        default.add("torch", "2.11.0+cu130", tag=stacks.PY3),
    ]
    gates = {
        g["id"]: g
        for g in lock_target(
            report(
                provision_bin, write_lock(tmp_path / "pylock.toml", default, wheels), H200, tmp_path / "cache"
            )
        )["gates"]
    }
    assert (
        gates["conflict"]["status"] == "fail"
        and "writes into alpha-1.0.dist-info" in gates["conflict"]["reason"]
    )
    assert "1 more pairs" in gates["conflict"]["reason"]
    assert (
        gates["cuda-mix"]["status"] == "fail"
        and "CUDA 12: jax-cuda12-plugin 0.7.2" in gates["cuda-mix"]["reason"]
    )


def test_the_known_conflicts_a_lock_records_are_sealed_with_its_packages() -> None:
    """Drift forgives what `known_conflicts` names, so a path added to it by hand must break the seal."""
    from provision.stacks import lockfile

    flashy, dlpacky = "flashy-1.0-py3-none-any.whl", "dlpacky-1.0-py3-none-any.whl"
    known = lockcheck.known(
        {
            flashy: {"build_backend.py": "sha256=a", "flashy/x.py": "sha256=1"},
            dlpacky: {"build_backend.py": "sha256=b", "flashy/y.py": "sha256=1"},
        }
    )
    assert known == [{"path": "build_backend.py", "installs": {"dlpacky": "sha256=b", "flashy": "sha256=a"}}]
    packages = [{"name": "flashy"}]
    # a lock without: as before
    assert lockfile.packages_digest(packages, []) == lockfile.packages_digest(packages)
    assert lockfile.packages_digest(packages, known) != lockfile.packages_digest(packages)


def test_conflicts_and_known_read_only_what_two_wheels_share(monkeypatch: pytest.MonkeyPatch) -> None:
    """The judging finds shared paths by set operations over each wheel's paths: a path of one wheel alone is never
    compared (the SGLang stack's 74,000 paths, a few dozen shared), and the answers are those of a walk over every
    path, checked here on every way three wheels can share two paths."""
    import itertools

    compared: list[tuple[str, str]] = []
    same = lockcheck._same
    monkeypatch.setattr(lockcheck, "_same", lambda a, b: compared.append((a, b)) or same(a, b))

    def walked(
        records: dict[str, dict[str, str]],
    ) -> tuple[list[tuple[str, str, str, int]], list[dict[str, object]]]:
        owner: dict[str, tuple[str, str]] = {}
        pairs: dict[tuple[str, str], list[str]] = {}
        claims: dict[str, dict[str, str]] = {}
        for wheel in sorted(records):
            for path, digest in records[wheel].items():
                if path in owner and same(owner[path][1], digest) is not True:
                    pairs.setdefault((owner[path][0], wheel), []).append(path)
                owner.setdefault(path, (wheel, digest))
        for wheel, paths in records.items():
            for path, digest in paths.items():
                claims.setdefault(path, {})[wheel.split("-")[0]] = digest
        shared = [
            {"path": p, "installs": dict(sorted(by.items()))}
            for p, by in sorted(claims.items())
            if len(by) > 1 and len(set(by.values())) > 1
        ]
        return [(a, b, sorted(ps)[0], len(ps)) for (a, b), ps in sorted(pairs.items())], shared

    digests = ["sha256=1", "sha256=2"]
    for choice in itertools.product([None, *digests], repeat=6):
        records = {
            f"{name}-1.0-py3-none-any.whl": {
                path: digest
                for path, digest in zip(("p/x.py", "p/y.py"), choice[2 * n : 2 * n + 2], strict=True)
                if digest is not None
            }
            | {f"{name}/own.py": "sha256=0"}
            for n, name in enumerate("abc")
        }
        found = [(c.first, c.second, c.path, c.count) for c in lockcheck.conflicts(records)]
        assert (found, lockcheck.known(records)) == walked(records), records
    assert compared
    compared.clear()
    alone = {f"{n}-1.0-py3-none-any.whl": {f"{n}/m{i}.py": "sha256=1" for i in range(1000)} for n in "abc"}
    assert lockcheck.conflicts(alone) == [] and lockcheck.known(alone) == [] and compared == []
