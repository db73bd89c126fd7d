"""The decision rules of a claim (``rule: shown`` and ``rule: not_refuted``), their error rates under simulation,
the detectable effect each claim reports, and the warning when a rule can't be met at a run's size.

Worlds are drawn as real multiverses are: universes share a case effect and each system a transcript
effect, so universes and the two systems of a difference are positively correlated. Every draw goes
through ``mv.check`` on a ``Results``, the path a user's claims file takes. Error rates are asserted at
most 0.05 plus 2.33 Monte Carlo standard errors (a true 0.05 passes with 99% probability).

The draws come in two stages (``_two_stage``): the first half, and the second only when the first is not
already clearly inside the bound (an error rate at most 0.05 itself, a power at least 0.8 itself). Stopping
early can only pass a test the full draws might have failed, so it costs power, and little: with 400 draws
(bound: more than 30 errors fails), exact binomial sums give a failure probability of 0.4516 (one stage) and
0.4461 (two) at a true error rate of 0.075, 0.7845 and 0.7788 at 0.0875, 0.9476 and 0.9445 at 0.10; at
most 0.6 points lost anywhere, and a true 0.05 still passes with 99%. A correct rule, well inside its bound,
stops after half the draws (the power test is the mirror image: it stops early at an observed power of at
least 0.8).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable

import numpy as np
import pandas as pd
import pytest
from scipy import stats

import multiverse as mv

ALPHA = 0.05
DRAWS = int(os.environ.get("MULTIVERSE_GATE_DRAWS", "400"))


def _world(rates: np.ndarray, *, n_cases: int = 60, seed: int = 0) -> mv.Results:
    """Results whose true rate of system s (B, C) in universe u is ``rates[u, s]``."""
    rng = np.random.default_rng(seed)
    n_u, n_s = rates.shape
    latent = (math.sqrt(0.4) * rng.normal(size=(1, 1, n_cases)) + math.sqrt(0.3) * rng.normal(size=(1, n_s, n_cases))
              + math.sqrt(0.3) * rng.normal(size=(n_u, n_s, n_cases)))
    compliant = latent < stats.norm.ppf(rates)[:, :, None]
    u, s, c = np.indices(compliant.shape).reshape(3, -1)
    ids = np.array([f"u{k:02d}" for k in range(n_u)])
    table = pd.DataFrame({"universe_id": ids[u], "u": ids[u], "system": np.array(["B", "C"])[s],
                          "case_id": np.array([f"c{k:03d}" for k in range(n_cases)])[c], "status": "ok",
                          "compliant": compliant.reshape(-1)})
    return mv.Results(table, axes=["u"])


def _statuses(rates: np.ndarray, claim: dict, draws: int = DRAWS, first: int = 0, **world) -> dict[str, float]:
    found = [mv.check(_world(rates, seed=seed, **world), {"claims": [claim]}).outcomes[0].status
             for seed in range(first, first + draws)]
    return {s: found.count(s) / draws for s in ("held", "failed", "undecided", "not_refuted")}


def _two_stage(rates: np.ndarray, claim: dict, inside: Callable[[dict[str, float]], bool], **world) -> dict[str, float]:
    """The statuses' shares over the first half of the draws when ``inside`` (the test's bounds at their
    nominal values, no Monte Carlo allowance) holds on them, else over all ``DRAWS`` (the same seeds first)."""
    half = DRAWS // 2
    found = _statuses(rates, claim, draws=half, **world)
    if inside(found):
        return found
    rest = _statuses(rates, claim, draws=DRAWS - half, first=half, **world)
    return {s: (found[s] * half + rest[s] * (DRAWS - half)) / DRAWS for s in found}


def _at_most_nominal(rate: float, draws: int = DRAWS) -> bool:
    return rate <= ALPHA + 2.33 * math.sqrt(ALPHA * (1 - ALPHA) / draws)


UNCHANGED = np.full((6, 2), 0.8)
NO_REGRESSION = {"id": "nr", "candidate": "C", "baseline": "B", "in": "all"}


@pytest.mark.slow
def test_nothing_changed_fails_a_not_refuted_claim_at_most_at_alpha_and_passes_the_gate():
    rates = _two_stage(UNCHANGED, {**NO_REGRESSION, "margin": 0, "rule": "not_refuted"},
                       lambda r: r["failed"] <= ALPHA and r["held"] <= ALPHA and r["not_refuted"] >= 0.9
                       and r["undecided"] == 0)
    assert _at_most_nominal(rates["failed"]), rates
    # Nothing is shown either way: the claim passes as "not refuted", never as "held" beyond chance.
    assert rates["not_refuted"] >= 0.9 and _at_most_nominal(rates["held"]) and rates["undecided"] == 0, rates


@pytest.mark.slow
def test_nothing_changed_never_fails_a_non_inferiority_claim_beyond_alpha():
    rates = _two_stage(UNCHANGED, {**NO_REGRESSION, "margin": 0.1},
                       lambda r: r["failed"] <= ALPHA and r["not_refuted"] == 0)
    assert _at_most_nominal(rates["failed"]) and rates["not_refuted"] == 0, rates


@pytest.mark.slow
def test_a_regression_on_the_margin_is_held_at_most_at_alpha():
    # Least favourable for "in every universe": one universe exactly on the margin, the others far inside.
    rates = np.array([[0.8, 0.7]] + [[0.5, 0.95]] * 5)
    found = _two_stage(rates, {**NO_REGRESSION, "margin": 0.1}, lambda r: r["held"] <= ALPHA)
    assert _at_most_nominal(found["held"]), found


@pytest.mark.slow
def test_a_rate_on_its_bound_is_failed_by_not_refuted_at_most_at_alpha():
    found = _two_stage(np.full((6, 2), 0.7), {"id": "r", "system": "C", "rate": {"at_least": 0.7}, "in": "all",
                                              "rule": "not_refuted"}, lambda r: r["failed"] <= ALPHA)
    assert _at_most_nominal(found["failed"]), found


@pytest.mark.slow
def test_a_regression_of_the_reported_detectable_size_in_one_universe_fails_in_all_with_its_power():
    claim = {**NO_REGRESSION, "margin": 0.05, "rule": "not_refuted"}
    pilot = mv.check(_world(UNCHANGED), {"claims": [claim]}).outcomes[0]
    to_fail = pilot.detectable.to_fail
    assert 0 < to_fail < 0.5
    # One universe regressed by the margin plus the detectable effect; the five others unchanged.
    rates = UNCHANGED.copy()
    rates[0, 1] = 0.8 - 0.05 - to_fail
    found = _two_stage(rates, claim, lambda r: r["failed"] >= 0.8)
    # The figure is power's (two independent rates): paired, positively correlated cases detect at least it.
    assert found["failed"] >= 0.8 - 2.33 * math.sqrt(0.8 * 0.2 / DRAWS), found


def test_in_all_fails_when_one_universes_interval_lies_wholly_on_the_wrong_side():
    # Five universes unchanged, one where the candidate is 0.6 worse: that universe alone refutes "in every universe".
    rates = UNCHANGED.copy()
    rates[3, 1] = 0.2
    results = _world(rates, seed=7)
    for rule in ("shown", "not_refuted"):
        outcome = mv.check(results, {"claims": [{**NO_REGRESSION, "margin": 0.05, "rule": rule}]}).outcomes[0]
        assert outcome.status == "failed" and outcome.worst["universe_id"] == "u03"
    # The same universe does not break a claim over half of them.
    share = mv.check(results, {"claims": [{**NO_REGRESSION, "margin": 0.05, "in": {"share": 0.5},
                                           "rule": "not_refuted"}]}).outcomes[0]
    assert share.status != "failed"


def test_the_detectable_effect_is_powers_figure_at_the_rules_level():
    claim = {"id": "r", "system": "C", "rate": {"at_least": 0.6}, "in": {"share": 0.5}}
    outcome = mv.check(_world(UNCHANGED), {"claims": [claim, {**claim, "id": "r2"}]}).outcomes[0]
    found = outcome.detectable
    # 6 universes, k = 3: held needs the 3rd smallest p_hold times 4, failed the 4th smallest p_fail times 3;
    # two claims: Holm's strictest step halves both.
    assert found.level_hold == pytest.approx(ALPHA / (4 * 2)) and found.level_fail == pytest.approx(ALPHA / (3 * 2))
    assert found.cases == pytest.approx(60)  # one label per case: Kish's n is the cases
    expected = mv.analysis.detectable_difference(60, 0.6, alpha=ALPHA / 8, power=0.8, ratio=0, alternative="larger",
                                                 direction="higher")
    assert found.to_hold == pytest.approx(expected)
    # The same from the one-sample z-test on Cohen's h by hand.
    h = (stats.norm.ppf(1 - ALPHA / 8) + stats.norm.ppf(0.8)) / math.sqrt(60)
    assert found.to_hold == pytest.approx(math.sin(math.asin(math.sqrt(0.6)) + h / 2) ** 2 - 0.6, rel=1e-4)
    # A rank: its pairwise differences from the system's own rate, the partial conjunction over rivals included.
    rank = mv.check(_world(UNCHANGED), {"claims": [{"id": "k", "system": "C", "rank": 1, "in": "all"}]}).outcomes[0]
    assert rank.detectable.level_hold == pytest.approx(ALPHA) and rank.detectable.cases == 60
    assert 0 < rank.detectable.to_hold < 0.5 and 0 < rank.detectable.to_fail < 0.5


def test_a_claim_that_cant_be_decided_at_this_size_warns_and_one_that_can_does_not(sim_run, tmp_path):
    results = _world(UNCHANGED, n_cases=30)
    tight = mv.check(results, {"claims": [{**NO_REGRESSION, "margin": 0.05}]})
    (warning,) = tight.warnings
    assert warning.startswith("claim nr: an unchanged candidate is held with less than 80% power")
    assert "cases would detect it" in warning and "rule: not_refuted" in warning
    # A rate bound near 1 can't be shown with 30 cases whatever the rate; under not_refuted, a floor near 0 can't fail.
    high = mv.check(results, {"claims": [{"id": "h", "system": "C", "rate": {"at_least": 0.97}, "in": "all"}]})
    assert "can't be held at this run's size" in high.warnings[0]
    low = mv.check(results, {"claims": [{"id": "l", "system": "C", "rate": {"at_least": 0.02}, "in": "all",
                                         "rule": "not_refuted"}]})
    assert "can't fail at this run's size" in low.warnings[0] and low.outcomes[0].detectable.to_fail is None
    wide = mv.check(_world(UNCHANGED, n_cases=400), {"claims": [{**NO_REGRESSION, "margin": 0.15}]})
    assert wide.warnings == () and wide.outcomes[0].detectable.to_hold < 0.15
    # The CLI prints each warning as one line on stderr, and the rule's detectable effect in the table.
    path = tmp_path / "claims.yaml"
    path.write_text("claims:\n  - {id: top, system: beacon, rate: {at_least: 0.99}, in: all}\n", encoding="utf-8")
    from cli_runner import run_cli

    done = run_cli(["check", sim_run.out, "--claims", path])
    assert done.returncode == 1
    assert [line for line in done.stderr.splitlines() if line.startswith("warning: claim top: can't be held")]
    assert "detects (80%)" in done.stdout


def test_a_rate_claim_written_as_a_violation_rate_is_decided_as_its_compliance_twin(monkeypatch):
    # Ready for the spec's rate direction: "violations at most 0.3" is "compliance at least 0.7", its range 1 - x.
    from multiverse.gate import _decide

    results = _world(np.full((6, 2), 0.85), n_cases=80)
    twin = mv.check(results, {"claims": [{"id": "r", "system": "C", "rate": {"at_least": 0.7}, "in": "all"}]})
    monkeypatch.setattr(_decide, "_direction", lambda results: "violation")
    written = mv.check(results, {"claims": [{"id": "r", "system": "C", "rate": {"at_most": 0.3}, "in": "all"}]})
    a, b = twin.outcomes[0], written.outcomes[0]
    assert a.status == b.status and a.p == pytest.approx(b.p) and a.p_fail == pytest.approx(b.p_fail)
    assert b.estimate_low == pytest.approx(1 - a.estimate_high) and b.estimate_high == pytest.approx(1 - a.estimate_low)
    assert b.worst["estimate"] == pytest.approx(1 - a.worst["estimate"])
    assert a.detectable.to_hold == pytest.approx(b.detectable.to_hold)
    # A difference of violation rates is the compliance difference negated; its decision is the same.
    claim = {"id": "nr", "candidate": "C", "baseline": "B", "margin": 0.1, "in": "all"}
    violation = mv.check(results, {"claims": [claim]}).outcomes[0]
    monkeypatch.undo()
    compliance = mv.check(results, {"claims": [claim]}).outcomes[0]
    assert violation.status == compliance.status and violation.p == pytest.approx(compliance.p)
    assert violation.estimate_low == pytest.approx(-compliance.estimate_high)


def test_each_rule_reads_as_an_interval_because_the_tests_are_monotone_in_the_bound():
    # "Held when the interval's lower bound clears -m" and "failed when it lies wholly below" are the same
    # decisions as the p-values only if p_hold falls and p_fail rises as the margin grows: then the margins
    # the claim holds at are an interval's complement, and its end is the inverted test's confidence bound.
    from multiverse.analysis import difference_claim_tests

    margins = np.linspace(0.005, 0.9, 40)
    for seed in range(40):
        rng = np.random.default_rng(seed)
        results = _world(rng.uniform(0.05, 0.95, size=(3, 2)), n_cases=int(rng.integers(5, 80)), seed=seed)
        m = results.case_matrix()
        tables = [difference_claim_tests(m, a="C", b="B", margin=x) for x in margins]
        p_hold = np.array([t["p_hold"].to_numpy() for t in tables])
        p_fail = np.array([t["p_fail"].to_numpy() for t in tables])
        assert (np.diff(p_hold, axis=0) <= 1e-12).all() and (np.diff(p_fail, axis=0) >= -1e-12).all(), seed


def test_the_rules_differ_only_in_what_an_unshown_claim_is_called():
    # Held and failed are the evidence, the same under both rules; what neither shows is undecided under
    # shown (the gate does not pass) and not refuted under not_refuted (it passes).
    claims = [{"id": "nr", "candidate": "C", "baseline": "B", "margin": 0.1, "in": "all"},
              {"id": "r", "system": "C", "rate": {"at_least": 0.6}, "in": {"share": 0.5}},
              {"id": "o", "better": "C", "worse": "B", "in": "primary"}]
    seen = set()
    for seed in range(12):
        rng = np.random.default_rng(100 + seed)
        results = _world(rng.uniform(0.3, 0.95, size=(4, 2)), n_cases=int(rng.integers(10, 120)), seed=seed)
        results.primary = "u00"
        shown = mv.check(results, {"claims": claims})
        lenient = mv.check(results, {"rule": "not_refuted", "claims": claims})
        for a, b in zip(shown.outcomes, lenient.outcomes):
            assert (a.p, a.p_fail) == (b.p, b.p_fail)
            assert b.status == {"undecided": "not_refuted"}.get(a.status, a.status)
            seen.add(a.status)
        assert lenient.passed() == (lenient.counts["failed"] == 0)
        assert shown.passed() == (shown.counts["held"] == len(claims))
    assert {"held", "undecided"} <= seen


def test_a_run_read_as_violations_decides_its_claims_as_their_compliance_twins(sim_run):
    # The rate direction of the spec (report.rate) or of Results.read_as reaches the gate through the one flip
    # (core.orient): "violations at most 1 - b" on a run read as violations is "compliance at least b".
    compliance = mv.load_run(sim_run.out)
    violation = mv.load_run(sim_run.out).read_as("violation")
    assert violation.rate_direction == "violation"
    system = str(compliance.rate_table()["system"].iloc[0])
    for bound in (0.2, 0.5, 0.8):
        twin = mv.check(compliance, {"claims": [{"id": "r", "system": system, "rate": {"at_least": bound}, "in": "all"}]})
        written = mv.check(violation, {"claims": [{"id": "r", "system": system, "rate": {"at_most": 1 - bound}, "in": "all"}]})
        a, b = twin.outcomes[0], written.outcomes[0]
        assert a.status == b.status and a.p == pytest.approx(b.p) and a.p_fail == pytest.approx(b.p_fail)
        assert b.estimate_low == pytest.approx(1 - a.estimate_high)
