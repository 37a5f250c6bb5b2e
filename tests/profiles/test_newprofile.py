"""`provision profiles new NAME --from sglang==VERSION`: SGLang's own pins, read from a real index served on
127.0.0.1 (PEP 658 metadata, range requests, or the whole wheel), written as an editable profile that loads and locks."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from launch import run_provision
from stacks import CP, PY3

from provision.stacks import profiles

SGLANG_TAG = f"{CP}-{CP}-manylinux_2_34_x86_64"
SGLANG_REQUIRES = (
    "torch==2.14.1",
    "sglang-kernel==0.4.10",
    "flashinfer_python[cu13]==0.7.2",
    "flashinfer_cubin==0.7.2",
    "fastapi",
    "torchcodec==0.8.0; platform_machine == 'aarch64'",
    "sentence_transformers; extra == 'test'",
)


def serve_sglang(index_server, *, pep658: bool = False, ranges: bool = False):
    default = index_server.index("default")
    default.pep658, default.ranges = pep658, ranges
    default.add("sglang", "0.5.22", tag=SGLANG_TAG, requires=("torch==2.14.0",))
    # a wheel far larger than one block
    padding = {f"sglang/blob{i}.bin": bytes(range(256)) * 4096 for i in range(4)}
    default.add(
        "sglang",
        "0.5.23",
        tag=SGLANG_TAG,
        requires=SGLANG_REQUIRES,
        extras=("test",),
        files={"sglang/__init__.py": b"", **padding},
    )
    for version in ("13.0.1", "13.0.2", "13.1.0", "13.2.0rc1"):
        default.add("cuda-toolkit", version, tag=PY3, extras=("nvcc", "crt", "cudart", "cccl", "nvvm"))
    index_server.index("flashinfer").add(
        "flashinfer-jit-cache", "0.7.2+cu130", tag="cp310-abi3-manylinux2014_x86_64"
    )
    return default


def new(provision_bin: str, default, out: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    """`profiles new` against the served default index and FlashInfer's (served too: `flashinfer` beside `default`)."""
    flashinfer = default.url.replace("/default/", "/flashinfer/")
    return run_provision(
        "profiles",
        "new",
        out.stem,
        "--index",
        f"default={default.url}",
        "--index",
        f"flashinfer={flashinfer}",
        "-o",
        str(out),
        *extra,
        timeout=120,
    )


@pytest.mark.parametrize(
    ("pep658", "ranges", "how"), [(True, False, "pep658"), (False, True, "range"), (False, False, "download")]
)
def test_pins_come_from_sglangs_metadata(
    index_server, provision_bin: str, tmp_path: Path, pep658: bool, ranges: bool, how: str
) -> None:
    default = serve_sglang(index_server, pep658=pep658, ranges=ranges)
    out = tmp_path / "mine.toml"
    done = new(provision_bin, default, out, "--from", "sglang==0.5.23", "--cuda", "13.0", "--json")
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["schema_version"] == 1 and doc["serving"] == "sglang 0.5.23" and doc["metadata_from"] == how
    profile = profiles.load_file(out)
    pins = {p.name: p for p in profile.packages}
    assert (
        pins["sglang"].version == "==0.5.23" and pins["sglang"].index == "default" and doc["left_out"] == []
    )
    assert pins["torch"].version == "==2.14.1" and pins["torch"].index == "pytorch"
    assert pins["sglang-kernel"].version == "==0.4.10" and pins["sglang-kernel"].index == "sglang"
    assert pins["flashinfer-python"].version == "==0.7.2" and pins["flashinfer-python"].extras == ("cu13",)
    assert (
        pins["flashinfer-jit-cache"].version == "==0.7.2"
        and pins["flashinfer-jit-cache"].index == "flashinfer"
    )
    # newest 13.0, no rc
    assert pins["cuda-toolkit"].version == "==13.0.2" and "nvcc" in pins["cuda-toolkit"].extras
    assert "fastapi" not in pins and "torchcodec" not in pins and "sentence-transformers" not in pins
    assert (
        profile.indexes["pytorch"] == "https://download.pytorch.org/whl/cu130"
        and profile.indexes["default"] == default.url
    )
    assert profile.env["FLASHINFER_CUDA_ARCH_LIST"] == "{arch_list}" and profile.toolkit == "nvidia/cu13"
    text = out.read_text()
    assert "# sglang 0.5.23 Requires-Dist: torch==2.14.1" in text and "flashinfer_python[cu13]==0.7.2" in text
    assert not any("sglang-0.5.22" in r for r in default.requests)  # only the release asked for is read
    if how == "pep658":
        assert any(r.endswith(".whl.metadata") for r in default.requests) and default.range_requests == 0
    if how == "range":
        assert 0 < default.range_requests <= 3  # the zip's tail and one member, not 4 MiB of it


