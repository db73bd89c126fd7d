"""The joint test of a curve whatever its universes estimate: shares, means, cuts, win rates (issue 42).

Under a true null (every universe's rate t) the test of each mix of universe
kinds must reject at most about alpha; against a known truth it must keep
its power; its count of significant universes must equal the curve's own
intervals, with several systems too; and every test names its null.

Calibration here is a modest version of ``tests/bench/bench_joint_kinds.py``
(the table in README > Statistics): 6 cells of 100 simulated multiverses,
each a mix of kinds at a rate from 0.02 to 0.5 with 30 to 120 cases. The
assertion is on the rejection rate pooled over the cells (600 tests per
statistic): it fails above 0.07, which a true 0.05 exceeds with probability
about 0.01 (binomial upper tail) and a true 0.09, the old mixed curve's
rate, stays under with probability about 0.04. Each cell alone must stay
under 0.15, which a true 0.05 exceeds with probability about 4e-4. B = 79:
a mixed curve's p is Bonferroni's over two kinds of the doubled one-sided p,
so it reaches 0.05 only when no null draw of a kind lies past the observed
(2 x 2 x 1/80), and the test is then exact at 0.05 in its Monte Carlo part.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from multiverse.analysis import CONTRIBUTION, CaseMatrix, case_matrix, joint_curve_test, joint_rate_test, spec_curve
from multiverse.analysis.inference import STATISTICS

KINDS = ("shares", "means", "cuts", "wins")
CUT = 7


def scored_world(rng, rate, *, kinds=("means", "cuts"), n_cases=60, judges=4, icc=0.3, replicates=1,
                 n_systems=1, truth=None):
    """A scored multiverse whose every universe's rate is ``rate`` (or ``truth`` where given), its cases shared.

    Each case has a chance q_c of a high score, drawn from a Beta with mean
    ``rate`` and intra-case correlation ``icc``; each judge scores every case
    (1-10): high scores uniform on 7-10, low ones 1 or 6 with the mix that
    makes the rescaled mean ``rate`` too. Per judge, one universe per kind,
    all reading that judge's scores: ``means`` (the rescaled mean), ``cuts``
    (the share at or above 7), ``shares`` (the high/low label), ``wins`` (a
    win rate: 0, 1/2 or 1, mean q_c). A different model from either null's.
    """
    rate = rate if truth is None else truth
    q = (rng.beta(rate * (1 - icc) / icc, (1 - rate) * (1 - icc) / icc, size=n_cases) if icc > 0
         else np.full(n_cases, rate))
    high_mean = np.mean(np.arange(CUT, 11) - 1) / 9
    low_mid = rate * (1 - high_mean) / (1 - rate) * 9 / (CUT - 2)  # chance a low score is 6, not 1
    compliant, squares, means = [], [], []
    for _ in range(n_systems):
        sums, sq = [], []
        for _ in range(judges):
            high = rng.random((n_cases, replicates)) < q[:, None]
            score = np.where(high, rng.integers(CUT, 11, size=high.shape),
                             np.where(rng.random(high.shape) < low_mid, CUT - 1, 1))
            for kind in kinds:
                value = {"means": (score - 1) / 9, "cuts": (score >= CUT) * 1.0, "shares": high * 1.0,
                         "wins": rng.binomial(2, np.broadcast_to(q[:, None], high.shape)) / 2}[kind]
                sums.append(value.sum(axis=1))
                sq.append((value * value).sum(axis=1))
        compliant.append(sums)
        squares.append(sq)
    means = np.array([kind in ("means", "wins") for _ in range(judges) for kind in kinds])
    n_universes = len(means)
    return CaseMatrix(
        universes=pd.DataFrame({"universe_id": [f"u{i}" for i in range(n_universes)]}), axes=(),
        systems=tuple(f"s{i}" for i in range(n_systems)), cases=pd.Index([f"c{i}" for i in range(n_cases)]),
        compliant=np.array(compliant), included=np.full((n_systems, n_universes, n_cases), float(replicates)),
        means=means if means.any() else None, squares=np.array(squares))


#: (kinds, t, cases, replicates): each kind alone and mixed, rare to even rates, 30 to 120 cases.
CELLS = [
    (("means", "cuts"), 0.05, 60, 1),  # the cell: a cut axis at rate 0.05 with 60 cases (0.23 before)
    (("means", "cuts"), 0.3, 30, 3),
    (("means",), 0.1, 30, 1),
    (("means",), 0.02, 120, 1),
    (("wins", "shares"), 0.2, 36, 1),
    (("means", "cuts", "wins"), 0.5, 30, 1),
]
DRAWS = 100
BOOT = 79


def test_every_mix_of_universe_kinds_holds_its_level_under_a_true_null():
    rejected = np.zeros((len(CELLS), len(STATISTICS)))
    for cell, (kinds, t, n_cases, replicates) in enumerate(CELLS):
        rng = np.random.default_rng(1000 + cell)
        for draw in range(DRAWS):
            m = scored_world(rng, t, kinds=kinds, n_cases=n_cases, replicates=replicates)
            test = joint_curve_test(m, system="s0", threshold=t, boot=BOOT, seed=draw)
            rejected[cell] += [test.p[name] <= 0.05 for name in STATISTICS]
    share = rejected / DRAWS
    pooled = rejected.sum(axis=0) / (DRAWS * len(CELLS))
    assert (pooled <= 0.07).all(), dict(zip(STATISTICS, pooled.round(3)))
    assert (share <= 0.15).all(), {str(CELLS[i]): share[i].round(3).tolist() for i in range(len(CELLS))}


@pytest.mark.parametrize("kinds", [("means",), ("means", "cuts")])
def test_a_curve_with_means_keeps_its_power_against_a_known_truth(kinds):
    """True 0.2 against t = 0.1 with 60 cases: every statistic rejects in most data sets (measured 0.83-0.90)."""
    rng = np.random.default_rng(31)
    hits = np.zeros(len(STATISTICS))
    for draw in range(40):
        m = scored_world(rng, 0.1, kinds=kinds, truth=0.2)
        test = joint_curve_test(m, system="s0", threshold=0.1, boot=BOOT, seed=draw)
        hits += [test.p[name] <= 0.05 for name in STATISTICS]
    # A true power of 0.8 passes 0.55 with probability about 0.9995 over 40 draws.
    assert (hits / 40 >= 0.55).all(), dict(zip(STATISTICS, hits / 40))


def _dominant_count(curve: pd.DataFrame, threshold: float, direction: int) -> int:
    """Universes whose interval lies wholly on the test's dominant side of the threshold."""
    return int(((curve["ci_low"] > threshold) if direction > 0 else (curve["ci_high"] < threshold)).sum())


