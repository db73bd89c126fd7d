"""Inference where audits live: rare violations, a few dozen cases, replicates.

Simulation checks with known truth and fixed seeds: the joint tests'
false-positive rate under a true null, their power, and the coverage of every
CI method. Each false-positive rate is estimated from 600 simulated
multiverses, enough to tell 0.05 from 0.08: the check fails above 0.065, the
midpoint, which a true 0.05 exceeds and a true 0.08 stays under with
probability about 0.05 each. Null draws per test B = 39: with
(1 + hits) / (B + 1) the test at 0.05 is exact (reject iff hits <= 1), and
cheap.
The full tables are in tests/bench/bench_calibration.py and README > Statistics.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import yaml
from scipy import stats
from statsmodels.stats.proportion import proportion_confint

from multiverse.analysis import (
    CaseMatrix,
    adjust_tests,
    ci_settings,
    compute_rates,
    curve_summary,
    joint_difference_test,
    joint_rate_test,
    spec_curve,
)
from multiverse.analysis.inference import STATISTICS
from multiverse.tables import Manifest, SpecDocument

DRAWS = 600
BOOT = 39


def audit_world(rng, rate, *, n_cases=36, n_universes=8, icc=0.3, replicates=1, n_systems=1):
    """Counts of a multiverse whose universes share cases: a Beta case effect.

    Each case has a compliance probability drawn from a Beta with mean ``rate``
    and intra-case correlation ``icc``; every label of the case, in every
    universe and system, is Bernoulli with it. So every universe's rate is
    ``rate``, and two labels of one case correlate ``icc`` (a different model
    from the probit copula of the rate test's null).
    """
    if icc > 0:
        p = rng.beta(rate * (1 - icc) / icc, (1 - rate) * (1 - icc) / icc, size=n_cases)
    else:  # no case effect: every label Bernoulli(rate)
        p = np.full(n_cases, float(rate))
    k = rng.binomial(replicates, np.broadcast_to(p, (n_systems, n_universes, n_cases)))
    return CaseMatrix(
        universes=pd.DataFrame({"universe_id": [f"u{i}" for i in range(n_universes)]}),
        axes=(),
        systems=tuple(f"s{i}" for i in range(n_systems)),
        cases=pd.Index([f"c{i}" for i in range(n_cases)]),
        compliant=k.astype(float),
        included=np.full(k.shape, float(replicates)),
    )


def rejections(make, test, seed) -> np.ndarray:
    """Share of DRAWS simulated data sets where each statistic's p <= 0.05."""
    rng = np.random.default_rng(seed)
    hits = np.zeros(len(STATISTICS))
    for draw in range(DRAWS):
        result = test(make(rng), draw)
        hits += [result.p[name] <= 0.05 for name in STATISTICS]
    return hits / DRAWS


def assert_at_most(share: np.ndarray, bound: float, what: str) -> None:
    assert (share <= bound).all(), (what, dict(zip(STATISTICS, share.round(3))), bound)


@pytest.mark.parametrize("t, n_cases", [(0.05, 36), (0.3, 30), (0.98, 36)])
def test_joint_rate_test_holds_its_level_at_small_and_large_rates(t, n_cases):
    share = rejections(
        lambda rng: audit_world(rng, t, n_cases=n_cases),
        lambda m, draw: joint_rate_test(m, system="s0", threshold=t, boot=BOOT, seed=draw),
        seed=int(t * 1000) + n_cases,
    )
    assert_at_most(share, 0.065, f"rate test, t={t}, {n_cases} cases")


@pytest.mark.parametrize("t", [0.05, 0.1])
def test_joint_rate_test_with_replicates_holds_its_level(t):
    # With replicates, few events also look weakly clustered: a null built on
    # the point estimate alone rejected 0.06-0.08 here.
    share = rejections(
        lambda rng: audit_world(rng, t, replicates=3),
        lambda m, draw: joint_rate_test(m, system="s0", threshold=t, boot=BOOT, seed=draw),
        seed=7,
    )
    assert_at_most(share, 0.065, f"rate test, 3 replicates, t={t}")


@pytest.mark.parametrize("replicates", [1, 3])
def test_joint_rate_test_has_power_against_a_clear_alternative(replicates):
    rng = np.random.default_rng(3)
    hits = np.zeros(len(STATISTICS))
    for draw in range(100):
        # B = 99 here: with B = 39 the smallest p-values are too coarse for power.
        m = audit_world(rng, 0.3, replicates=replicates)
        test = joint_rate_test(m, system="s0", threshold=0.1, boot=99, seed=draw)
        hits += [test.p[name] <= 0.05 for name in STATISTICS]
    assert (hits / 100 >= 0.8).all(), dict(zip(STATISTICS, hits / 100))


@pytest.mark.parametrize("t, n_cases, replicates", [(0.02, 30, 3), (0.02, 20, 5)])
def test_joint_rate_test_holds_its_level_at_a_rare_boundary_with_replicates(t, n_cases, replicates):
    # The hard cell of issue 24: Stouffer's Z rejected 0.065 at t = 0.02, 30 cases, 3 replicates.
    share = rejections(
        lambda rng: audit_world(rng, t, n_cases=n_cases, replicates=replicates),
        lambda m, draw: joint_rate_test(m, system="s0", threshold=t, boot=BOOT, seed=draw),
        seed=int(t * 1000) + n_cases + replicates,
    )
    assert_at_most(share, 0.065, f"rate test, t={t}, {n_cases} cases, {replicates} replicates")


def test_joint_rate_test_has_power_at_a_rare_rate():
    """True 0.01 against 0.10, 36 cases in 8 universes, ICC 0.3: power was 0.74 / 0.89 / 0.56.

    A fifth of these data sets hold no compliant label at all, where the
    null's correlation cannot be estimated and is 1; most others hold a few,
    in one or two cases. 200 draws: a true power of 0.8 passes 0.74 with
    probability about 0.98. B = 199: the two-sided p is twice the one-sided
    one, so at B = 99 it is at most 0.05 only with at most one null draw past
    the observed (power read 0.71 / 0.77 / 0.80 there).
    """
    rng = np.random.default_rng(21)
    hits = np.zeros(len(STATISTICS))
    for draw in range(200):
        m = audit_world(rng, 0.01)
        test = joint_rate_test(m, system="s0", threshold=0.1, boot=199, seed=draw)
        hits += [test.p[name] <= 0.05 for name in STATISTICS]
    assert (hits / 200 >= 0.74).all(), dict(zip(STATISTICS, hits / 200))


def test_a_curve_of_zeros_is_tested_against_the_widest_null_with_enough_draws():
    """No label varies: correlation 1, every universe one Binomial(36, t) / 36 rate.

    Two-sided p = twice the lower tail, 2 * 0.9**36 = 0.045 for every
    statistic; it takes more than B = 99 draws to resolve it below 0.05.
    """
    m = audit_world(np.random.default_rng(0), 0.01)
    m.compliant[:] = 0.0
    test = joint_rate_test(m, system="s0", threshold=0.1, boot=99, seed=3)
    assert test.boot == 20_000 and test.null_model.lam_between == 1.0
    exact = 2 * 0.9**36
    for name in STATISTICS:
        assert abs(test.p[name] - exact) < 4 * np.sqrt(exact * (1 - exact) / 20_000 * 4), (name, test.p)
    # Against a rate the data sit near, the same curve is not a rejection.
    assert min(joint_rate_test(m, system="s0", threshold=0.02, boot=99, seed=3).p.values()) > 0.5


def test_count_of_significant_universes_is_calibrated_with_replicates():
    """Under a true null with 3 replicates (ICC 0.3) about alpha of universes are significant.

    Unclustered per-universe z-tests called 14% of them significant; the
    count now uses the design effect of the curve's own intervals.
    """
    rng = np.random.default_rng(5)
    shares, two_sided, naive = [], [], []
    for draw in range(300):
        m = audit_world(rng, 0.3, replicates=3)
        test = joint_rate_test(m, system="s0", threshold=0.3, boot=1, seed=draw)
        shares.append(test.observed["n_significant"] / test.n_universes)
        two_sided.append(np.mean(np.abs(test.effects["z"]) > stats.norm.ppf(0.975)))
        n = m.included[0].sum(axis=1)
        z = (m.compliant[0].sum(axis=1) / n - 0.3) / np.sqrt(0.21 / n)
        naive.append(np.mean(np.abs(z) > stats.norm.ppf(0.975)))
    # Universes share cases, so 300 draws of 8 are about as good as a few hundred independent tests.
    assert 0.02 < np.mean(two_sided) <= 0.065, np.mean(two_sided)
    assert np.mean(naive) > 0.10, np.mean(naive)  # the check has teeth: ignoring the clustering over-counts
    assert np.mean(shares) <= np.mean(two_sided)  # the count is of one side, the dominant one


def test_pooled_variance_counts_universes_that_missed_a_rare_event():
    """Five of 8 universes see a violation in one case, three do not: they disagree on it.

    With each universe's own variance the three (variance 0) dropped out and
    the between-universe correlation read 1, the widest null.
    """
    from multiverse.analysis.inference._rate_null import fit_latent_null

    n_uc = np.ones((8, 36))
    k_uc = np.zeros((8, 36))
    k_uc[:5, 0] = 1.0
    fit = fit_latent_null(n_uc, k_uc)
    # By hand: own-rate residuals 35/36 at the case and -1/36 elsewhere in the 5 universes, 0 in the 3;
    # cross-products over the 20 ordered pairs of the 5, times C / (C - 1), over the pooled variance
    # p(1 - p) (p = 5 / 288) times the 56 x 36 ordered pairs of labels of one case.
    p = 5 / 288
    cross = 20 * ((35 / 36) ** 2 + 35 / 36**2)
    expected = 36 / 35 * cross / (p * (1 - p) * 56 * 36)
    assert fit.rho_between == pytest.approx(expected)
    assert 0.3 < fit.rho_between < 0.9 and fit.pooled_rate == pytest.approx(p)


def probit_counts(rng, t, lam, *, n_universes=6, n_cases=400, missing=0.1):
    """One label per (universe, case), some cells empty, from the null's own probit model."""
    case = rng.standard_normal(n_cases)
    score = np.sqrt(lam) * case + np.sqrt(1 - lam) * rng.standard_normal((n_universes, n_cases))
    n_uc = (rng.random((n_universes, n_cases)) >= missing).astype(float)
    return n_uc, (score < stats.norm.ppf(t)) * n_uc


@pytest.mark.parametrize("t", [0.1, 0.9])
def test_one_label_null_draws_have_mean_t_and_the_fitted_dependence(t):
    """The 16-bit fast path: mean t, binomial variance, universes correlated at least as fitted."""
    from multiverse.analysis.inference._rate_null import fit_latent_null

    n_uc, k_uc = probit_counts(np.random.default_rng(1), t, 0.5)
    fit = fit_latent_null(n_uc, k_uc)
    draws = fit.draw_rates(t, 3000, np.random.default_rng(2))
    n = n_uc.sum(axis=1)
    # Labels are Bernoulli(t) and cases independent: Var(rate) = t(1-t)/n whatever the dependence.
    se = np.sqrt(t * (1 - t) / n / len(draws))
    assert (np.abs(draws.mean(axis=0) - t) < 4 * se).all()
    np.testing.assert_allclose(draws.var(axis=0) * n / (t * (1 - t)), 1.0, atol=0.1)
    # Two universes share about (1 - missing)^2 of their cases; the null's
    # correlations are reflected upwards, so at least the fitted one.
    shared = (n_uc[:, None, :] * n_uc[None, :, :]).sum(axis=2) / np.sqrt(np.outer(n, n))
    iu = np.triu_indices(len(n), 1)
    label_rho = np.corrcoef(draws.T)[iu] / shared[iu]
    assert fit.rho_between - 0.03 < label_rho.mean() < fit.rho_between + 0.1, (label_rho.mean(), fit)


def test_null_of_identical_universes_is_exact_at_the_edges():
    """No variation anywhere: correlation 1, every universe the same label, rates exactly 0 or 1."""
    from multiverse.analysis.inference._rate_null import fit_latent_null

    n_uc = np.ones((4, 30))
    fit = fit_latent_null(n_uc, np.ones((4, 30)))
    assert fit.lam_between == fit.lam_within == 1.0
    draws = fit.draw_rates(0.2, 2000, np.random.default_rng(0))
    assert (draws == draws[:, :1]).all()
    # Each case is compliant with probability t, in every universe at once.
    assert abs(draws.mean() - 0.2) < 4 * np.sqrt(0.16 / 30 / 2000)


@pytest.mark.parametrize("t", [0.05, 0.5])
def test_sign_flip_difference_test_holds_its_level(t):
    share = rejections(
        lambda rng: audit_world(rng, t, n_systems=2),
        lambda m, draw: joint_difference_test(m, a="s0", b="s1", boot=BOOT, seed=draw),
        seed=11,
    )
    assert_at_most(share, 0.065, f"difference test, t={t}")


# --------------------------------------------------------------------------
# Coverage of the intervals
# --------------------------------------------------------------------------

SIMS = 1500


def verdict_table(rng, p, *, n_cases=36, replicates=1, icc=0.3, sims=SIMS) -> pd.DataFrame:
    """SIMS independent data sets, one per universe_id; 6 subgroups of cases each.

    Replicates of a case share a Beta case effect with intra-case correlation
    ``icc`` (none when 0).
    """
    if icc > 0:
        case_p = rng.beta(p * (1 - icc) / icc, (1 - p) * (1 - icc) / icc, size=(sims, n_cases))
    else:
        case_p = np.full((sims, n_cases), p)
    y = rng.random((sims, n_cases, replicates)) < case_p[..., None]
    s, c, _ = np.indices(y.shape).reshape(3, -1)
    return pd.DataFrame({"universe_id": s, "system": "A", "case_id": c, "group": c % 6,
                         "status": "ok", "compliant": y.reshape(-1)})


def coverage(rates: pd.DataFrame, p: float) -> dict[str, float]:
    covered = (rates["ci_low"] <= p + 1e-12) & (p - 1e-12 <= rates["ci_high"])
    overall = rates["subgroup"] == "all"
    return {"all": covered[overall].mean(), "subgroups": covered[~overall].mean()}


def assert_covers(rates: pd.DataFrame, p: float, what: str, parts=("all", "subgroups")) -> None:
    # 0.93 is the target; allow binomial noise over SIMS (and 6 x SIMS subgroups).
    got = coverage(rates, p)
    for part in parts:
        n = SIMS * (6 if part == "subgroups" else 1)
        assert got[part] >= stats.binom.ppf(0.001, n, 0.93) / n, (what, part, got)
    # Never a point, whatever the data.
    assert (rates["ci_high"] - rates["ci_low"] > 0).all(), what


@pytest.mark.parametrize("ci", ["wilson", "bootstrap"])
def test_intervals_cover_rare_violations_with_few_cases(ci):
    """p = 0.95 compliance (5% violations), 36 cases: many cells have no violation at all."""
    v = verdict_table(np.random.default_rng(1), 0.95)
    rates = compute_rates(v, axes=[], factors=["group"], ci=ci, n_boot=300, seed=2)
    assert_covers(rates, 0.95, ci)


@pytest.mark.parametrize("ci", ["wilson", "bootstrap"])
def test_intervals_cover_with_replicates_clustered_by_case(ci):
    v = verdict_table(np.random.default_rng(5), 0.7, replicates=3)
    rates = compute_rates(v, axes=[], factors=["group"], ci=ci, n_boot=300, seed=2)
    assert_covers(rates, 0.7, ci)


@pytest.mark.parametrize("ci", ["wilson", "bootstrap"])
def test_intervals_cover_rare_rates_with_many_clustered_replicates(ci):
    """p = 0.02, 100 cases, 3 replicates, ICC 0.3: one or two events cannot show their clustering."""
    v = verdict_table(np.random.default_rng(8), 0.02, n_cases=100, replicates=3)
    rates = compute_rates(v, axes=[], factors=[], ci=ci, n_boot=200, seed=2)
    assert_covers(rates, 0.02, ci, parts=("all",))
    # The draws with one or two events: their own ICC reads about 0 (coverage was 0.72 there).
    few = rates[rates["n_compliant"] <= 2]
    assert len(few) > 100 and (few["ci_high"] >= 0.02).mean() >= 0.95, len(few)


def test_icc_of_a_few_rare_labels_is_not_estimated_and_counts_as_one():
    from multiverse.analysis._kernel import anova_terms, design_effect
    from multiverse.analysis._kernel._intervals import icc_from_terms

    # 20 cases x 3 replicates; every label compliant but for `rare` of them, each in its own case.
    n = np.full((3, 20), 3.0)
    k = n.copy()
    for row, rare in enumerate((2, 5, 0)):
        k[row, :rare] -= 1
    icc = icc_from_terms(anova_terms(n, k))
    assert np.isnan(icc[0]) and np.isfinite(icc[1]) and np.isnan(icc[2])
    # Unknown ICC: the widest design effect, n_eff = the number of cases (times Korn-Graubard's t/z).
    t_over_z = (stats.t.ppf(0.975, 19) / stats.norm.ppf(0.975)) ** 2
    np.testing.assert_allclose(design_effect(n, np.array([np.nan]), 0.95), 3 * t_over_z)
    np.testing.assert_allclose(design_effect(n, np.array([0.0]), 0.95), t_over_z)


def test_uncorrected_wilson_would_undercover_with_replicates():
    """The null of the check above: ignoring clustering undercovers, so the check has teeth."""
    v = verdict_table(np.random.default_rng(5), 0.7, replicates=3)
    overall = v.groupby("universe_id")["compliant"].agg(["sum", "size"])
    low, high = proportion_confint(overall["sum"], overall["size"], method="wilson")
    assert ((low <= 0.7) & (0.7 <= high)).mean() < 0.91


def test_wilson_is_statsmodels_with_one_transcript_per_case():
    from conftest import modified_wilson

    v = verdict_table(np.random.default_rng(9), 0.8, sims=50)
    rates = compute_rates(v, axes=[], factors=["group"], ci="wilson")
    low, high = modified_wilson(rates["n_compliant"], rates["n"])
    np.testing.assert_allclose(rates["ci_low"], low, atol=1e-12)
    np.testing.assert_allclose(rates["ci_high"], high, atol=1e-12)
    plain = proportion_confint(rates["n_compliant"], rates["n"], alpha=0.05, method="wilson")
    away = ((rates["n"] - rates["n_compliant"]) > 2).to_numpy()  # Wilson itself away from the edges
    assert away.any()
    np.testing.assert_allclose(rates["ci_high"][away], np.asarray(plain[1])[away], atol=1e-12)


def test_wilson_near_zero_covers_in_six_case_cells():
    # Plain Wilson covers 0.88 at p = 0.02 with 6 cases (one violation puts its
    # bound above 0.02); the modified interval must reach the 0.93 target.
    from multiverse.analysis._kernel import wilson

    rng = np.random.default_rng(11)
    for p, n in ((0.02, 6), (0.05, 6), (0.02, 36), (0.98, 6)):
        k = rng.binomial(n, 1 - p, 4000)  # compliant labels; violations at rate p
        low, high = wilson(k / n, np.full(k.shape, float(n)), 0.95)
        covered = np.mean((low <= 1 - p) & (1 - p <= high))
        assert covered >= 0.93, (p, n, covered)
        assert (high > low).all()


def test_bootstrap_interval_of_a_cell_without_violations_is_not_a_point():
    v = verdict_table(np.random.default_rng(2), 0.999, sims=20)
    v["compliant"] = True
    rates = compute_rates(v, axes=[], factors=["group"], ci="bootstrap", n_boot=200)
    assert (rates["ci_high"] == 1).all() and (rates["ci_low"] < 0.95).all()
    # Six cases carry less information than 36: a wider interval.
    small = rates[rates["subgroup"] != "all"]["ci_low"]
    assert (small < rates[rates["subgroup"] == "all"]["ci_low"].max()).all()


# --------------------------------------------------------------------------
# Multiplicity and the spec's CI method
# --------------------------------------------------------------------------


def test_holm_matches_statsmodels_and_names_the_family():
    from statsmodels.stats.multitest import multipletests

    rng = np.random.default_rng(0)
    m = audit_world(rng, 0.2, n_systems=3)
    tests = [joint_rate_test(m, system=s, threshold=0.25, boot=99, seed=1) for s in m.systems]
    tests.append(joint_difference_test(m, a="s0", b="s1", boot=99, seed=1))
    summary = curve_summary(spec_curve(m, axes=[]), tests=tests)
    raw = [t["statistics"][name]["p"] for t in summary["tests"] for name in STATISTICS]
    adjusted = [t["statistics"][name]["p_holm"] for t in summary["tests"] for name in STATISTICS]
    np.testing.assert_allclose(adjusted, multipletests(raw, method="holm")[1])
    assert summary["multiplicity"] == {
        "method": "holm",
        "family": "Holm across 3 systems vs the threshold and 1 difference test × 3 statistics",
        "n_p_values": 12,
    }
    assert adjust_tests([]) is None


def test_ci_settings_follow_the_spec_per_universe():
    manifest = {"universes": [{"id": "u1", "options": {"ci": "w"}}, {"id": "u2", "options": {"ci": "b"}}]}
    spec = {"scoring": {"ci": {"method": "wilson", "level": 0.9, "n_boot": 500}},
            "axes": {"ci": {"w": {}, "b": {"scoring.ci.method": "bootstrap", "scoring.ci.n_boot": 2000}}}}
    table, n_boot = ci_settings(Manifest.model_validate(manifest), SpecDocument.model_validate(spec))
    assert table.to_dict("records") == [
        {"universe_id": "u1", "ci": "wilson", "level": 0.9},
        {"universe_id": "u2", "ci": "bootstrap", "level": 0.9},
    ]
    assert n_boot == 2000
    imported, _ = ci_settings(Manifest.model_validate({"universes": ["x", "y"], "ci": "bootstrap", "level": 0.8}), None)
    assert imported["ci"].tolist() == ["bootstrap"] * 2 and imported["level"].tolist() == [0.8] * 2
    assert ci_settings(Manifest.model_validate({}), None)[0] is None
    assert ci_settings(None, None)[0] is None


def test_curve_command_uses_the_spec_ci_and_reports_holm(tmp_path, capsys):
    """A run directory whose spec asks for bootstrap intervals at 0.9."""
    from multiverse.cli import main

    rng = np.random.default_rng(4)
    rows = [{"universe_id": f"u{j}", "judge": j, "system": system, "case_id": f"c{c}", "replicate": r,
             "status": "ok", "compliant": bool(rng.random() < 0.6)}
            for j in ("a", "b") for system in ("atlas", "beacon") for c in range(12) for r in range(2)]
    run = tmp_path / "run"
    run.mkdir()
    pd.DataFrame(rows).to_csv(run / "verdicts.csv", index=False)
    (run / "manifest.json").write_text(json.dumps({
        "axes": ["judge"], "factors": [], "primary": "ua",
        "universes": [{"id": f"u{j}", "options": {"judge": j}} for j in ("a", "b")]}))
    (run / "spec.yaml").write_text(yaml.safe_dump({
        "scoring": {"ci": {"method": "bootstrap", "level": 0.9, "n_boot": 200}},
        "axes": {"judge": {"a": {"judge.model": "sim/judge-a"}, "b": {"judge.model": "sim/judge-b"}}}}))

    assert main(["curve", str(run), "--json", "--threshold", "0.5", "--boot", "99"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["ci"] == "bootstrap" and summary["level"] == 0.9
    assert summary["multiplicity"]["family"] == "Holm across 2 systems vs the threshold × 3 statistics"
    for test in summary["tests"]:
        for entry in test["statistics"].values():
            assert entry["p"] <= entry["p_holm"] <= 1
    expected = spec_curve(pd.DataFrame(rows), axes=["judge"], ci="bootstrap", level=0.9, n_boot=200)
    primary = expected[expected["universe_id"] == "ua"].set_index("system")
    for system, entry in summary["systems"].items():
        assert entry["primary"]["ci_low"] == pytest.approx(primary.loc[system, "ci_low"])
    assert main(["curve", str(run), "--threshold", "0.5", "--boot", "99"]) == 0
    text = capsys.readouterr().out
    assert "intervals: bootstrap, level 0.9" in text and "Holm across 2 systems" in text