def test_newest_release_and_another_cuda(index_server, provision_bin: str, tmp_path: Path) -> None:
    default = serve_sglang(index_server)
    out = tmp_path / "cu131.toml"
    done = new(provision_bin, default, out, "--from", "sglang", "--cuda", "13.1")
    assert done.returncode == 0, done.stderr
    assert "no flashinfer-jit-cache 0.7.2" not in done.stderr  # the served FlashInfer index has it
    profile = profiles.load_file(out)
    assert profile.cuda == "13.1" and profile.indexes["sglang"] == "https://docs.sglang.io/whl/cu131"
    assert {p.name: p.version for p in profile.packages}["cuda-toolkit"] == "==13.1.0"
    assert "sglang 0.5.23" in profile.description  # the newest release when no version is named
    header = out.read_text().splitlines()[0]  # what the user typed, not what it resolved to (issue 36)
    assert header == "# Written by `provision profiles new cu131 --from sglang --cuda 13.1 --python 3.12`", (
        header
    )
    assert ", the newest release on " in out.read_text().splitlines()[1]


def test_bad_input_is_one_line(index_server, provision_bin: str, tmp_path: Path) -> None:
    default = serve_sglang(index_server)
    missing = new(provision_bin, default, tmp_path / "x.toml", "--from", "sglang==9.9.9")
    # the index answered and has no such release: the user's mistake, exit 2 (it was 5, as if the network failed)
    assert (
        missing.returncode == 2
        and "has no sglang release ==9.9.9" in missing.stderr
        and "0.5.23" in missing.stderr
    )
    other = new(provision_bin, default, tmp_path / "x.toml", "--from", "torch==2.14.1")
    assert other.returncode == 2 and "SGLang's pins" in other.stderr
    (tmp_path / "y.toml").write_text("keep me")
    kept = new(provision_bin, default, tmp_path / "y.toml", "--from", "sglang==0.5.23")
    assert (
        kept.returncode == 2
        and "already exists" in kept.stderr
        and (tmp_path / "y.toml").read_text() == "keep me"
    )


def test_the_written_profile_locks(index_server, provision_bin: str, tmp_path: Path) -> None:
    default = serve_sglang(index_server, pep658=True)
    pytorch, sglang, flashinfer = (index_server.index(n) for n in ("pytorch", "sglang", "flashinfer"))
    tag = f"{CP}-{CP}-manylinux_2_28_x86_64"
    pytorch.add("torch", "2.14.1+cu130", tag=tag)
    sglang.add("sglang-kernel", "0.4.10+cu130", tag="cp310-abi3-manylinux2014_x86_64")
    flashinfer.add("flashinfer-jit-cache", "0.7.2+cu130", tag="cp310-abi3-manylinux2014_x86_64")
    default.add("flashinfer-python", "0.7.2", tag=PY3, extras=("cu13",))
    default.add("flashinfer-cubin", "0.7.2", tag=PY3)
    default.add("ninja", "1.13.0", tag=PY3)
    # sglang itself is in the profile: its other dependencies are resolved too
    default.add("fastapi", "0.120.0", tag=PY3)
    out = tmp_path / "today.toml"
    assert new(provision_bin, default, out, "--from", "sglang==0.5.23").returncode == 0
    python = f"{sys.version_info.major}.{sys.version_info.minor}"
    args = ["lock", str(out), "--python", python, "-o", str(tmp_path / "pylock.today.toml"), "--json"]
    for name, index in (("pytorch", pytorch), ("sglang", sglang), ("flashinfer", flashinfer)):
        args += ["--index", f"{name}={index.url}"]
    done = run_provision(*args)
    assert done.returncode == 0, done.stderr
    locked = {p["name"]: p["version"] for p in json.loads(done.stdout)["packages"]}
    assert locked["torch"] == "2.14.1+cu130" and locked["sglang-kernel"] == "0.4.10+cu130"
    assert locked["sglang"] == "0.5.23" and locked["fastapi"] == "0.120.0"