@pytest.mark.parametrize("kinds, replicates", [(("shares",), 3), (("means", "cuts"), 1), (("cuts", "wins"), 3)])
def test_the_count_of_significant_universes_is_the_curves_own_intervals_with_several_systems(kinds, replicates):
    """The count borrowed the ICC from the tested system only, the intervals from every universe x system: with a
    rare system beside common ones they read 1.3 against 4.75 universes on average (issue 42: 6.15 against 0.25)."""
    rng = np.random.default_rng(9)
    for draw in range(12):
        m = scored_world(rng, 0.03, kinds=kinds, n_cases=36, replicates=replicates, n_systems=3)
        common = scored_world(rng, 0.3, kinds=kinds, n_cases=36, replicates=replicates, n_systems=2)
        m = CaseMatrix(universes=m.universes, axes=(), systems=m.systems, cases=m.cases,
                       compliant=np.concatenate([m.compliant[:1], common.compliant]),
                       included=m.included, means=m.means, squares=np.concatenate([m.squares[:1], common.squares]))
        curve = spec_curve(m, axes=[])
        for system, threshold in (("s0", 0.12), ("s0", 0.01), ("s1", 0.15), ("s2", 0.5)):
            test = joint_curve_test(m, system=system, threshold=threshold, boot=1, seed=draw)
            own = curve[curve["system"] == system]
            assert test.observed["n_significant"] == _dominant_count(own, threshold, test.direction), (draw, system)
            # The same curve asked for one system at a time: the same intervals (the ICC is the whole run's).
            alone = spec_curve(m, axes=[], system=system)
            assert np.allclose(alone["ci_low"].to_numpy(), own["ci_low"].to_numpy())


