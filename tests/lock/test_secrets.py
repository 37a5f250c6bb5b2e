"""Secrets in index URLs and NCCL settings never reach uv's command line (which every local user can read), the -v
lines, or an error: a password holding an unencoded /, # or ?, a token in a URL's query or path, user:password@host
without a scheme, the value of a refused --nccl-env."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import tiny
from launch import run_provision

from provision import log
from provision.stacks import urls, uvtool

PY = f"{sys.version_info[0]}.{sys.version_info[1]}"


def run(
    provision_bin: str, tmp_path: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    tiny.profile(tmp_path)
    variables = {
        **os.environ,
        "PROVISION_HOME": str(tmp_path / "home"),
        "PROVISION_PROFILES": str(tmp_path),
        "PROVISION_HTTP_TIMEOUT": "5",
        **(env or {}),
    }
    return run_provision(*args, timeout=300, env=variables)


@pytest.mark.parametrize(
    "password", ["pa/ss-w0rd-secret", "pa#ss-w0rd-secret", "pa?ss-w0rd-secret", "p@ss/w#o?rd-secret"]
)
def test_a_password_with_unencoded_url_characters_reaches_uv_only_by_variable(
    provision_bin: str, tmp_path: Path, index_server, password: str
) -> None:
    served = tiny.index(index_server)
    served.password = password
    url = served.url.replace("http://", f"http://alice:{password}@")
    done = run(
        provision_bin,
        tmp_path,
        "-v",
        "lock",
        "tiny",
        "--python",
        PY,
        "-o",
        str(tmp_path / "pylock.tiny.toml"),
        env={"PROVISION_INDEX_DEFAULT": url},
    )
    assert done.returncode == 0, done.stderr
    secret = password.split("/")[-1].split("#")[-1].split("?")[-1]
    for shown in (done.stdout, done.stderr, (tmp_path / "pylock.tiny.toml").read_text()):
        assert password not in shown and secret not in shown, shown
    # -v showed uv's command line, without the user info
    assert "$ " in done.stderr and "alice" not in done.stderr


def test_a_token_in_an_index_path_stays_off_uvs_command_line_and_the_log(
    provision_bin: str, tmp_path: Path, index_server
) -> None:
    token = "AbCdEf0123456789XyZ0123"
    served = tiny.index(index_server, name=token)  # the URL's path carries the token: /<token>/simple
    done = run(
        provision_bin,
        tmp_path,
        "-v",
        "lock",
        "tiny",
        "--python",
        PY,
        "-o",
        str(tmp_path / "pylock.tiny.toml"),
        env={"PROVISION_INDEX_DEFAULT": served.url},
    )
    assert done.returncode == 0, done.stderr
    assert token not in done.stderr and "$ " in done.stderr, done.stderr


def test_a_query_token_is_never_printed_when_the_index_fails(provision_bin: str, tmp_path: Path) -> None:
    token = "Sup3rS3cretQueryValue"
    done = run(
        provision_bin,
        tmp_path,
        "-v",
        "lock",
        "tiny",
        "--python",
        PY,
        "-o",
        str(tmp_path / "out.toml"),
        "--index",
        f"default=http://127.0.0.1:9/simple?token={token}",
    )
    assert done.returncode != 0 and "Traceback" not in done.stderr
    assert token not in done.stderr + done.stdout, done.stderr


def test_credentials_without_a_scheme_are_not_printed_in_the_index_usage_error(
    provision_bin: str, tmp_path: Path
) -> None:
    for value in ("alice:hunter2secret@mirror.example", "x=alice:hunter2secret@mirror.example"):
        done = run(provision_bin, tmp_path, "lock", "tiny", "--index", value)
        assert done.returncode == 2 and "hunter2secret" not in done.stderr and "--index" in done.stderr, (
            done.stderr
        )


@pytest.mark.parametrize(
    "setting",
    [
        "NCCL_PASSWORD:hunter2secret",
        "NCCL_NVLS_ENABLE=hunter2secret",
        "NCCL_ALGO=nvls;token=hunter2secret",
        "NCCL_IB_HCA hunter2secret",
        "hunter2secret",
    ],
)
def test_a_refused_nccl_env_never_prints_its_value(provision_bin: str, tmp_path: Path, setting: str) -> None:
    done = run(provision_bin, tmp_path, "bench", "allreduce", "--nccl-env", setting)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert "hunter2secret" not in done.stderr + done.stdout, done.stderr


def test_the_rule_for_secrets_in_urls() -> None:
    cases = {
        "https://alice:pa/ss@host/simple": "https://****@host/simple",
        "error: http://h/simple?token=Sup3rS3cret&b=2 failed": "error: http://h/simple?token=****&b=**** failed",
        "https://h/t/AbCdEf0123456789XyZ0123/simple/": "https://h/t/****/simple/",
        "https://h/ghp_abc123/simple": "https://h/****/simple",
        "Caching credentials for `http://h:8/AbCdEf0123456789XyZ0123`": "Caching credentials for `http://h:8/****`",
    }
    for text, shown in cases.items():
        assert log.redact(text) == shown
    kept = [
        "https://h/simple/nvidia-cuda-runtime-cu12/",  # a project name, a version, a wheel, a content hash: no secret
        "https://h/packages/ab/cd/0123456789abcdef0123456789abcdef/torch-2.9.0+cu130-cp312-cp312-manylinux_2_28_x86_64.whl",
    ]
    for text in kept:
        assert log.redact(text) == text
    assert urls.redact("alice:pw@host") == "****@host"
    args, env = uvtool.index_options(
        {"pytorch": "https://bob:p/w@h/whl?token=Tok3nValue", "default": "https://h/simple"}
    )
    # a variable: only the owner reads it
    assert args == [] and env["UV_INDEX"] == "pytorch=https://h/whl?token=Tok3nValue"
    assert env["UV_INDEX_PYTORCH_USERNAME"] == "bob" and env["UV_INDEX_PYTORCH_PASSWORD"] == "p/w"
    assert env["UV_DEFAULT_INDEX"] == "default=https://h/simple"


def test_a_query_token_in_an_index_option_is_shown_as_stars_in_rebuild_and_the_lock(
    provision_bin: str, tmp_path: Path, index_server
) -> None:
    token = "T0kenQueryValue"
    served = tiny.index(index_server)
    out = tmp_path / "pylock.tiny.toml"
    done = run(
        provision_bin,
        tmp_path,
        "lock",
        "tiny",
        "--json",
        "--python",
        PY,
        "-o",
        str(out),
        "--index",
        f"default={served.url}?token={token}",
    )
    assert done.returncode == 0, done.stderr
    import json

    rebuild = json.loads(done.stdout)["rebuild"]
    header = out.read_text().splitlines()[0]
    assert token not in rebuild and "token=****" in rebuild, rebuild
    assert token not in header and "token=****" in header, header
    assert token not in out.read_text()
