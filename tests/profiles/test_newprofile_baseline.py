"""`profiles new` writes a [baseline] that runs the SGLang release's own one-batch benchmark on a weight-free model,
its module path and flags read from that release's wheel by range requests (served on 127.0.0.1 in the shapes of
0.5.23 and of an older release), never guessed; `--model-path` takes the user's own folder."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from launch import run_provision
from stacks import CP

from provision.stacks import profiles

TAG = f"{CP}-{CP}-manylinux_2_34_x86_64"
REQUIRES = ("torch==2.14.1",)
# 0.5.23's shapes: server flags from annotated fields under arg_groups, the benchmark's own by add_argument
FIELDS = b"""
class ModelArgs:
    model_path: A[str, "The model's folder"]
    load_format: A[str, Arg(help="how weights load")]
    tp_size: A[int, Arg(cli_name="--tp-size", aliases=["--tensor-parallel-size"])]
    secret: A[int, Arg(no_cli=True)]
"""
ONE_BATCH = b"""
def add_cli_args(parser):
    parser.add_argument("--batch-size", type=int, nargs="+")
    parser.add_argument("--input-len", type=int, nargs="+")
    parser.add_argument("--output-len", type=int, nargs="+")
    parser.add_argument("--result-filename", type=str)
measurement_results = {"median_decode_throughput": 0.0}
"""
# an older release: sglang/bench_one_batch.py, `--batch`, every server flag by add_argument in server_args.py
OLD_SERVER = b"""
def add_cli_args(parser):
    parser.add_argument("--model-path", type=str)
    parser.add_argument("--load-format", type=str)
    parser.add_argument("--tensor-parallel-size", "--tp-size", type=int)
"""
OLD_BENCH = ONE_BATCH.replace(b'"--batch-size"', b'"--batch"')
# the members far apart, as in a real wheel
PADDING = {f"sglang/blob{i}.bin": bytes(range(256)) * 4096 for i in range(3)}


def serve(index_server, files: dict[str, bytes], *, ranges: bool = True):
    default = index_server.index("default")
    default.ranges = ranges
    default.add(
        "sglang", "0.5.23", tag=TAG, requires=REQUIRES, files={"sglang/__init__.py": b"", **PADDING, **files}
    )
    return default


def new(default, out: Path, *extra: str):
    return run_provision(
        "profiles",
        "new",
        out.stem,
        "--index",
        f"default={default.url}",
        "--from",
        "sglang==0.5.23",
        "-o",
        str(out),
        "--json",
        *extra,
        timeout=120,
        check=False,
    )


NEW_SHAPE = {
    "sglang/benchmark/one_batch.py": ONE_BATCH,
    "sglang/srt/arg_groups/fields/model.py": FIELDS,
    "sglang/srt/server_args.py": b"def add_cli_args(parser):\n    pass\n",
}


def test_the_releases_own_benchmark_is_written_with_flags_read_from_its_wheel(
    index_server, tmp_path: Path
) -> None:
    default = serve(index_server, NEW_SHAPE)
    out = tmp_path / "today.toml"
    done = new(default, out)
    assert done.returncode == 0, done.stderr
    said = json.loads(done.stdout)["baseline"]
    expected = [
        "python",
        "-m",
        "sglang.benchmark.one_batch",
        "--model-path",
        "{model}",
        "--load-format",
        "dummy",
        "--tp-size",
        "{tp_size}",
        "--batch-size",
        "1",
        "--input-len",
        "256",
        "--output-len",
        "32",
        "--result-filename",
        "{result}",
    ]
    assert said["command"] == expected and said["json_key"] == "median_decode_throughput"
    profile = profiles.load_file(out)
    assert profile.baseline is not None and list(profile.baseline.command) == expected
    assert profile.baseline.json_key == "median_decode_throughput" and profile.baseline.unit == "tok/s"
    assert "one-batch benchmark, read from its wheel" in out.read_text()
    ranged = [r for r in default.requests if "sglang-0.5.23" in r]
    assert ranged  # the wheel was read by range requests, not downloaded whole (the index serves ranges)


def test_an_older_release_gets_its_own_module_and_batch_flag(index_server, tmp_path: Path) -> None:
    default = serve(
        index_server, {"sglang/bench_one_batch.py": OLD_BENCH, "sglang/srt/server_args.py": OLD_SERVER}
    )
    done = new(default, tmp_path / "old.toml")
    command = json.loads(done.stdout)["baseline"]["command"]
    assert (
        command[:3] == ["python", "-m", "sglang.bench_one_batch"]
        and "--batch" in command
        and "--batch-size" not in command
    )


@pytest.mark.parametrize(
    ("files", "ranges", "reason"),
    [
        (NEW_SHAPE, False, "answers no range requests"),
        ({"sglang/srt/server_args.py": OLD_SERVER}, True, "has no one-batch benchmark"),
        (
            {
                **NEW_SHAPE,
                "sglang/srt/arg_groups/fields/model.py": FIELDS.replace(b"load_format", b"weights"),
            },
            True,
            "accepts no --load-format",
        ),
    ],
)
def test_no_baseline_where_the_release_cannot_be_read_or_lacks_a_flag(
    index_server, tmp_path: Path, files, ranges, reason
) -> None:
    default = serve(index_server, files, ranges=ranges)
    out = tmp_path / "x.toml"
    done = new(default, out)
    assert done.returncode == 0, done.stderr
    said = json.loads(done.stdout)["baseline"]
    assert said["command"] is None and reason in said["reason"]
    text = out.read_text()
    assert "\n[baseline]" not in text and "# no [baseline]: " in text and reason in text


def test_the_users_own_model_folder(index_server, tmp_path: Path) -> None:
    default = serve(index_server, NEW_SHAPE)
    model = tmp_path / "Llama-3-70B"
    model.mkdir()
    missing = new(default, tmp_path / "a.toml", "--model-path", str(model))
    assert (
        missing.returncode == 2
        and "no config.json there" in missing.stderr
        and not (tmp_path / "a.toml").exists()
    )
    (model / "config.json").write_text("{}")
    done = new(default, tmp_path / "b.toml", "--model-path", str(model))
    command = json.loads(done.stdout)["baseline"]["command"]
    assert command[command.index("--model-path") + 1] == str(model.resolve())
