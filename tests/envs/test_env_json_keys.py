"""env.json's [env] keys are exported by shell-env into an eval: one that is not a variable name is refused."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import tiny

TOOL_WITH_ENV = True  # conftest's `tool`: a home with profile tiny served on 127.0.0.1, environment tiny made


def test_an_env_json_key_that_is_not_a_variable_name_is_refused_never_evaluated(
    tool: tiny.Tool, tmp_path: Path
) -> None:
    (build,) = (tool.home / "builds").iterdir()
    record = json.loads((build / "env.json").read_text())
    pwned = tmp_path / "pwned"
    record["env"] = {f"X=1; touch {pwned}; Y": "2"}  # a damaged (or planted) env.json in a shared HOME
    (build / "env.json").write_text(json.dumps(record))
    evaluated = subprocess.run(
        ["bash", "-c", f'eval "$({tool.binary} shell-env tiny)"'],
        capture_output=True,
        text=True,
        timeout=60,
        env=tool.env(),
    )
    assert not pwned.exists(), "a key of env.json ran as shell code"
    lines = evaluated.stderr.strip().splitlines()
    assert lines[-2].startswith(f"error: {build / 'env.json'}: key 'env' holds 'X=1; touch"), evaluated.stderr
    assert "not a variable name" in lines[-2] and lines[-1].startswith("hint: fix or remove that key"), (
        evaluated.stderr
    )
    for args in (("shell-env", "tiny"), ("run", "tiny", "--", "true")):
        done = tool(*args, check=False)
        assert done.returncode == 7 and "Traceback" not in done.stderr and done.stdout == "", done.stderr


def test_an_env_json_value_with_a_nul_byte_is_refused_not_a_traceback(tool: tiny.Tool) -> None:
    (build,) = (tool.home / "builds").iterdir()
    record = json.loads((build / "env.json").read_text())
    record["env"] = {"CUDA_HOME": "/opt/cuda\u0000x"}
    (build / "env.json").write_text(json.dumps(record))
    for args in (("run", "tiny", "--", "true"), ("shell-env", "tiny")):
        done = tool(*args, check=False)
        assert done.returncode == 7 and "Traceback" not in done.stderr, done.stderr
        assert "key 'env' holds CUDA_HOME with a NUL byte in its value" in done.stderr, done.stderr