def test_what_sglang_does_not_pin_is_added_only_where_its_index_has_it(
    index_server, provision_bin: str, tmp_path: Path
) -> None:
    """flashinfer-cubin and flashinfer-jit-cache at flashinfer-python's version, and the cuda-toolkit torch pins, come
    only from indexes that have them: the default registry's cubin stops at 0.6.13, FlashInfer's index has no 0.7.2.
    What is left out is said in a comment and in `left_out`; the description says what the profile holds."""
    default = index_server.index("default")
    default.pep658 = True
    default.add(
        "sglang",
        "0.5.23",
        tag=SGLANG_TAG,
        requires=("torch==2.14.1", "sglang-kernel==0.4.10", "flashinfer_python[cu13]==0.7.2"),
    )
    default.add("flashinfer-cubin", "0.6.13", tag=PY3)
    default.add(
        "torch", "2.14.1", tag=f"{CP}-{CP}-manylinux_2_28_x86_64", requires=("cuda-toolkit[cudart]==13.0.3",)
    )
    for version in ("13.0.2", "13.0.3"):
        default.add("cuda-toolkit", version, tag=PY3, extras=("nvcc", "crt", "cudart", "cccl", "nvvm"))
    index_server.index("flashinfer").add(
        "flashinfer-jit-cache", "0.6.13+cu130", tag="cp310-abi3-manylinux2014_x86_64"
    )
    out = tmp_path / "today.toml"
    done = new(provision_bin, default, out, "--from", "sglang==0.5.23", "--json")
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    left = {x["name"]: x["reason"] for x in doc["left_out"]}
    assert set(left) == {"flashinfer-cubin", "flashinfer-jit-cache"}
    assert (
        "has no flashinfer-cubin 0.7.2 (newest there: 0.6.13); SGLang does not pin it"
        in left["flashinfer-cubin"]
    )
    assert (
        "FlashInfer's index" in left["flashinfer-jit-cache"]
        and "no flashinfer-jit-cache 0.7.2" in left["flashinfer-jit-cache"]
    )
    profile = profiles.load_file(out)
    pins = {p.name: p.version for p in profile.packages}
    assert "flashinfer-cubin" not in pins and "flashinfer-jit-cache" not in pins
    # torch's own pin, which the index has
    assert pins["cuda-toolkit"] == "==13.0.3" and pins["sglang"] == "==0.5.23"
    text = out.read_text()
    assert (
        "# left out: flashinfer-cubin: the default index" in text
        and "# left out: flashinfer-jit-cache: FlashInfer's index" in text
    )
    assert profile.description == (
        "sglang 0.5.23 and the CUDA 13.0 stack it pins: torch 2.14.1, sglang-kernel 0.4.10, "
        "flashinfer-python 0.7.2; its own nvcc (cuda-toolkit 13.0.3); left out: flashinfer-cubin, flashinfer-jit-cache"
    )
    # a CUDA the pins are not built for: refused, naming the CUDA they are, nothing written
    refused = new(provision_bin, default, tmp_path / "old.toml", "--from", "sglang==0.5.23", "--cuda", "12.8")
    assert refused.returncode == 2 and not (tmp_path / "old.toml").exists()
    assert (
        "--cuda 12.8: the pins of sglang 0.5.23 are built for CUDA 13 (flashinfer_python[cu13]==0.7.2; torch 2.14.1 requires cuda-toolkit 13.0.3)"
        in refused.stderr
    )
    assert "pass --cuda 13.0" in refused.stderr


@pytest.mark.network
def test_sglang_0_5_23_from_the_public_registry(provision_bin: str, tmp_path: Path) -> None:
    out = tmp_path / "public.toml"
    done = run_provision(
        "profiles", "new", "public", "--from", "sglang==0.5.23", "-o", str(out), "--json", timeout=300
    )
    assert done.returncode == 0, done.stderr
    pins = {p.name: p for p in profiles.load_file(out).packages}
    assert (
        pins["sglang"].version == "==0.5.23"
        and pins["torch"].version == "==2.14.1"
        and pins["sglang-kernel"].version == "==0.4.10"
    )
    assert pins["flashinfer-python"].version == "==0.7.2" and pins["flashinfer-python"].extras == ("cu13",)
    assert json.loads(done.stdout)["metadata_from"] in ("pep658", "range")  # never the whole 39 MB wheel


