"""What `provision report` answers, as data every judging module shares: a gate's verdict (`Gate`), the versions a stack
is judged by (`Versions`), a target and its gates (`Target`), one machine judged (`MachineReport`). The modules that
judge (gates, features, kernels, lockgates, lockscan, ...) import these and not each other."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from packaging.specifiers import SpecifierSet
from packaging.version import InvalidVersion, Version

from provision import status as statuses
from provision.machine.facts import MachineFacts
from provision.status import Status

if TYPE_CHECKING:
    from provision.envs.records import KeptFile
    from provision.report.wheels import JudgedWheel
    from provision.stacks.profiles import Profile


@dataclass(frozen=True, kw_only=True)
class Gate:
    id: str
    title: str
    status: Status  # pass, warn, fail, skip, info
    reason: str
    source: str = ""
    kind: str = (
        "stack"  # "stack" gates decide the verdict; "feature" gates say what to leave off and what to turn on
    )
    turn_on: str = (
        ""  # a feature gate that passes with this: the variable or flag that turns the feature on here
    )


@dataclass(frozen=True, kw_only=True)
class Versions:
    """The versions of the stack judged, by canonical name, and where they were read: a lock's, an environment's
    installed ones, or a profile's pins (`==X`, else the lowest a `>=`/`~=` admits)."""

    found: Mapping[str, str] = dataclasses.field(default_factory=dict)
    origin: str = "profile pins"

    def of(self, name: str) -> str | None:
        return self.found.get(name)

    def named(self, name: str) -> str:
        """ "sglang 0.5.23 (lock)", or what is said when the stack does not name it."""
        version = self.of(name)
        return f"{name} {version} ({self.origin})" if version else f"no {name} version in the {self.origin}"

    @classmethod
    def of_profile(cls, profile: Profile) -> Versions:
        found = {}
        for package in profile.packages:
            bounds = [
                s.version
                for s in SpecifierSet(package.version or "")
                if s.operator in ("==", "===", ">=", "~=")
            ]
            exact = [s.version for s in SpecifierSet(package.version or "") if s.operator in ("==", "===")]
            if exact or bounds:
                found[package.name] = exact[0] if exact else min(bounds, key=_version_key)
        return cls(found=found, origin="profile pins")


def _version_key(text: str) -> Version:
    try:
        return Version(text)
    except InvalidVersion:
        return Version("0")


@dataclass(frozen=True, kw_only=True)
class Target:
    kind: str  # "profile", "lock" or "environment"
    name: str
    cuda: str
    gates: tuple[Gate, ...] = ()
    packages: tuple[JudgedWheel, ...] | None = (
        None  # a lock's CUDA wheels: the SMs found and a verdict per GPU
    )
    kept_files: tuple[KeptFile, ...] | None = None  # an environment's accepted and profile files

    @property
    def verdict(self) -> Status:
        # an info gate says something without judging: it never makes a verdict
        return (
            statuses.worst(g.status for g in self.gates if g.kind == "stack" and g.status != "info") or "skip"
        )

    @property
    def features_off(self) -> list[str]:
        return [g.id for g in self.gates if g.kind == "feature" and g.status == "fail"]

    @property
    def features_on(self) -> list[str]:
        """The features to turn on here: feature gates that pass with a variable or flag to set (`turn_on`)."""
        return [g.id for g in self.gates if g.kind == "feature" and g.status == "pass" and g.turn_on]

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "name": self.name,
            "cuda": self.cuda,
            "verdict": self.verdict,
            "features_off": self.features_off,
            "features_on": self.features_on,
            "gates": [dataclasses.asdict(g) for g in self.gates],
            **({"packages": [p.to_dict() for p in self.packages]} if self.packages is not None else {}),
            **(
                {"kept_files": [{**k.to_dict(), "origin": k.origin} for k in self.kept_files]}
                if self.kept_files is not None
                else {}
            ),
        }


@dataclass(frozen=True, kw_only=True)
class MachineReport:
    """One machine judged: its facts and a target per profile, lock and environment, in that order."""

    facts: MachineFacts
    targets: tuple[Target, ...]

    def to_dict(self) -> dict[str, Any]:
        f = self.facts
        return {
            "source": f.source,
            "driver": f.driver.version,
            "driver_cuda": f.driver.cuda,
            "gpus": [{"index": g.index, "name": g.name, "sm": g.sm} for g in f.gpus],
            "pcie_only": f.pcie_only if len(f.gpus) > 1 else None,
            "toolkits": [t.version for t in f.toolkits],
            "targets": [t.to_dict() for t in self.targets],
        }
