"""Against SGLang 0.5.23's released wheel and the transformers it pins (the network tier, cached like every real wheel
in PROVISION_TEST_CACHE): every flag provision passes to SGLang's server (the sglang-serve check) and to its one-batch
benchmark (the [baseline] `profiles new` writes) is one that release's parsers accept, read from its own source; the
weight-free model folder loads offline with transformers 5.19.0. A test that fails when SGLang renames one."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from cuobjdump import CACHE, wheel

from provision.checks import dummy_model, payload_dir
from provision.stacks import sglang_bench, sglang_flags, uvtool

pytestmark = pytest.mark.network
RELEASE = "sglang==0.5.23"


def release_sources() -> dict[str, bytes]:
    with zipfile.ZipFile(wheel(RELEASE)) as archive:
        return {n: archive.read(n) for n in archive.namelist() if sglang_bench.wanted(n)}


def flags_of(sources: dict[str, bytes]) -> set[str]:
    found: set[str] = set()
    for source in sources.values():
        tree = sglang_flags.parse(source)
        found |= sglang_flags.parser_flags(tree) if tree else set()
    return found


def test_the_baseline_profiles_new_writes_for_0_5_23() -> None:
    bench = sglang_bench.from_sources(release_sources(), None)
    assert bench.written, bench.reason
    # 0.5.23 moved it from bench_one_batch
    assert bench.command[:3] == (
        "python",
        "-m",
        "sglang.benchmark.one_batch",
    )
    assert "--batch-size" in bench.command  # and renamed --batch


def test_every_flag_the_serve_check_passes_is_in_0_5_23s_parser() -> None:
    flags = flags_of(release_sources())
    sys.path.insert(0, str(payload_dir()))
    try:
        spec = importlib.util.spec_from_file_location(
            "check_sglang_serve", payload_dir() / "check_sglang_serve.py"
        )
        assert spec and spec.loader
        payload = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(payload)
    finally:
        sys.path.remove(str(payload_dir()))
    for mock in (False, True):
        passed = {
            part.partition("=")[0]
            for part in payload.server_command("/m", 30000, 8, mock)
            if part.startswith("--")
        }
        assert passed <= flags, sorted(passed - flags)
    # the mock mode's variables are in its environment table, and its sampler's name in the source
    with zipfile.ZipFile(wheel(RELEASE)) as archive:
        environ = sglang_flags.parse(archive.read(sglang_flags.ENVIRON))
        assert environ is not None and set(payload.MOCK_ENV) <= sglang_flags.table_variables(environ)
        assert b'"token_oracle"' in archive.read(sglang_flags.SERVER_ARGS)
        # has_mock_mode's test
        assert any(n.startswith("sglang/srt/kv_canary/token_oracle/") for n in archive.namelist())


@pytest.mark.timeout(900)
def test_the_model_folder_loads_offline_with_the_transformers_sglang_pins(tmp_path: Path) -> None:
    venv = CACHE / "transformers-5.19.0-venv"
    if not (venv / "bin" / "python").exists():
        uvtool.run(["venv", str(venv), "--python", sys.executable, "--quiet"])
        uvtool.run(
            ["pip", "install", "--python", str(venv / "bin" / "python"), "--quiet", "transformers==5.19.0"],
            timeout=900,
        )
    model = dummy_model.write(tmp_path / "model")
    script = (
        "import sys; from transformers import AutoConfig, AutoTokenizer\n"
        "t = AutoTokenizer.from_pretrained(sys.argv[1]); c = AutoConfig.from_pretrained(sys.argv[1])\n"
        "ids = t.encode('Hello, w\\u00f6rld!', add_special_tokens=False)\n"
        "print(len(t), c.model_type, c.vocab_size, c.num_attention_heads, c.intermediate_size, ids, t.decode(ids))"
    )
    done = subprocess.run(
        [str(venv / "bin" / "python"), "-c", script, str(model)],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"},
    )
    assert done.returncode == 0, done.stderr[-2000:]
    words = done.stdout.split(" ", 5)
    assert words[:5] == ["259", "llama", "259", "8", "2816"], done.stdout
    assert "[72, 101, 108, 108, 111, 44, 32, 119, 195, 182, 114, 108, 100, 33] Hello, wörld!" in done.stdout
    assert sum(p.stat().st_size for p in model.iterdir()) < 64 * 1024  # tens of KB, no weights