def test_a_cuda_or_python_that_is_not_a_version_changes_nothing(
    index_server, provision_bin: str, tmp_path: Path
) -> None:
    """--cuda goes into index URLs and the file's first comment: a newline there wrote a file that did not load,
    over the good one with --force. Checked first now: exit 2, the index never asked, the old file kept."""
    default = serve_sglang(index_server)
    out = tmp_path / "keep.toml"
    out.write_text("keep me")
    for option in (
        ("--cuda", "13.0\n[evil]"),
        ("--cuda", "13.0/../../x"),
        ("--cuda", ""),
        ("--python", "3.12\nx = 1"),
        ("--python", "2.7"),
    ):
        before = len(default.requests)
        done = new(provision_bin, default, out, "--from", "sglang==0.5.23", "--force", *option)
        assert (
            done.returncode == 2
            and f"{option[0]} " in done.stderr
            and len(done.stderr.strip().splitlines()) == 2
        ), done.stderr
        assert out.read_text() == "keep me" and len(default.requests) == before


def test_a_profile_that_would_not_load_is_never_written_and_the_old_file_stays(
    index_server, provision_bin: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The file was written, then loaded: a name past 64 characters left a profile that did not load, over the good one
    with --force. The name is checked first now (exit 2, the index not asked); whatever else the loader refuses is
    refused before the write (a key injected into the rendered text stands for it: nothing else reaches it today)."""
    from provision.errors import ProfileError
    from provision.stacks import newprofile

    default = serve_sglang(index_server)
    out = tmp_path / "keep.toml"
    assert new(provision_bin, default, out, "--from", "sglang==0.5.23").returncode == 0
    good = out.read_bytes()
    before = len(default.requests)
    done = run_provision(
        "profiles",
        "new",
        "a" * 65,
        "--from",
        "sglang==0.5.23",
        "--index",
        f"default={default.url}",
        "-o",
        str(out),
        "--force",
        timeout=120,
    )
    assert (
        done.returncode == 2
        and "at most 64 characters" in done.stderr
        and len(done.stderr.strip().splitlines()) == 2
    ), done.stderr
    assert out.read_bytes() == good and len(default.requests) == before

    rendered = newprofile.render
    monkeypatch.setattr(newprofile, "render", lambda result, url: rendered(result, url) + "[extra]\nx = 1\n")
    with pytest.raises(ProfileError) as refused:
        newprofile.new("keep", "sglang==0.5.23", output=out, overrides={"default": default.url}, force=True)
    assert (
        f"{out}: extra: unknown key" in refused.value.message
        and "nothing was written" in refused.value.message
    )
    assert out.read_bytes() == good and sorted(p.name for p in tmp_path.iterdir() if p.is_file()) == [
        "keep.toml"
    ]


def test_an_output_that_cannot_be_written_is_one_line_naming_it(
    index_server, provision_bin: str, tmp_path: Path
) -> None:
    """A folder where the file goes (-o, or NAME.toml in PROVISION_PROFILES), a path under a file, a folder that cannot
    be written: exit 2 naming the path and what to do, before the index is asked; nothing is left behind."""
    import os

    default = serve_sglang(index_server)
    folder = tmp_path / "folder.toml"
    folder.mkdir()
    a_file = tmp_path / "file"
    a_file.write_text("mine")
    profiles_dir = tmp_path / "profiles"
    (profiles_dir / "x.toml").mkdir(parents=True)
    cases = [
        (["-o", str(folder), "--force"], f"{folder}: is a folder", None),
        (["-o", str(folder / "")], f"{folder}: is a folder", None),
        (["--force"], f"{profiles_dir / 'x.toml'}: is a folder", {"PROVISION_PROFILES": str(profiles_dir)}),
        (["-o", str(a_file / "sub" / "x.toml"), "--force"], f"{a_file} is a file, not a folder", None),
    ]
    if os.geteuid() != 0:  # root writes into a read-only folder anyway
        readonly = tmp_path / "readonly"
        readonly.mkdir(mode=0o500)
        cases.append((["-o", str(readonly / "x.toml")], f"{readonly} is not writable", None))
    snapshot = sorted(str(p) for p in tmp_path.rglob("*") if "indexes" not in p.parts)
    for args, words, env in cases:
        before = len(default.requests)
        done = run_provision(
            "profiles",
            "new",
            "x",
            "--from",
            "sglang==0.5.23",
            "--index",
            f"default={default.url}",
            *args,
            timeout=120,
            env={**os.environ, **(env or {})},
        )
        lines = done.stderr.strip().splitlines()
        assert (
            done.returncode == 2 and len(lines) == 2 and words in lines[0] and lines[1].startswith("hint: ")
        ), done.stderr
        assert len(default.requests) == before, "refused before the index is asked"
    assert (
        sorted(str(p) for p in tmp_path.rglob("*") if "indexes" not in p.parts) == snapshot
        and a_file.read_text() == "mine"
    )
    unwritable = run_provision(
        "profiles",
        "new",
        "x",
        "--from",
        "sglang==0.5.23",
        "--index",
        f"default={default.url}",
        "-o",
        "/proc/x.toml",
        timeout=120,
    )
    # root: refused at the write (ENOENT); others: /proc is not writable
    lines = unwritable.stderr.strip().splitlines()
    assert unwritable.returncode == 2 and len(lines) == 2 and "/proc/x.toml" in lines[0], unwritable.stderr


@pytest.mark.parametrize(("pep658", "ranges", "how"), [(True, False, "pep658"), (False, True, "range")])
def test_sglangs_metadata_is_read_once_by_its_sha256(
    index_server, provision_bin: str, tmp_path: Path, pep658: bool, ranges: bool, how: str
) -> None:
    """The wheel's METADATA headers are kept in provision's metadata/ by the wheel's sha256 (the index gives it):
    `profiles new` again reads neither its .metadata nor a range of it, and writes the same profile; an entry that is
    damaged, or names another wheel's sha256, is read again from the index, never trusted."""
    import os

    default = serve_sglang(index_server, pep658=pep658, ranges=ranges)
    first, again = tmp_path / "first.toml", tmp_path / "again.toml"
    done = new(provision_bin, default, first, "--from", "sglang==0.5.23", "--cuda", "13.0", "--json")
    assert done.returncode == 0 and json.loads(done.stdout)["metadata_from"] == how, done.stderr
    kept = Path(os.environ["XDG_CACHE_HOME"]) / "provision" / "metadata"
    (entry,) = [p for p in kept.iterdir() if "Name: sglang" in p.read_text()]
    assert json.loads(entry.read_text())["data"]["source"] == how
    # its METADATA, then its benchmark's sources
    first_reads = [r for r in default.requests if "sglang-0.5.23" in r]
    done = new(provision_bin, default, again, "--from", "sglang==0.5.23", "--cuda", "13.0", "--json")
    assert done.returncode == 0 and json.loads(done.stdout)["metadata_from"] == how, done.stderr
    second_reads = [r for r in default.requests if "sglang-0.5.23" in r][len(first_reads) :]
    metadata_reads = (
        1  # its .metadata file; else the zip's tail by one range (its answer gives the size: no HEAD)
    )
    assert len(second_reads) == len(first_reads) - metadata_reads and not any(
        r.endswith(".metadata") for r in second_reads
    )
    assert again.read_text().replace("again", "first") == first.read_text()
    # damaged (a Requires-Dist that does not parse): removed, read from the index again, the same profile written
    document = json.loads(entry.read_text())
    document["data"]["headers"] = (
        "Metadata-Version: 2.1\nName: sglang\nVersion: 0.5.23\nRequires-Dist: torch ((>= ;;\n"
    )
    entry.write_text(json.dumps(document))
    damaged = tmp_path / "damaged.toml"
    done = new(provision_bin, default, damaged, "--from", "sglang==0.5.23", "--cuda", "13.0", "--json")
    assert done.returncode == 0, done.stderr
    assert damaged.read_text().replace("damaged", "first") == first.read_text()
    assert json.loads(entry.read_text())["data"]["headers"] != document["data"]["headers"]


def test_a_version_of_5000_digits_is_one_line_not_an_internal_error(
    index_server, provision_bin: str, tmp_path: Path
) -> None:
    """packaging takes `==<5000 digits>` as text and fails where it compares it (int() stops at 4300 digits): exit 3,
    `internal error: ValueError`. In --from it is a usage error; in the Requires-Dist an index serves, an index error."""
    big = "1" * 5000
    default = serve_sglang(index_server)
    given = new(provision_bin, default, tmp_path / "x.toml", "--from", f"sglang=={big}")
    assert given.returncode == 2 and "internal error" not in given.stderr and len(given.stderr) < 400, (
        given.stderr
    )
    assert given.stderr.startswith("error: --from 'sglang==1111") and "no version" in given.stderr, (
        given.stderr
    )
    default.add("sglang", "0.5.24", tag=SGLANG_TAG, requires=(f"torch=={big}",))
    served = new(provision_bin, default, tmp_path / "y.toml", "--from", "sglang==0.5.24")
    assert served.returncode == 5 and "internal error" not in served.stderr and len(served.stderr) < 600, (
        served.stderr
    )
    assert "Requires-Dist torch == a version of 5000 characters" in served.stderr
    assert not (tmp_path / "x.toml").exists() and not (tmp_path / "y.toml").exists()
