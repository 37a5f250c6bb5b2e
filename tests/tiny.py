"""A one-package stack for the tests of names, state and faults: a profile file and an index on 127.0.0.1 that make an
environment in about a second with the real uv."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

from launch import popen_provision, run_provision
from wheelhouse import Index, IndexServer

PY = sys.executable


def index(server: IndexServer, name: str = "tiny") -> Index:
    served = server.index(name)
    served.add("alpha", "1.0")
    served.add("alpha", "2.0")
    served.add("beta", "1.0")
    return served


def profile(folder: Path, name: str = "tiny", packages: str = 'alpha = "==1.0"', extra: str = "") -> Path:
    path = folder / f"{name}.toml"
    path.write_text(
        f'schema = 1\nname = "{name}"\ncuda = "13.0"\n[packages]\n{packages}\n'
        f'[checks]\nrequired = ["imports"]\n{extra}'
    )
    return path


class Tool:
    """provision (launch.run_provision) with its home set and, when given, its profiles folder and default index."""

    def __init__(
        self, binary: str, home: Path, profiles: Path | None = None, served: Index | None = None
    ) -> None:
        self.binary, self.home, self.profiles, self.served = binary, home, profiles, served

    def env(self, extra: Mapping[str, str | None] | None = None) -> dict[str, str | None]:
        mine = {"PROVISION_HOME": str(self.home)}
        if self.profiles:
            mine["PROVISION_PROFILES"] = str(self.profiles)
        if self.served:
            mine["PROVISION_INDEX_DEFAULT"] = self.served.url
        return {**mine, **(extra or {})}

    def __call__(
        self, *args: str, check: bool = True, env: Mapping[str, str | None] | None = None
    ) -> subprocess.CompletedProcess[str]:
        return run_provision(*args, check=check, env=self.env(env))

    def popen(self, *args: str, env: Mapping[str, str | None] | None = None) -> subprocess.Popen[str]:
        return popen_provision(*args, env=self.env(env))

    def create(
        self, profile_name: str = "tiny", *args: str, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        return self("create", profile_name, "--python", PY, *args, check=check)

    def envs(self) -> dict[str, dict]:
        return {e["name"]: e for e in json.loads(self("envs", "--json").stdout)["environments"]}

    def builds(self) -> list[str]:
        return (
            sorted(p.name for p in (self.home / "builds").iterdir())
            if (self.home / "builds").exists()
            else []
        )


def make_tool(tmp_path: Path, provision_bin: str, served: Index, *extra: tuple[str, str]) -> Tool:
    """A Tool over a home in tmp_path, with profile `tiny` and each (name, packages) of `extra`, served by `served`."""
    profiles = tmp_path / "profiles"
    profiles.mkdir()
    profile(profiles)
    for name, packages in extra:
        profile(profiles, name, packages)
    return Tool(provision_bin, tmp_path / "home", profiles, served)


def tool_with_env(tmp_path: Path, provision_bin: str, served: Index) -> Tool:
    """make_tool, with the environment `tiny` already built (no checks): what hostile-file tests start from."""
    made = make_tool(tmp_path, provision_bin, served)
    made.create("tiny", "--no-checks")
    return made


def build_of(tool: Tool) -> Path:
    """The one build folder of the tool's home (a test that made one environment)."""
    (build,) = (tool.home / "builds").iterdir()
    return build
