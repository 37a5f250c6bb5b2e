"""A profile's [baseline] command names {model}, {tp_size} and {result}: provision's weight-free model folder, the TP
size the GPUs allow, and a fresh file the command writes its JSON result to (SGLang's one-batch benchmark appends
JSON lines to `--result-filename`), read for `json_key` instead of stdout."""

from __future__ import annotations

import json
from pathlib import Path

import tiny

from provision.checks import dummy_model

# what sglang.benchmark.one_batch does with --result-filename: append a JSON line per measurement; stdout says other
# things, a JSON-looking decoy included, which must not be read when the command names {result}
SCRIPT = """
import json, pathlib, sys
result, model, tp = sys.argv[1], pathlib.Path(sys.argv[2]), sys.argv[3]
config = json.loads((model / "config.json").read_text())
assert (model / "tokenizer.json").is_file()
with open(result, "a") as out:
    out.write(json.dumps({"batch_size": 1, "median_decode_throughput": 82.5, "vocab": config["vocab_size"], "tp": tp}) + "\\n")
print('{"median_decode_throughput": 1.0}')
"""


def test_model_tp_size_and_result_file_are_filled_and_the_figure_read_from_the_file(
    tmp_path: Path, index_server, provision_bin: str
) -> None:
    tool = tiny.make_tool(tmp_path, provision_bin, tiny.index(index_server))
    tiny.profile(
        tool.profiles,
        "sg",
        extra=(
            f'[baseline]\ncommand = ["python", "-c", {json.dumps(SCRIPT)}, "{{result}}", "{{model}}", "{{tp_size}}"]\n'
            'json_key = "median_decode_throughput"\nunit = "tok/s"\n'
        ),
    )
    tool.create("sg")
    ran = json.loads(tool("baseline", "sg", "--runs", "2", "--json").stdout)
    assert ran["figures"] == [82.5, 82.5]  # the file's line each time, never stdout's decoy (1.0)
    assert ran["details"]["vocab"] == dummy_model.VOCAB and ran["details"]["tp"] == "1"  # no GPU here: TP 1
    build = Path(tool.envs()["sg"]["path"])
    assert json.loads((build / "dummy-model" / "config.json").read_text()) == dummy_model.CONFIG
    assert not list(build.glob(".baseline-result.*"))  # each run's file is removed after it is read
    # a baseline killed with -9 leaves its file: the next run removes it (its pid is gone), not a live one's
    import os
    import subprocess

    gone = subprocess.Popen(["true"])
    gone.wait()
    (build / f".baseline-result.{gone.pid}.jsonl").write_text("{}\n")
    (build / f".baseline-result.{os.getpid()}.jsonl").write_text("{}\n")
    tool("baseline", "sg", "--json")
    assert [p.name for p in build.glob(".baseline-result.*")] == [f".baseline-result.{os.getpid()}.jsonl"]
    model_arg = ran["command"][ran["command"].index(str(build / "dummy-model"))]
    assert model_arg == str(build / "dummy-model")


def test_a_result_file_the_command_never_wrote_is_no_figure(
    tmp_path: Path, index_server, provision_bin: str
) -> None:
    tool = tiny.make_tool(tmp_path, provision_bin, tiny.index(index_server))
    tiny.profile(
        tool.profiles,
        "sg",
        extra=(
            '[baseline]\ncommand = ["python", "-c", "print(\'{\\"x\\": 5}\')", "{result}"]\njson_key = "x"\n'
        ),
    )
    tool.create("sg")
    done = tool("baseline", "sg", check=False)
    assert done.returncode == 7 and "no figure in its output" in done.stderr, done.stderr
