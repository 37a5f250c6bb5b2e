"""Profiles: the shipped ones load, and every mistake is one short error naming file, key and what is expected."""

from __future__ import annotations

from pathlib import Path

import pytest
from launch import run_provision

from provision.errors import ProfileError
from provision.stacks import profiles

GOOD = """schema = 1
name = "t"
cuda = "13.0"
[indexes]
pytorch = "https://example.invalid/whl"
[packages]
torch = { index = "pytorch", version = ">=2.10.0.dev0", prerelease = true }
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "p.toml"
    path.write_text(text)
    return path


def test_shipped_profiles_load() -> None:
    names = {p.name: p for p in profiles.available()}
    assert {"cu128", "cu130"} <= set(names)
    cu130 = names["cu130"]
    assert cu130.cuda == "13.0" and list(cu130.indexes)[0] == "pytorch"
    assert cu130.bound_index("torch") == "pytorch" and cu130.bound_index("sgl_kernel") == "sglang"
    # filled from the GPUs at create and check time
    assert cu130.env["FLASHINFER_CUDA_ARCH_LIST"] == "{arch_list}"
    assert names["cu128"].cuda == "12.8"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", "the file is empty"),
        ('schema = 1\nname = "t"\ncuda = 13.0\n[packages]\nx = {}\n', "cuda: expected a CUDA release"),
        (GOOD.replace("schema = 1", "schema = 9"), "schema: version 9 is not known"),
        (GOOD.replace('cuda = "13.0"\n', ""), "cuda: missing"),
        (GOOD + "colour = 1\n", "packages.colour: expected a table"),
        (GOOD.replace('name = "t"', 'name = "t"\ncolor = "x"'), "color: unknown key"),
        (
            GOOD.replace('index = "pytorch"', 'index = "nightly"'),
            "packages.torch.index: names index 'nightly'",
        ),
        (
            GOOD.replace(">=2.10.0.dev0", ">=>2"),
            "packages.torch.version: '>=>2' is not a valid version specifier",
        ),
        (
            GOOD.replace("prerelease = true", "prerelease = 1"),
            "packages.torch.prerelease: expected true or false",
        ),
        (GOOD.replace("[packages]", "[packages\n"), "not valid TOML"),
        (
            GOOD.replace('torch = { index = "pytorch", version = ">=2.10.0.dev0", prerelease = true }', ""),
            "packages: empty",
        ),
        (GOOD + '[checks]\nrequired = ["gpu-burn"]\n', "checks.required: unknown check 'gpu-burn'"),
        (GOOD + '[baseline]\ncommand = ["x"]\n', "baseline: give exactly one of pattern"),
        (GOOD + '[baseline]\ncommand = ["x"]\npattern = "tok"\n', "needs one capturing group"),
        (
            GOOD.replace("https://example.invalid/whl", "example.invalid"),
            "indexes.pytorch: expected an http(s)",
        ),
    ],
)
def test_bad_profiles_name_file_and_key(tmp_path: Path, text: str, expected: str) -> None:
    with pytest.raises(ProfileError) as caught:
        profiles.load_file(write(tmp_path, text))
    assert str(tmp_path / "p.toml") in caught.value.message
    assert expected in caught.value.message
    assert "\n" not in caught.value.message


def test_toml_syntax_error_names_the_line(tmp_path: Path) -> None:
    with pytest.raises(ProfileError, match="line 6"):
        profiles.load_file(write(tmp_path, GOOD.replace("[packages]", "[packages")))


def test_profile_by_path_and_by_search_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write(tmp_path, GOOD)
    assert profiles.load(str(path)).name == "t"
    (tmp_path / "mine.toml").write_text(GOOD.replace('name = "t"', 'name = "mine"'))
    monkeypatch.setenv(profiles.PROFILE_PATH_VARIABLE, str(tmp_path))
    assert profiles.load("mine").name == "mine"
    with pytest.raises(ProfileError, match="no profile named 'nope'"):
        profiles.load("nope")


def test_content_hash_changes_with_the_file(tmp_path: Path) -> None:
    first = profiles.load_file(write(tmp_path, GOOD)).content_hash
    second = profiles.load_file(write(tmp_path, GOOD + '\n[env]\nA = "1"\n')).content_hash
    assert first != second and len(first) == 64


def test_bad_profile_is_one_line_error_from_the_process(tmp_path: Path, provision_bin: str) -> None:
    path = write(tmp_path, GOOD.replace('index = "pytorch"', 'index = "nightly"'))
    done = run_provision("report", "--profile", str(path))
    assert done.returncode == 4
    lines = done.stderr.strip().splitlines()
    assert lines[0].startswith("error: ") and str(path) in lines[0] and lines[1].startswith("hint: ")
    assert "Traceback" not in done.stderr


def test_profiles_command_json(provision_bin: str) -> None:
    import json

    done = run_provision("profiles", "--json")
    doc = json.loads(done.stdout)
    assert {"cu128", "cu130"} <= {p["name"] for p in doc["profiles"]}
    assert all(p["cuda"] for p in doc["profiles"])


def test_no_shipped_file_refers_outside_the_repository() -> None:
    """What a user of the project needs to read lives in docs/: no shipped profile or machine document points at a
    folder beside the repository (`../shared/...`), and every `docs/...` file they name exists."""
    import re

    from conftest import ROOT

    shipped = [*sorted((ROOT / "profiles").glob("*.toml")), *sorted((ROOT / "docs/machines").glob("*.json"))]
    assert len(shipped) >= 5
    for path in shipped:
        text = path.read_text()
        assert "shared/" not in text and "../" not in text, path
        for named in re.findall(r"docs/[\w./-]+\.(?:md|json)", text):
            assert (ROOT / named).is_file(), (path, named)
    stable = profiles.load("cu130-stable")
    pins = {p.name: p.version for p in stable.packages}
    assert (
        pins["sglang"] == "==0.5.23" and "flashinfer-cubin" not in pins and "flashinfer" not in stable.indexes
    )
    # none past 0.6.13 on the default index
    assert "flashinfer-cubin" not in {p.name for p in profiles.load("cu130").packages}
