"""Formulas written out where a library's import would cost every first curve or agreement a second or more
(statsmodels imports scipy.stats): each is held to the library it replaces, value for value, on random
inputs and on the edges an audit meets (ties, p-values past 1 after adjustment, rates of 0 and 1,
fractional effective sizes, empty cells)."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from scipy import special, stats
from statsmodels.stats.inter_rater import cohens_kappa
from statsmodels.stats.multitest import multipletests
from statsmodels.stats.proportion import proportion_confint

from multiverse.analysis import cohen_kappa, holm
from multiverse.analysis._kernel._intervals import _wilson_bounds


@pytest.mark.slow
def test_holm_is_statsmodels_holm_value_for_value():
    rng = np.random.default_rng(0)
    cases = [[0.01, 0.04, 0.03, 0.2], [0.5, 0.5, 0.5], [1.0, 0.0], [0.3, 0.3, 0.01, 0.9, 0.9]]
    for size in (2, 3, 7, 30, 200):
        cases.append(rng.uniform(0, 1, size).tolist())
        cases.append(np.round(rng.uniform(0, 0.2, size), 2).tolist())  # many ties
        cases.append((rng.uniform(0, 1, size) ** 6).tolist())  # small p-values, adjusted past 1 at the top
    for p in cases:
        assert holm(p) == multipletests(np.asarray(p), method="holm")[1].tolist()
    assert holm([0.2]) == [0.2] and holm([]) == []


def test_cohen_kappa_is_statsmodels_kappa_value_for_value():
    rng = np.random.default_rng(1)
    tables = [np.array([[40.0, 9], [6, 45]]), np.array([[0.0, 3], [4, 0]]), np.array([[10.0, 0], [0, 0.5]])]
    tables += [rng.integers(0, 50, (q, q)).astype(float) for q in (2, 2, 3, 5) for _ in range(5)]
    tables += [rng.uniform(0, 3, (2, 2)) for _ in range(5)]  # weighted counts
    for table in tables:
        assert cohen_kappa(table) == cohens_kappa(table, return_results=False)
    assert np.isnan(cohen_kappa([[5, 0], [0, 0]]))  # both judges always agree on one label: chance is 1
    assert np.isnan(cohen_kappa([[0, 0], [0, 0]]))


def test_wilson_bounds_are_statsmodels_wilson_interval_value_for_value():
    rng = np.random.default_rng(2)
    n = np.concatenate([rng.uniform(0.2, 400, 5000), rng.integers(1, 120, 5000).astype(float), [1.0, 2.5, 36.0]])
    x = n * np.concatenate([rng.uniform(0, 1, 5000), rng.integers(0, 3, 5000) / 2, [0.0, 1.0, 35 / 36]])
    for level in (0.5, 0.8, 0.9, 0.95, 0.99, 0.999):
        low, high = _wilson_bounds(x, n, level)
        expected = proportion_confint(x, n, alpha=1 - level, method="wilson")
        assert np.array_equal(low, expected[0]) and np.array_equal(high, expected[1])


def test_quantiles_by_special_functions_are_scipy_stats_quantiles():
    """norm.ppf, t.ppf (df >= 1, upper half) and gamma.ppf as the curve, its intervals, the anchoring and the
    score agreement read them."""
    rng = np.random.default_rng(3)
    for level in (0.5, 0.8, 0.9, 0.95, 0.99, 0.999):
        for q in (0.5 + level / 2, 1 - (1 - level) / 2):
            assert special.ndtri(q) == stats.norm.ppf(q)
            df = np.concatenate([[1.0, 2.0, 29.0], np.maximum(rng.integers(0, 400, 300) - 1.0, 1.0)])
            assert np.array_equal(special.stdtrit(df, q), stats.t.ppf(q, df))
        shape = np.concatenate([[1.0, 2.0, 3.0], rng.uniform(0.01, 6, 300)])
        assert np.array_equal(special.gammaincinv(shape, (1 - level) / 2), stats.gamma.ppf((1 - level) / 2, shape))


def test_the_curve_imports_neither_statsmodels_nor_scipy_stats():
    """What this file's formulas are for: a first curve does not pay for those imports."""
    code = ("import sys, pandas as pd, multiverse as mv\n"
            "from multiverse.analysis import case_matrix, spec_curve, joint_rate_test, curve_summary\n"
            "rows = [{'universe_id': f'u{u}', 'judge': f'j{u % 2}', 'system': s, 'case_id': f'c{c}',\n"
            "         'status': 'ok', 'compliant': (u + c + len(s)) % 3 > 0}\n"
            "        for u in range(4) for s in ('a', 'b') for c in range(12)]\n"
            "v = pd.DataFrame(rows)\n"
            "m = case_matrix(v, axes=['judge'])\n"
            "curve = spec_curve(m, axes=['judge'])\n"
            "test = joint_rate_test(m, system='a', threshold=0.5, boot=50)\n"
            "curve_summary(curve, tests=[test])\n"
            "print(sorted(m for m in ('scipy.stats', 'statsmodels') if m in sys.modules))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr


@pytest.mark.parametrize("p", [[0.04, float("nan"), 0.01], [float("nan"), float("nan")]])
def test_holm_with_a_missing_p_value_is_statsmodels_holm(p):
    expected = multipletests(np.asarray(p), method="holm")[1].tolist()
    got = holm(p)
    assert [g if g == g else None for g in got] == [e if e == e else None for e in expected]


def test_the_exact_mcnemar_test_is_scipy_binomtest():
    from multiverse.analysis.ranking._uncertainty import exact_mcnemar

    rng = np.random.default_rng(4)
    pairs = [(k, n) for n in range(1, 60) for k in range(n + 1)]
    pairs += [(int(k), n) for n in (97, 400, 1001, 5000) for k in rng.integers(0, n + 1, 15)]
    for k, n in pairs:
        assert exact_mcnemar(k, n) == pytest.approx(stats.binomtest(k, n, 0.5).pvalue, rel=1e-10, abs=1e-300)


def test_the_four_analyses_of_a_run_import_neither_statsmodels_nor_scipy_stats(tmp_path):
    """Curve with joint tests, agreement, ranking (its pairwise exact tests included) and variance, as a
    notebook runs them on a run folder."""
    import pandas as pd

    from multiverse.tables._writer import write_run_folder

    rng = np.random.default_rng(5)
    rows = [{"universe_id": f"{judge}-{user}", "judge": judge, "user": user, "system": system, "case_id": f"c{c}",
             "transcript_key": f"{user}-{system}-{c}", "judgment_key": f"{judge}-{user}-{system}-{c}",
             "status": "ok", "compliant": bool(rng.random() < {"a": 0.5, "b": 0.8}[system])}
            for judge in ("j0", "j1") for user in ("u0", "u1") for system in ("a", "b") for c in range(40)]
    rates = pd.DataFrame({"universe_id": ["j0-u0"], "system": ["a"], "rate": [0.5]})
    write_run_folder(tmp_path / "run", verdicts=pd.DataFrame(rows), criteria=None, rates=rates,
                     manifest={"axes": ["judge", "user"], "factors": []})
    code = ("import sys, multiverse as mv\n"
            f"r = mv.load_run({str(tmp_path / 'run')!r})\n"
            "r.curve(threshold=0.6); r.agreement(axis='judge'); r.ranking(boot=50); r.variance()\n"
            "print(sorted(m for m in ('scipy.stats', 'statsmodels') if m in sys.modules))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip().splitlines()[-1] == "[]", out.stdout + out.stderr
