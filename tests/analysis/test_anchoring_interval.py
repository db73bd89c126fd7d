"""The anchored (PPI++) score interval: coverage with 20-100 labels at rare rates, clustering, never a point.

Coverage is simulated under known truth over the cells people use: labels n
in {20, 50, 100}, true compliant rates {0.02, 0.05, 0.3} and their mirrors,
a good, a biased and a noisy judge, with and without replicates (3 per case,
intra-case correlation 0.3), from two data-generating processes (a Beta case
effect with judge errors independent of the case; a probit case effect with
hard cases where the judge guesses). A few hundred data sets per cell here;
the full table is tests/bench/bench_calibration.py's ``anchored`` rows
(README › Statistics › Calibration and coverage).
"""

from __future__ import annotations

import numpy as np
import pytest
from ppi_py import ppi_mean_pointestimate
from scipy import stats
from statsmodels.stats.proportion import proportion_confint

from multiverse.analysis import ppi_mean
from multiverse.analysis.anchoring._ppi import design_effects, ppi_binary, ppi_lambda

#: (sensitivity, specificity): violations caught, compliance confirmed.
JUDGES = {"good": (0.95, 0.95), "biased": (0.6, 0.95), "lenient": (0.95, 0.6), "noisy": (0.7, 0.7)}
RATES = (0.02, 0.05, 0.3, 0.7, 0.95, 0.98)
LABELS = (20, 50, 100)


def anchoring_world(rng, reps: int, p: float, *, transcripts: int, labels: int, judge: tuple[float, float],
                    replicates: int = 1, icc: float = 0.3, process: str = "beta"):
    """``reps`` independent cells: human labels y, verdicts f, which are labelled, and case codes (reps x T).

    ``process`` "beta": each case's compliant probability is Beta with mean
    ``p`` and intra-case correlation ``icc`` (none with one transcript per
    case), the judge errs independently of the case. "probit": a Gaussian
    latent case effect with latent correlation ``icc`` sets the labels, and a
    fifth of the cases are hard, where the judge guesses (errors shared by
    the case's replicates). Labels are a uniform random sample of the cell's
    transcripts, as the labelling sheet draws them.
    """
    cases = transcripts // replicates
    size = (reps, cases)
    if process == "beta":
        q = rng.beta(p * (1 - icc) / icc, (1 - p) * (1 - icc) / icc, size=size) if replicates > 1 else np.full(size, p)
        hard = np.zeros(size, bool)
    else:
        shared = rng.standard_normal(size) * np.sqrt(icc if replicates > 1 else 0.0)
        q = stats.norm.cdf((stats.norm.ppf(p) + shared) / np.sqrt(1 - (icc if replicates > 1 else 0.0)))
        hard = rng.random(size) < 0.2
    q, hard = np.repeat(q, replicates, axis=1), np.repeat(hard, replicates, axis=1)
    y = (rng.random(q.shape) < q).astype(float)
    sensitivity, specificity = judge
    draw = rng.random(q.shape)
    f = np.where(hard, draw < 0.5, np.where(y == 1, draw < specificity, draw >= sensitivity)).astype(float)
    order = np.argsort(rng.random(q.shape), axis=1)
    labelled = np.zeros(q.shape, bool)
    np.put_along_axis(labelled, order[:, :labels], True, axis=1)
    case = np.broadcast_to(np.repeat(np.arange(cases), replicates), q.shape)
    return y, f, labelled, case


def anchored_intervals(y, f, labelled, case, alpha: float = 0.05):
    """(rate, low, high, humans-only low, high) per row of ``anchoring_world``, clustered when cases repeat."""
    n, big_n = labelled.sum(1).astype(float), (~labelled).sum(1).astype(float)
    moments = (n, (y * labelled).sum(1), (f * labelled).sum(1), (y * f * labelled).sum(1), big_n, (f * ~labelled).sum(1))
    deff = 1.0
    if len(np.unique(case[0])) < case.shape[1]:
        cell = np.repeat(np.arange(len(y)), y.shape[1])
        deff = design_effects(cell, (case + cell.reshape(case.shape) * case.shape[1]).ravel(), labelled.ravel(),
                              y.ravel(), f.ravel(), ppi_lambda(*moments), n, big_n, moments[1], moments[2], moments[5])
    rate, low, high, _ = ppi_binary(*moments, alpha, deff)
    human_low, human_high = proportion_confint(moments[1], n, alpha=alpha, method="wilson")
    return rate, low, high, human_low, human_high