def test_a_cut_in_a_mixed_curve_is_tested_as_the_same_labels_imported_are():
    """Cross-path: the shares part of a curve of means and cuts is the rate test of the cuts imported as labels."""
    rng = np.random.default_rng(4)
    rows = []
    for case in range(48):
        q = rng.beta(0.5, 2.5)
        for judge in ("a", "b", "c"):
            score = int(np.clip(np.round(1 + 9 * rng.beta(1 + 4 * q, 5 - 4 * q)), 1, 10))
            for estimator in ("mean", "cut"):
                rows.append({"universe_id": f"{judge}-{estimator}", "system": "s", "case_id": f"c{case}",
                             "score": score, "estimator": estimator})
    table = pd.DataFrame(rows)
    cut = table["estimator"] == "cut"
    table[CONTRIBUTION] = np.where(cut, (table["score"] >= 7) * 1.0, (table["score"] - 1) / 9)
    table["compliant"] = pd.array([pd.NA] * len(table), dtype="boolean")
    scored = case_matrix(table, axes=[])
    from dataclasses import replace

    scored = replace(scored, means=~scored.universes["universe_id"].str.endswith("-cut").to_numpy())
    mixed = joint_curve_test(scored, system="s", threshold=0.2, boot=199, seed=5)
    labels = table[cut].assign(compliant=lambda f: f["score"] >= 7).drop(columns=[CONTRIBUTION])
    alone = joint_rate_test(labels, system="s", threshold=0.2, boot=199, seed=5)
    shares = next(part for part in mixed.parts if part.estimates == "shares")
    assert shares.p == alone.p and shares.observed == alone.observed
    assert mixed.p == {name: min(1.0, 2 * min(part.p[name] for part in mixed.parts)) for name in STATISTICS}


@pytest.mark.parametrize("kinds", [("shares",), ("means",), ("cuts", "means"), ("wins", "cuts")])
def test_every_test_names_its_null(kinds):
    from multiverse.analysis import curve_summary
    from multiverse.results._documents import CurveDocument

    m = scored_world(np.random.default_rng(2), 0.2, kinds=kinds, n_cases=30)
    test = joint_curve_test(m, system="s0", threshold=0.2, boot=39, seed=0)
    document = test.to_dict()
    # The typed view the CLI prints from accepts every null's description (a means' null carries its dispersion).
    typed = CurveDocument.model_validate({**curve_summary(spec_curve(m, axes=[]), tests=[test]), "notes": []})
    assert typed.tests[0].null_model is not None and typed.tests[0].resampling == document["resampling"]
    name = document["null_model"]["name"]
    assert name == document["resampling"] and name
    if {"means", "wins"} & set(kinds) and {"shares", "cuts"} & set(kinds):
        assert name.startswith("each kind of universe under its own null, Bonferroni over the 2 kinds")
        assert {part["estimates"] for part in document["parts"]} == {"shares", "means"}
        assert all(part["null_model"]["name"] in name for part in document["parts"])
    else:
        assert "parts" not in document
        assert name.startswith("latent case-effect null for means" if kinds == ("means",) else "latent case-effect null")


def test_a_mean_without_spread_gets_a_wilson_interval_not_a_point_and_its_test_agrees():
    """Every case alike (se 0): the t interval was the point [m, m]; now Wilson's at the number of cases."""
    from statsmodels.stats.proportion import proportion_confint

    from multiverse.analysis._kernel import case_mean_interval

    n_uc = np.ones((2, 36))
    k_uc = np.zeros((2, 36))
    k_uc[1] = 0.5  # every case scored at the middle of the scale
    se, low, high = case_mean_interval(n_uc, k_uc, 0.95)
    assert (se == 0).all() and (high > low).all()
    expected = proportion_confint(np.array([0.0, 18.0]), 36, alpha=0.05, method="wilson")
    assert np.allclose(low, expected[0]) and np.allclose(high, expected[1])
    m = CaseMatrix(universes=pd.DataFrame({"universe_id": ["u0", "u1"]}), axes=(), systems=("s",),
                   cases=pd.Index(range(36)), compliant=k_uc[None], included=n_uc[None], means=np.ones(2, bool),
                   squares=(k_uc**2)[None])
    for threshold in (0.05, 0.09, 0.12, 0.3, 0.6):
        test = joint_curve_test(m, system="s", threshold=threshold, boot=39, seed=0)
        curve = spec_curve(m, axes=[])
        assert test.observed["n_significant"] == _dominant_count(curve, threshold, test.direction), threshold


def test_a_rare_mean_whose_data_hold_few_high_scores_is_tested_against_the_widest_spread():
    """At t = 0.02 with 30 cases a data set with few high scores also looks little dispersed: on that estimate
    the median effect rejected 0.21 under a true null. Fewer than 5 cases above t: the two-point null."""
    from multiverse.analysis.inference._mean_null import fit_mean_null

    n_uc = np.ones((4, 30))
    k_uc = np.zeros((4, 30))
    k_uc[:, :3] = 5 / 9  # three cases scored 6 of 10 by every judge, the rest 1
    fit = fit_mean_null(n_uc, k_uc, k_uc**2)
    assert fit.rarer_side(0.02) == 3 and fit.dispersion < 0.6
    assert np.allclose(np.sort(np.unique(fit.table(0.02).round(9)))[[0, -1]], [0.0, 1.0])  # two points, 0 and 1
    assert fit.table(0.02).mean() == pytest.approx(0.02)
    k_uc[:, :8] = 5 / 9
    assert fit_mean_null(n_uc, k_uc, k_uc**2).table(0.02).max() < 1.0  # 8 cases: the Beta of the data's dispersion


