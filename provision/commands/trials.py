"""`provision trials [NAME]...`: the ledger of what was tried, one row per trial (every environment's, or those
named), and with several environments a matrix: each label once, each environment's verdict beside it. Also
`provision try --list-recipes NAME`: which recipes apply to NAME here, and why not the others."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from provision.commands import recipes
from provision.envs import ledger
from provision.envs.home import Home
from provision.envs.ledger import Trial


@dataclass(frozen=True, kw_only=True)
class Ledger:
    """Trials of the environments asked for, each environment's in the order they ran."""

    names: tuple[str, ...]
    trials: tuple[Trial, ...]

    def labels(self) -> list[str]:
        """Every label once, in the order first tried."""
        return list(dict.fromkeys(t.label for t in self.trials))

    def latest(self, name: str, label: str) -> Trial | None:
        """The last trial of `label` on `name`."""
        return next((t for t in reversed(self.trials) if t.name == name and t.label == label), None)

    def to_dict(self) -> dict[str, object]:
        return {"trials": [t.to_dict() for t in self.trials]}


def trials(home: Home, names: Sequence[str] = ()) -> Ledger:
    """The ledger of `names` (every environment with trials, when none are named)."""
    chosen = list(dict.fromkeys(names)) or home.names()
    found: list[Trial] = []
    shown: list[str] = []
    for name in chosen:
        recorded = ledger.read(home.build_of(name))
        if recorded or names:
            shown.append(name)
        found += recorded
    return Ledger(names=tuple(shown), trials=tuple(found))


@dataclass(frozen=True, kw_only=True)
class RecipeList:
    name: str
    sglang: str | None
    fits: tuple[recipes.Fit, ...]

    def to_dict(self) -> dict[str, object]:
        return {"name": self.name, "sglang": self.sglang, "recipes": [f.to_dict() for f in self.fits]}


def list_recipes(home: Home, name: str) -> RecipeList:
    """Every recipe on NAME: the change it makes with the SGLang installed there, or why it does not apply."""
    from provision.commands import sglang_source
    from provision.envs import records
    from provision.machine import probe

    build = home.build_of(name)
    venv = records.read(build).venv_path(build).resolve()
    sglang = sglang_source.read(venv)
    return RecipeList(
        name=name,
        sglang=sglang.version if sglang else None,
        fits=tuple(recipes.fits(venv, sglang, probe.probe())),
    )