def _coverage(p, reps, seed, **world):
    y, f, labelled, case = anchoring_world(np.random.default_rng(seed), reps, p, **world)
    rate, low, high, human_low, human_high = anchored_intervals(y, f, labelled, case)
    assert (high - low > 0).all(), "an anchored interval is a point"
    assert ((low <= np.clip(rate, 0, 1) + 1e-12) & (np.clip(rate, 0, 1) <= high + 1e-12)).all()
    return float(np.mean((low <= p) & (p <= high))), float(np.median((high - low) / (human_high - human_low)))


def _bound(reps: int) -> float:
    # A cell whose true coverage is 0.93 falls below this in 1 of 1,000 simulations.
    return float(stats.binom.ppf(0.001, reps, 0.93) / reps)


@pytest.mark.parametrize("judge", ["good", "biased", "noisy"])
def test_covers_with_few_labels_at_rare_rates(judge):
    reps, got = 400, {}
    for p in RATES:
        for n in LABELS:
            got[(p, n)] = _coverage(p, reps, seed=int(p * 1000) + n, transcripts=600, labels=n, judge=JUDGES[judge])
    worst = min(c for c, _ in got.values())
    assert worst >= _bound(reps), (judge, {k: round(v[0], 3) for k, v in got.items()})
    # Over all 18 cells (7,200 data sets) the mean coverage sits at the nominal level, not below it.
    assert np.mean([c for c, _ in got.values()]) >= 0.945
    if judge == "good":
        # A good judge buys a narrower interval than the labels alone (median over data sets) at rates 0.3 and 0.7,
        # from 50 labels on at 0.05 and 0.95, and with 100 at 0.02 and 0.98. With 20 labels at rate 0.05 most
        # samples hold one kind of label only, and there it is the labels' own Wilson interval.
        narrower = [ratio for (p, n), (_, ratio) in got.items() if 0.3 <= p <= 0.7 or n == 100 or (n, p) in
                    ((50, 0.05), (50, 0.95))]
        assert len(narrower) == 12 and max(narrower) < 0.95, got
        assert all(ratio <= 1.0 + 1e-9 for _, ratio in got.values()), got


@pytest.mark.parametrize("process", ["beta", "probit"])
@pytest.mark.parametrize("judge", ["good", "biased"])
def test_covers_with_replicates_clustered_by_case(process, judge):
    reps, got = 300, {}
    for p in (0.05, 0.3, 0.95):
        for n in LABELS:
            got[(p, n)] = _coverage(p, reps, seed=int(p * 100) + n, transcripts=450, labels=n, judge=JUDGES[judge],
                                    replicates=3, icc=0.3, process=process)[0]
    assert min(got.values()) >= _bound(reps), got
    assert np.mean(list(got.values())) >= 0.94, got


def test_hard_cases_and_a_large_pool_still_cover():
    # The other process without replicates, 2,000 unlabelled transcripts: the judge's rate is nearly exact there,
    # so the interval leans on the rectifier from the labels alone.
    reps = 300
    for p in (0.02, 0.3, 0.98):
        for n in (20, 100):
            coverage, _ = _coverage(p, reps, seed=n + int(p * 10), transcripts=2000, labels=n,
                                    judge=JUDGES["lenient"], process="probit")
            assert coverage >= _bound(reps), (p, n, coverage)


def test_clustering_widens_only_where_cases_repeat():
    rng = np.random.default_rng(4)
    y, f, labelled, case = anchoring_world(rng, 200, 0.3, transcripts=300, labels=100, judge=JUDGES["good"],
                                           replicates=3, icc=0.6)
    cell = np.repeat(np.arange(200), 300)
    n, big_n = labelled.sum(1).astype(float), (~labelled).sum(1).astype(float)
    sums = ((y * labelled).sum(1), (f * labelled).sum(1), (f * ~labelled).sum(1))
    lam = ppi_lambda(n, sums[0], sums[1], (y * f * labelled).sum(1), big_n, sums[2])
    clustered = design_effects(cell, (case + np.arange(200)[:, None] * 300).ravel(), labelled.ravel(), y.ravel(),
                               f.ravel(), lam, n, big_n, *sums)
    alone = design_effects(cell, np.arange(cell.size), labelled.ravel(), y.ravel(), f.ravel(), lam, n, big_n, *sums)
    assert (alone == 1.0).all()
    # With labels and verdicts of a case this correlated, the estimator's variance is well above the iid one.
    assert np.median(clustered) > 1.3 and (clustered >= 1.0).all()