def test_one_system_at_rare_rates_estimates_its_icc_from_every_universe_and_the_count_is_its_intervals():
    """One system, rare labels: no universe alone holds 5 of the rarer label, so the ICC was 1 (the widest) and
    the count of significant universes had power 0.03-0.04. Pooled over the system's universes it is estimated,
    equal for every universe, and the count still equals the curve's own intervals."""
    from multiverse.analysis._kernel import anova_terms
    from multiverse.analysis._kernel._intervals import icc_from_terms

    rng = np.random.default_rng(21)
    checked = 0
    for draw in range(12):
        m = scored_world(rng, 0.02, kinds=("shares",), n_cases=36, replicates=3)
        terms = anova_terms(m.included[0], m.compliant[0])
        own = icc_from_terms(terms)
        pooled = icc_from_terms(terms.sum(axis=0))[0]
        icc = m.share_icc()[0]
        if np.isfinite(own).any() or not np.isfinite(pooled):
            continue
        checked += 1
        assert np.allclose(icc, pooled)
        curve = spec_curve(m, axes=[])
        for threshold in (0.1, 0.08, 0.005):
            test = joint_curve_test(m, system="s0", threshold=threshold, boot=1, seed=draw)
            assert test.observed["n_significant"] == _dominant_count(curve, threshold, test.direction)
    assert checked >= 3


def test_a_claim_on_a_mean_reads_the_curves_t_interval():
    """A rate claim on a universe whose rate is a mean took a share's binomial at an ICC of 1 (the widest); it now
    holds or fails exactly where the curve's t interval lies wholly on one side of the bound."""
    from multiverse.analysis import rate_claim_tests

    rng = np.random.default_rng(8)
    seen = set()
    for _ in range(6):
        m = scored_world(rng, 0.25, kinds=("means", "cuts"), n_cases=40, replicates=2)
        curve = spec_curve(m, axes=[]).set_index("universe_id")
        means = set(m.universes["universe_id"][m.means])
        for bound in (0.15, 0.2, 0.25, 0.3, 0.35):
            for side in ("at_least", "at_most"):
                tests = rate_claim_tests(m, system="s0", bound=bound, side=side).set_index("universe_id")
                for universe in means:
                    low, high = curve.loc[universe, ["ci_low", "ci_high"]]
                    above, below = tests.loc[universe, "p_hold" if side == "at_least" else "p_fail"], \
                        tests.loc[universe, "p_fail" if side == "at_least" else "p_hold"]
                    assert (above < 0.025) == (low > bound), (universe, bound, side)
                    assert (below < 0.025) == (high < bound), (universe, bound, side)
                    seen.add((bool(low > bound), bool(high < bound)))
    assert {(True, False), (False, True), (False, False)} <= seen


def test_the_confidence_distribution_reads_each_data_set_as_the_data_are_read():
    """_set_moments (many simulated data sets at once) gives each set's _moments; the confidence distribution of
    each correlation rises with the latent correlation, from below a half to above it (a distribution over it)."""
    from multiverse.analysis.inference._mean_null import _moments, _set_moments, fit_mean_null

    rng = np.random.default_rng(3)
    n = rng.integers(0, 4, size=(5, 30)).astype(float)
    k = rng.random((7, 5, 30)) * n
    s = k * k / np.maximum(n, 1.0) + rng.random((7, 5, 30)) * 0.01 * n
    var, between, within = _set_moments(n, k, s)
    for one in range(7):
        expected = [x[0] for x in _moments(n, k[one], s[one], np.ones((1, 30)))[1:]]
        assert np.allclose(expected, [var[one], between[one], within[one]])
    m = scored_world(np.random.default_rng(5), 0.2, kinds=("means",), n_cases=60, replicates=2)
    fit = fit_mean_null(m.included[0], m.compliant[0], m.squares[0])
    _, up, across = fit._confidence(np.random.default_rng(0), 0.2)
    for c in (up, across):
        assert np.all(np.diff(c) >= 0) and c[0] < 0.5 < c[-1]


