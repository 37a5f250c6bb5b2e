"""Attacks on the recipes' reading of the SGLang installed in a venv (commands/sglang_source.py, stacks/sglang_flags.py):
its files are whatever the venv holds. A server_args.py of 100 KB of unary minus signs ended `try --list-recipes` in
a MemoryError from Python's parser (exit 3); so did a quoted annotation nested as deep; 8 MB of one-letter statements
(under the 8 MiB bound) took 5 GB of memory and 16 s to parse. Each is now a file this does not read: the recipes are
listed without the flags it would have named, in bounded memory (the run is held to 2 GiB of address space)."""

from __future__ import annotations

import json
import resource
import subprocess
from pathlib import Path

import pytest
import tiny
from conftest import DATA
from launch import argv, environment
from test_trials import sglang_wheels
from test_try import site_of, tool_with_baseline

HOSTILE = {
    "unary": b"x = " + b"-" * 100000 + b"1\n",
    "annotation": b"class ServerArgs:\n    flag: '" + b"-" * 100000 + b"1' = 0\n",
    "statements": b"a\n" * (4 << 20),
}


@pytest.mark.parametrize("kind", sorted(HOSTILE))
def test_a_hostile_server_args_is_not_read_and_the_recipes_are_listed(
    tmp_path: Path, index_server, provision_bin: str, kind: str
) -> None:
    sglang_wheels(tiny.index(index_server))
    tool, _ = tool_with_baseline(
        tmp_path, index_server, provision_bin, "sg", packages='alpha = "==1.0"\nsglang = "==0.5.9"'
    )
    (site_of(tool, "sg") / "sglang" / "srt" / "server_args.py").write_bytes(HOSTILE[kind])

    def bounded() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))

    done = subprocess.run(
        argv(("try", "--list-recipes", "sg", "--json")),
        capture_output=True,
        text=True,
        timeout=120,
        env=environment(tool.env({"PROVISION_NVML_REPLAY": str(DATA / "h200.nvml.json")})),
        preexec_fn=bounded,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    listed = {r["id"]: r for r in json.loads(done.stdout)["recipes"]}
    assert listed["cuda-graph-max-bs"]["change"] is None  # no flag read from a file that was not read
