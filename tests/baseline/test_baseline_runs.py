"""`baseline --runs N` stores every run; `compare` takes each side's latest series: median, spread, and "within
noise" when the spreads cover the difference (a single run each, as before, compares its figures)."""

from __future__ import annotations

import json
from pathlib import Path

import tiny


def with_baseline(tool: tiny.Tool, name: str, figures: Path) -> None:
    """Profile `name` whose baseline prints the next figure of `figures` (one per line) each time it runs."""
    code = (
        f"import pathlib; p = pathlib.Path({str(figures)!r}); rows = p.read_text().split(); "
        "p.write_text(' '.join(rows[1:])); print(f'decode {rows[0]} tok/s')"
    )
    tiny.profile(
        tool.profiles,
        name,
        extra=(
            f'[baseline]\ncommand = ["python", "-c", {json.dumps(code)}]\n'
            'pattern = \'decode ([\\d.]+) tok/s\'\nunit = "tok/s"\nbetter = "higher"\ntimeout = 60\n'
        ),
    )


def test_runs_are_stored_and_compare_says_within_noise(
    tmp_path: Path, index_server, provision_bin: str
) -> None:
    tool = tiny.make_tool(tmp_path, provision_bin, tiny.index(index_server))
    figures = tmp_path / "figures.txt"
    for name in ("old", "new", "fast"):
        with_baseline(tool, name, figures)
        tool.create(name)
    figures.write_text("82.0 83.5 81.0  82.5 80.9 84.0  95.0 96.0 94.5")
    ran = json.loads(tool("baseline", "old", "--runs", "3", "--json").stdout)
    assert ran["figures"] == [82.0, 83.5, 81.0]
    said = tool("baseline", "new", "--runs", "3").stdout
    assert "new: 82.50 tok/s (median of 3 runs: 82.50, 80.90, 84.00; higher is better)" in " ".join(
        said.split()
    )
    tool("baseline", "fast", "--runs", "3")
    stored = json.loads((Path(tool.envs()["old"]["path"]) / "env.json").read_text())["baselines"]
    assert [b["figure"] for b in stored] == [82.0, 83.5, 81.0] and len({b["series"] for b in stored}) == 1

    noise = json.loads(tool("compare", "old", "new", "--json").stdout)
    old, new = noise["environments"]
    assert (old["median"], old["min"], old["max"]) == (82.0, 81.0, 83.5) and new["median"] == 82.5
    assert noise["change_percent"] == round((82.5 - 82.0) / 82.0 * 100, 2) and noise["within_noise"] is True
    human = tool("compare", "old", "new", env={"COLUMNS": "200"})
    assert "new vs old: +0.6% (within noise: the spreads cover it)" in human.stdout
    assert "81.00 - 83.50" in human.stdout

    real = json.loads(tool("compare", "old", "fast", "--json").stdout)
    assert real["within_noise"] is False and real["improved"] is True
    assert "fast vs old: +15.8% (better)" in tool("compare", "old", "fast").stdout

    figures.write_text("70.0")  # one run afterwards: compare takes that run alone, as before --runs
    tool("baseline", "old")
    single = json.loads(tool("compare", "old", "fast", "--json").stdout)
    assert single["environments"][0]["figures"] == [70.0] and single["verdict"] == "cannot-tell"
    # one run cannot tell noise from a change
    assert single["within_noise"] is None and single["improved"] is None
    assert "cannot tell: fewer than 3 runs a side" in tool("compare", "old", "fast").stdout
    assert noise["verdict"] == "within-noise" and real["verdict"] == "better"


def test_the_one_rule_judges_a_hair_between_ranges_as_noise_and_a_real_change_as_one() -> None:
    """On an H100 two copies of one venv read 698.88 and 695.28 TFLOP/s with ranges 0.25 apart: the ranges did not
    meet, and `upgrade` kept the same stack as "worse". The spread (up to 9.25) covers that difference of 3.6: within
    noise. A slowdown of 42% with the same spreads, and 2% with spreads of a tenth of that, are changes."""
    from provision.checks.baseline import judge

    a = [702.5626221570817, 695.7578065640638, 698.8796151981448]
    b = [686.2567367515283, 695.2776903380791, 695.5088664394283]
    assert judge(a, b, "higher") == "within-noise" and judge(b, a, "higher") == "within-noise"
    assert judge(a, [402.71, 409.04, 354.90], "higher") == "worse"
    assert judge([100.0, 100.1, 99.9], [98.0, 98.1, 97.9], "higher") == "worse"
    assert judge([100.0, 100.1, 99.9], [98.0, 98.1, 97.9], "lower") == "better"
    assert judge([1.0, 1.0], [2.0, 2.0, 2.0], "higher") == "cannot-tell"


def test_one_run_after_a_trial_is_judged_by_the_same_noise() -> None:
    """On the H100 a baseline of 781.88, 780.71, 781.16 TFLOP/s and one run after a trial of 781.98 (0.1 above the max,
    0.82 from the median, inside the band's width of 1.17): back. 751.67 (-3.8%) is not."""
    from provision.checks.baseline import covers

    base = [781.8805028972217, 780.7079911296574, 781.1605560960229]
    assert covers(base, 781.9783463435764) and covers(base, 780.1)
    assert not covers(base, 751.6650720150747) and not covers(base, 783.0)
