"""The variables an environment runs with: its profile's [env] filled in for its build and this machine's GPUs,
and what puts its venv first (`provision run`, `provision shell-env`)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from provision.envs import records
from provision.envs.home import Home, site_packages
from provision.envs.records import fill_env as fill_env  # defined beside EnvTemplate, which it fills
from provision.errors import EnvError

if TYPE_CHECKING:
    from provision.machine.facts import Gpu
    from provision.stacks.profiles import Profile


def resolve_env(
    template: dict[str, str], build: Path, gpus: Sequence[Gpu] | None = None, nvcc: str | None = None
) -> dict[str, str]:
    """The profile's [env] with {venv}, {site}, {env} (the environment's folder) and {arch_list} (these GPUs) filled in."""
    from provision import knowledge

    if gpus is None and any("{arch_list}" in v for v in template.values()):
        gpus = machine_gpus()
    venv = build / "venv"
    arch_list = knowledge.flashinfer_arch_list(
        [g.compute_capability for g in gpus or [] if g.compute_capability], nvcc
    )
    return fill_env(
        template, env=str(build), venv=str(venv), site=str(site_packages(venv)), arch_list=arch_list
    )


def machine_gpus() -> list[Gpu]:
    """The GPUs NVML reads on this machine; none where there is no driver."""
    from provision.machine import nvml

    try:
        return list(nvml.read(nvml.load_library()).gpus)
    except Exception:  # a broken binding means no GPU to fill {arch_list} from, not a failed build
        return []


def env_template(profile: Profile) -> records.EnvTemplate | None:
    """What env.json keeps to fill the [env] again at check time: only when it names the machine's GPUs."""
    if not any("{arch_list}" in v for v in profile.env.values()):
        return None
    return records.EnvTemplate(env=dict(profile.env), nvcc=profile.compiler_cuda() or profile.cuda)


def venv_environment(home: Home, name: str | None) -> tuple[str, str, dict[str, str]]:
    """(the name, what goes first on PATH, the variables) that put environment `name` (the active one by default)
    first: PATH, VIRTUAL_ENV, its [env]. Where its profile laid out a toolkit ({env}/cuda), that bin/ comes first: with
    CUDA_HOME the environment's, `nvcc` found the system's (12.8 beside the environment's 13.0)."""
    name = name or home.active()
    if name is None:
        raise EnvError("no environment is active", "make one with provision create PROFILE, or name one")
    build = home.build_of(name)
    record = records.read(build)
    venv = record.venv_path(build)
    if not (venv / "bin" / "python").exists():  # else PATH would fall through to the system's python
        raise EnvError(
            f"environment {name!r} has no python at {venv / 'bin' / 'python'} (its venv is gone)",
            f"rebuild it: provision create PROFILE --name {name} --replace, or provision remove {name}",
        )
    toolkit = build / "cuda" / "bin"  # envs/toolkit_home.py lays it out (create, for a profile's [toolkit])
    head = os.pathsep.join([*([str(toolkit)] if toolkit.is_dir() else []), str(venv / "bin")])
    variables = {"VIRTUAL_ENV": str(venv), "PATH": f"{head}{os.pathsep}{os.environ.get('PATH', '')}"}
    variables.update(record.env)
    return name, head, variables
