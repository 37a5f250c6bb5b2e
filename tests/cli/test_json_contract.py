"""Every JSON document the commands print holds only keys docs/json.md names for that command: each command is run
for real (a tiny environment from an index on 127.0.0.1, a recorded NVML reading) and every key of its document, at
any depth, must appear quoted in the command's section of docs/json.md (or in the error document's)."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path

import tiny
from conftest import DATA, ROOT

DOC = (ROOT / "docs" / "json.md").read_text()
# Objects whose keys are data (labels, compute capabilities, variable and index names, per-check details), not schema.
DATA_KEYED = {
    "cubin",
    "ptx",
    "lto",
    "require",
    "variant",
    "env",
    "indexes",
    "unreachable",
    "details",
    "modules",
}
# Sections that say "check results as below" or "{drift details}": their keys are the check section's too.
# `envs` shows each environment's last baseline run, as `baseline --json` documents it (with its drift, as `check`).
ALSO = {
    "`provision create --json`": ("`provision check --json`",),
    "`provision restore NAME --json`": ("`provision check --json`",),
    "`provision trials --json`": ("`provision try NAME LABEL --json`",),
    "`provision envs --json`": ("`provision baseline --json`", "`provision check --json`"),
}


def section(heading: str) -> set[str]:
    """The quoted words of the section whose `## ` heading holds `heading`."""
    (text,) = [part for part in DOC.split("\n## ") if heading in part.splitlines()[0]]
    return set(re.findall(r'"([A-Za-z_][A-Za-z0-9_-]*)"', text))


def keys(document: object, parent: str = "") -> Iterator[str]:
    if isinstance(document, dict):
        for key, value in document.items():
            if parent not in DATA_KEYED:
                yield key
            yield from keys(value, key)
    elif isinstance(document, list):
        for value in document:
            yield from keys(value, parent)


def undocumented(document: object, heading: str) -> set[str]:
    # every command's document may carry `not_utf8`, documented once
    everywhere = ("Bytes that are not UTF-8", *ALSO.get(heading, ()))
    documented = section(heading).union(*(section(also) for also in everywhere))
    return set(keys(document)) - documented - {"schema_version"}


def test_every_key_printed_is_documented(tmp_path: Path, index_server) -> None:
    served = tiny.index(index_server)
    tool = tiny.make_tool(tmp_path, "", served)
    tiny.profile(
        tool.profiles,
        "measured",
        extra='[baseline]\ncommand = ["python", "-c", "print(1.5)"]\npattern = "([0-9.]+)"\n',
    )
    python = f"{sys.version_info.major}.{sys.version_info.minor}"
    replay = {"PROVISION_NVML_REPLAY": str(DATA / "h200.nvml.json")}
    lock = tmp_path / "pylock.tiny.toml"
    venv = tmp_path / "venv"
    runs: list[tuple[str, tuple[str, ...], dict[str, str]]] = [
        ("`provision probe --json`", ("probe", "--json"), replay),
        ("`provision scan --json`", ("scan", "--json", sys.executable), {}),
        (
            "`provision report --json`",
            (
                "report",
                "--machine",
                str(ROOT / "docs/machines/h200.probe.json"),
                "--profile",
                str(ROOT / "profiles/cu130.toml"),
                "--json",
            ),
            {},
        ),
        ("`provision profiles --json`", ("profiles", "--json"), {}),
        ("`provision lock --json`", ("lock", "tiny", "--python", python, "-o", str(lock), "--json"), {}),
        (
            "`provision create --json`",
            ("create", "tiny", "--python", sys.executable, "--lock", str(lock), "--json"),
            replay,
        ),
        (
            "`provision create --json`",
            (
                "create",
                "tiny",
                "--name",
                "two",
                "--python",
                sys.executable,
                "--lock",
                str(lock),
                "--no-checks",
                "--json",
            ),
            replay,
        ),
        (
            "`provision upgrade --json`",
            ("upgrade", "measured", "--from", "tiny", "--baseline-from", "measured", "--runs", "3", "--json"),
            replay,
        ),
        ("`provision envs --json`", ("envs", "--json"), {}),
        ("`provision switch|rollback --json`", ("switch", "tiny", "--json"), {}),
        ("`provision switch|rollback --json`", ("rollback", "--json"), {}),
        ("`provision check --json`", ("check", "tiny", "--json"), replay),
        ("`provision restore NAME --json`", ("restore", "tiny", "--dry-run", "--json"), replay),
        (
            "`provision try NAME LABEL --json`",
            ("try", "tiny", "--recipe", "torch-symm-mem", "--json"),
            replay,
        ),
        ("`provision trials --json`", ("trials", "--json"), {}),
        ("`provision try --list-recipes NAME --json`", ("try", "--list-recipes", "tiny", "--json"), replay),
        ("`provision adopt --json`", ("adopt", "bare", str(venv), "--no-lock", "--json"), {}),
        ("`provision adopt --json`", ("remove", "bare", "--json"), {}),
        ("`provision gc --json`", ("gc", "--json"), {}),
        ("## Errors", ("switch", "nope", "--json"), {}),
    ]
    from provision.stacks import uvtool

    uvtool.run(["venv", str(venv), "--python", sys.executable, "--quiet", "--no-project"])
    problems = {}
    for heading, argv, env in runs:
        done = tool(*argv, check=False, env=env)
        assert done.returncode in (0, 1, 7) and done.stdout.strip(), (
            argv,
            done.returncode,
            done.stderr[-2000:],
        )
        document = json.loads(done.stdout)
        assert document["schema_version"] == 1, argv
        extra = undocumented(document, heading.removeprefix("## "))
        if extra:
            problems[" ".join(argv[:2])] = sorted(extra)
    assert not problems, f"keys printed but not in docs/json.md: {problems}"