# -- never a point, and the regimes where it reduces to a known interval ------------------------------------------


def test_all_alike_labels_give_the_humans_only_wilson_interval():
    # 20 labels, all compliant; the judge flags some transcripts. lambda is 0, so PPI++ is the humans' mean,
    # and its interval is statsmodels' Wilson interval, not the point [1, 1] ppi-python's normal interval gives.
    rng = np.random.default_rng(3)
    for n, big_n, value in ((20, 400, 1.0), (20, 400, 0.0), (50, 2000, 1.0), (10, 0, 1.0)):
        y = np.full(n, value)
        f = (rng.random(n) < 0.9).astype(float)
        u = (rng.random(big_n) < 0.9).astype(float)
        estimate = ppi_mean(y, f, u)
        low, high = proportion_confint(y.sum(), n, alpha=0.05, method="wilson")
        assert estimate.lam == 0.0 and estimate.rate == value
        assert (estimate.ci_low, estimate.ci_high) == pytest.approx((low, high), abs=1e-9)
        assert estimate.ci_high - estimate.ci_low > 0.05


def test_no_point_interval_over_every_small_table():
    # Every 2 x 2 table of 20 labels, with judge rates from none to all over 500 unlabelled transcripts.
    tables = np.array([(a, b, c, 20 - a - b - c) for a in range(21) for b in range(21 - a) for c in range(21 - a - b)],
                      float)
    rows = np.repeat(tables, 5, axis=0)
    judge_unlabelled = np.tile([0, 1, 250, 499, 500], len(tables)).astype(float)
    n11, n10, n01, _ = rows.T
    n = np.full(len(rows), 20.0)
    rate, low, high, lam = ppi_binary(n, n11 + n10, n11 + n01, n11, np.full(len(rows), 500.0), judge_unlabelled, 0.05)
    centre = np.clip(rate, 0, 1)
    assert (high - low > 1e-3).all()
    assert ((low <= centre + 1e-9) & (centre <= high + 1e-9)).all() and (low >= 0).all() and (high <= 1).all()
    assert ((lam >= 0) & (lam <= 1)).all()


def test_point_estimate_is_ppi_python_and_the_interval_close_to_its_where_its_regime_holds():
    # Many labels, a mid-range rate: the normal approximation holds, and the score interval is near ppi-python's.
    from ppi_py import ppi_mean_ci

    rng = np.random.default_rng(8)
    for _ in range(20):
        p = rng.uniform(0.3, 0.7)
        y = (rng.random(400) < p).astype(float)
        f = np.where(y == 1, rng.random(400) < 0.85, rng.random(400) >= 0.8).astype(float)
        u = (rng.random(3000) < 0.55).astype(float)
        ours = ppi_mean(y, f, u)
        assert ours.rate == pytest.approx(float(np.squeeze(ppi_mean_pointestimate(y, f, u))), abs=1e-12)
        low, high = (float(np.squeeze(x)) for x in ppi_mean_ci(y, f, u, alpha=0.05))
        assert ours.ci_low == pytest.approx(low, abs=0.01) and ours.ci_high == pytest.approx(high, abs=0.01)


def test_null_table_is_the_observed_one_raked_to_the_tested_margins():
    # The closed form against iterative proportional fitting (Deming & Stephan), odds ratios from 3e-4 to 3e3.
    from multiverse.analysis.anchoring._ppi import _null_cell

    rng = np.random.default_rng(0)
    theta, m = rng.uniform(0.001, 0.999, (2, 300))
    omega = np.exp(rng.uniform(-8, 8, 300))
    table = np.stack([np.stack([omega, np.ones(300)], -1), np.ones((300, 2))], 1)  # (300, Y, f)
    for _ in range(400):
        table[:, 0] *= (theta / table[:, 0].sum(-1))[:, None]
        table[:, 1] *= ((1 - theta) / table[:, 1].sum(-1))[:, None]
        table[:, :, 0] *= (m / table[:, :, 0].sum(-1))[:, None]
        table[:, :, 1] *= ((1 - m) / table[:, :, 1].sum(-1))[:, None]
    assert _null_cell(theta, m, omega) == pytest.approx(table[:, 0, 0], abs=1e-9)