@pytest.mark.parametrize("value, cases_off", [(0.5, 1), (1 / 9, 3), (0.5, 4)])
def test_a_mean_from_few_cases_off_the_scales_end_holds_wilsons_interval_and_its_test_agrees(value, cases_off):
    """A win rate of 0.014 from one tie among 36 cases had the t interval [0, 0.042]: 0.05 outside it, and the
    count of a curve of win rates at t = 0.05 rejected 0.055-0.068 under a true null (its null, two points, never
    read a universe significant low). Fewer than 5 cases off an end: the interval holds Wilson's at the cases."""
    from statsmodels.stats.proportion import proportion_confint

    from multiverse.analysis._kernel import case_mean_interval, mean_interval

    n_uc = np.ones((2, 36))
    k_uc = np.zeros((2, 36))
    k_uc[0, :cases_off] = value
    k_uc[1, :8] = value  # 8 cases off the end: the t interval alone
    se, low, high = case_mean_interval(n_uc, k_uc, 0.95)
    mean = k_uc.sum(axis=1) / 36
    wilson = proportion_confint(mean * 36, 36, alpha=0.05, method="wilson")
    t = 2.0301079282503425  # Student's t, 35 df, 0.975
    assert low[0] <= max(min(mean[0] - t * se[0], wilson[0][0]), 0.0) + 1e-12
    assert high[0] >= max(mean[0] + t * se[0], wilson[1][0]) - 1e-12
    assert np.isclose(low[1], max(mean[1] - t * se[1], 0.0)) and np.isclose(high[1], mean[1] + t * se[1])
    # The rates table reads rows, the curve per-case sums: one interval.
    rows = mean_interval(np.repeat([0, 1], 36), 2, np.tile(np.arange(36), 2), k_uc.ravel(), 0.95)
    assert np.allclose(rows[2], low) and np.allclose(rows[3], high)
    m = CaseMatrix(universes=pd.DataFrame({"universe_id": ["u0", "u1"]}), axes=(), systems=("s",),
                   cases=pd.Index(range(36)), compliant=k_uc[None], included=n_uc[None], means=np.ones(2, bool),
                   squares=(k_uc**2)[None])
    curve = spec_curve(m, axes=[])
    for threshold in (0.01, 0.03, 0.05, 0.08, 0.12, 0.2):
        test = joint_curve_test(m, system="s", threshold=threshold, boot=39, seed=0)
        assert test.observed["n_significant"] == _dominant_count(curve, threshold, test.direction), threshold


def test_the_dependence_is_read_at_the_datas_own_mean_and_only_ever_widens_the_null():
    """Under the null a skewed case effect whose few high cases a data set misses reads both lower and less
    dependent (with 3 replicates at t = 0.1, 36 cases: a between-universe correlation of 0.08 where the truth is
    0.24 in the data sets whose mean z fell in the null's lowest 2.5%, and Stouffer's Z rejected 0.062-0.065). The
    confidence of the correlation is read among simulated data sets whose mean is the data's; a data set leaning
    high never gets a narrower null than its estimate alone gives."""
    from multiverse.analysis.inference._mean_null import _conditional_above, fit_mean_null

    rng = np.random.default_rng(0)
    means = rng.normal(0.1, 0.03, 400)
    estimates = 0.25 + 2.0 * (means - 0.1) + rng.normal(0, 0.05, 400)
    plain = float(np.mean(estimates > 0.12))
    # The data's mean 0.05: estimates of sets with that mean centre on 0.15, so fewer read above 0.12 (0.72) than
    # of all the sets (0.95), and the confidence distribution reaches a half at a larger correlation.
    low = _conditional_above(estimates, means, 0.12, 0.05)
    assert low == pytest.approx(np.mean(estimates + 2.0 * (0.05 - means) > 0.12), abs=0.06) and low < plain - 0.15
    assert _conditional_above(estimates, means, 0.12, 0.16) == plain  # leaning high: never above the plain share
    # Read beyond the means the sets reach, the line is held at their lowest.
    assert _conditional_above(estimates, means, 0.12, -1.0) == _conditional_above(estimates, means, 0.12, means.min())
    # On data: a data set that reads low gets a confidence distribution of the between correlation lying higher
    # than the same data's estimate read without its mean (a null at least as wide).
    world = np.random.default_rng(5)
    for _ in range(40):
        m = scored_world(world, 0.1, kinds=("means",), n_cases=36, replicates=3)
        fit = fit_mean_null(m.included[0], m.compliant[0], m.squares[0])
        if fit.pooled_mean < 0.06:
            break
    else:
        pytest.fail("no data set leaning low in 40 draws")
    grid, between, _ = fit._confidence(np.random.default_rng(1), 0.1)
    assert np.interp(0.5, between, grid) > fit.rho_between
