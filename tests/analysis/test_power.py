"""Design power: parity with statsmodels and textbook sample sizes."""

from __future__ import annotations

import math

import pytest
from statsmodels.stats.power import NormalIndPower
from statsmodels.stats.proportion import proportion_effectsize

from multiverse.analysis import cases_needed, design_power, detectable_difference
from multiverse.errors import InputError


def _rate_for_h(baseline: float, h: float) -> float:
    """The rate p2 with 2 asin(sqrt(p2)) - 2 asin(sqrt(baseline)) = h."""
    return math.sin(math.asin(math.sqrt(baseline)) + h / 2) ** 2


@pytest.mark.parametrize("h, n", [(0.2, 392), (0.5, 63), (0.8, 25)])
def test_cohen_textbook_sample_sizes(h, n):
    # Cohen (1988), Table 6.4.1: n per sample for the difference between two proportions,
    # two-sided alpha 0.05, power 0.80, small/medium/large h.
    assert cases_needed(_rate_for_h(0.5, h) - 0.5, 0.5) in (n, n + 1)
    assert NormalIndPower().solve_power(effect_size=h, alpha=0.05, power=0.8) == pytest.approx(n, abs=0.6)


def test_cases_needed_matches_statsmodels():
    for baseline, diff in [(0.8, -0.1), (0.3, 0.15), (0.9, -0.05), (0.5, 0.2)]:
        h = abs(proportion_effectsize(baseline + diff, baseline))
        expected = math.ceil(NormalIndPower().solve_power(effect_size=h, alpha=0.05, power=0.8))
        assert cases_needed(diff, baseline) == expected
    # One-sided and unequal groups go through unchanged.
    h = proportion_effectsize(0.7, 0.6)
    expected = NormalIndPower().solve_power(effect_size=h, alpha=0.01, power=0.9, ratio=2.0,
                                            alternative="larger")
    got = cases_needed(0.1, 0.6, alpha=0.01, power=0.9, ratio=2.0, alternative="larger")
    assert got == math.ceil(expected)


def test_detectable_difference_inverts_cases_needed():
    h = NormalIndPower().solve_power(nobs1=120, alpha=0.05, power=0.8)
    assert detectable_difference(120, 0.8) == pytest.approx(0.8 - _rate_for_h(0.8, -h))
    assert detectable_difference(120, 0.8, direction="higher") == pytest.approx(_rate_for_h(0.8, h) - 0.8)
    # Toward 0.5 the same h is a larger difference: the default is the conservative side.
    assert detectable_difference(120, 0.8) > detectable_difference(120, 0.8, direction="higher")
    d = detectable_difference(200, 0.7)
    h = abs(proportion_effectsize(0.7 - d, 0.7))
    achieved = NormalIndPower().power(effect_size=h, nobs1=200, alpha=0.05)
    assert achieved == pytest.approx(0.8, abs=1e-4)
    # statsmodels solves for h to about 1e-5 in power, so the round trip may need one case more.
    assert cases_needed(-d, 0.7) in (200, 201)
    assert math.isnan(detectable_difference(5, 0.98, direction="higher"))


def test_more_cases_detect_smaller_differences():
    sizes = [30, 120, 480, 1920]
    diffs = [detectable_difference(n, 0.75) for n in sizes]
    assert diffs == sorted(diffs, reverse=True)
    assert diffs[0] / diffs[-1] > 6  # roughly sqrt(64) = 8 away from the bounds


def test_design_power_report():
    report = design_power(cases=120, cases_per_cell=5, baseline_rate=0.8)
    assert "independent proportions" in report["assumption"] and "conservative" in report["assumption"]
    scopes = {c["scope"]: c for c in report["comparisons"]}
    assert scopes["all cases"]["n_per_group"] == 120
    assert scopes["all cases"]["detectable_difference"] == pytest.approx(detectable_difference(120, 0.8))
    assert scopes["one cell"]["detectable_difference"] > scopes["all cases"]["detectable_difference"]
    needed = {row["difference"]: row["n_per_group"] for row in report["cases_needed"]}
    assert needed[0.1] == cases_needed(-0.1, 0.8)
    assert needed[0.05] > needed[0.1] > needed[0.2]


@pytest.mark.parametrize("baseline", [0.8, 0.3, 0.6])
def test_design_power_reports_both_directions_and_says_which_is_which(baseline):
    from statsmodels.stats.power import NormalIndPower
    from statsmodels.stats.proportion import proportion_effectsize

    report = design_power(cases=60, baseline_rate=baseline)
    entry = report["comparisons"][0]
    assert entry["direction"] == ("lower" if baseline >= 0.5 else "higher")
    assert entry["detectable_difference"] == pytest.approx(entry["detectable"][entry["direction"]])
    for way, d in entry["detectable"].items():
        other = baseline - d if way == "lower" else baseline + d
        # Each direction's rate is detected with the asked-for power (statsmodels, independently).
        got = NormalIndPower().power(abs(proportion_effectsize(other, baseline)), nobs1=60, alpha=0.05)
        assert got == pytest.approx(0.8, abs=1e-6), (way, d)
    # One effect size is a larger change toward 0.5: the two directions differ.
    assert entry["detectable"]["lower"] != pytest.approx(entry["detectable"]["higher"], abs=1e-3)
    assert {row["direction"] for row in report["cases_needed"]} == {entry["direction"]}


def test_design_power_says_when_one_direction_leaves_the_rates():
    entry = design_power(cases=10, baseline_rate=0.98)["comparisons"][0]
    assert entry["detectable"]["higher"] is None and entry["detectable"]["lower"] > 0.2


def test_rates_outside_0_1_are_input_errors():
    with pytest.raises(InputError, match="baseline_rate"):
        detectable_difference(100, 1.2)
    with pytest.raises(InputError, match="baseline_rate \\+ diff"):
        cases_needed(0.3, 0.8)
    with pytest.raises(InputError, match="diff"):
        cases_needed(0.0, 0.5)


def test_too_few_cases_to_detect_anything_is_said_not_nan():
    # 3 per group: even the largest possible change from 0.8 (to 0) is too small an effect.
    report = design_power(cases=36, cases_per_cell=3, baseline_rate=0.8)
    cell = report["comparisons"][1]
    assert cell["detectable_difference"] is None
    needed = cases_needed(-0.8, 0.8)
    assert needed > 3 and f"needs {needed} per group" in cell["note"]
    # at that many per group, the extreme change is detectable again, and by no smaller n
    assert detectable_difference(needed, 0.8) <= 0.8 + 1e-12
    assert math.isnan(detectable_difference(needed - 1, 0.8))
    for baseline in (0.0, 0.3, 0.5, 1.0):
        for n in (1, 2, 3, 5, 36):
            entry = design_power(cases=n, baseline_rate=baseline)["comparisons"][0]
            value = entry["detectable_difference"]
            assert (value is None) == ("note" in entry)
            assert value is None or (0 < value <= 1 and not math.isnan(value))


def test_power_command_prints_no_nan(tmp_path, capsys):
    from conftest import REPO

    from multiverse.cli import main

    for baseline in ("0.8", "0.5", "0.3"):
        assert main(["power", str(REPO / "specs" / "local-llm.yaml"), "--baseline", baseline]) == 0
        out = capsys.readouterr().out
        assert "nan" not in out.lower() and "no difference is detectable with 2 per group" in out
