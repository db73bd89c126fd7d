"""Specification curve, joint inference and the curve figures."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
from pandas.testing import assert_frame_equal
from scipy import stats
from statsmodels.stats.proportion import proportion_confint
from synthetic import VERDICT_AXES as AXES
from synthetic import latent_verdicts

from multiverse.analysis import (
    case_matrix,
    curve_summary,
    difference_curve,
    indicator_matrix,
    joint_difference_test,
    joint_rate_test,
    spec_curve,
)
from multiverse.analysis._kernel import anova_terms, design_effect
from multiverse.analysis._kernel._intervals import icc_from_terms
from multiverse.analysis.inference import STATISTICS
from multiverse.analysis.inference._rate_null import fit_latent_null
from multiverse.errors import InputError

# --------------------------------------------------------------------------
# spec_curve
# --------------------------------------------------------------------------


def expected_curve(verdicts: pd.DataFrame, axes: list[str], primary=None) -> pd.DataFrame:
    """The curve in plain pandas."""
    ok = verdicts[(verdicts["status"] == "ok") & verdicts["compliant"].notna()]
    grouped = ok.groupby(["universe_id", *axes, "system"], observed=True)["compliant"]
    frame = grouped.agg(n="size", n_compliant="sum").reset_index()
    frame["n"] = frame["n"].astype(np.int64)
    frame["n_compliant"] = frame["n_compliant"].astype(np.int64)
    frame["rate"] = frame["n_compliant"] / frame["n"]
    # Kish's effective n: n / (1 + (m - 1) icc), icc the one-way ANOVA estimate over
    # cases; where a universe's own is undefined (no variation, or fewer than 5
    # labels of the rarer kind), the ANOVA pooled over the universes that have one.
    def icc(ss_b, ss_w, df_b, df_w, spread):
        ms_b, ms_w = ss_b / df_b, ss_w / df_w
        return np.clip((ms_b - ms_w) / (ms_b + (spread / df_b - 1) * ms_w), 0, 1)

    terms, size, cases, rarer = {}, {}, {}, {}
    for key, part in ok.groupby(["universe_id", "system"]):
        y = part["compliant"].astype(float)
        by_case = y.groupby(part["case_id"])
        m_c, p_c = by_case.size(), by_case.mean()
        big_n, c = len(y), len(m_c)
        terms[key] = np.array([(m_c * (p_c - y.mean()) ** 2).sum(), (m_c * p_c * (1 - p_c)).sum(),
                               c - 1, big_n - c, big_n - (m_c**2).sum() / big_n])
        size[key], cases[key] = (m_c**2).sum() / big_n, c
        rarer[key] = min(y.sum(), big_n - y.sum())
    varies = [key for key, t in terms.items() if t[0] + t[1] > 0 and rarer[key] >= 5]
    pooled = icc(*sum(terms[key] for key in varies))
    # Korn & Graubard: a variance estimated from C cases gets (t_{C-1} / z)^2.
    deff = {key: (1 + (size[key] - 1) * (icc(*t) if key in varies else pooled))
            * (stats.t.ppf(0.975, cases[key] - 1) / stats.norm.ppf(0.975)) ** 2
            for key, t in terms.items()}
    n_eff = frame["n"] / [deff[(u, s)] for u, s in zip(frame["universe_id"], frame["system"])]
    from conftest import modified_wilson

    low, high = modified_wilson(frame["rate"] * n_eff, n_eff)
    frame["ci_low"], frame["ci_high"] = np.asarray(low), np.asarray(high)
    frame = frame.sort_values(["system", "rate", "universe_id"], ignore_index=True)
    frame["position"] = frame.groupby("system").cumcount() + 1
    frame["is_primary"] = frame["universe_id"] == primary
    return frame


def test_spec_curve_matches_plain_pandas(verdicts):
    axes = list(AXES)
    curve = spec_curve(verdicts, axes=axes, primary="u003")
    assert_frame_equal(curve, expected_curve(verdicts, axes, "u003"), check_dtype=False)
    assert curve["position"].dtype == np.int64
    assert curve.attrs["level"] == 0.95
    assert curve.attrs["ci"] == "wilson"


def test_spec_curve_is_statsmodels_wilson_with_one_transcript_per_case():
    v = latent_verdicts(rates={"A": 0.1, "B": 0.95}, n_cases=36, replicates=1, seed=4)
    from conftest import modified_wilson

    curve = spec_curve(v, axes=list(AXES))
    low, high = modified_wilson(curve["n_compliant"], curve["n"])
    np.testing.assert_allclose(curve["ci_low"], low, atol=1e-12)
    np.testing.assert_allclose(curve["ci_high"], high, atol=1e-12)


def test_spec_curve_uses_the_ci_method_asked_for(verdicts):
    axes = list(AXES)
    wilson = spec_curve(verdicts, axes=axes)
    boot = spec_curve(verdicts, axes=axes, ci="bootstrap", n_boot=200)
    assert boot.attrs["ci"] == "bootstrap"
    # The bootstrap interval contains the Wilson one and is wider somewhere.
    assert (boot["ci_low"] <= wilson["ci_low"] + 1e-12).all()
    assert (boot["ci_high"] >= wilson["ci_high"] - 1e-12).all()
    assert ((boot["ci_high"] - boot["ci_low"]) > (wilson["ci_high"] - wilson["ci_low"]) + 1e-6).any()
    # Per universe: a table of settings, e.g. when the CI method is an axis.
    ids = sorted(verdicts["universe_id"].unique())
    table = pd.DataFrame({"universe_id": ids, "ci": ["bootstrap", "wilson"] * (len(ids) // 2),
                          "level": 0.9})
    mixed = spec_curve(verdicts, axes=axes, ci=table, n_boot=200)
    assert mixed.attrs["ci"] == "per universe" and mixed.attrs["level"] == 0.9
    narrow = spec_curve(verdicts, axes=axes, level=0.9)
    is_wilson = mixed["universe_id"].isin(ids[1::2]).to_numpy()
    np.testing.assert_allclose(mixed.loc[is_wilson, "ci_low"], narrow.loc[is_wilson, "ci_low"])
    with pytest.raises(InputError, match="ci"):
        spec_curve(verdicts, axes=axes, ci="wald")
    # Several bad methods: the first in sorted order is named, whatever order a set of strings iterates in
    # this process (it varies with PYTHONHASHSEED, so the words did from run to run).
    bad = table.assign(ci=[f"m{i:02d}" for i in range(len(ids))][::-1])
    with pytest.raises(InputError, match=rf"got 'm00' \(and {len(ids) - 1} more\)$"):
        spec_curve(verdicts, axes=axes, ci=bad)


def test_spec_curve_selects_and_orders_systems(verdicts):
    curve = spec_curve(verdicts, axes=list(AXES), system=["C", "A"])
    assert list(dict.fromkeys(curve["system"])) == ["C", "A"]
    one = spec_curve(verdicts, axes=list(AXES), system="B")
    expected = expected_curve(verdicts, list(AXES))
    expected = expected[expected["system"] == "B"].reset_index(drop=True)
    assert_frame_equal(one, expected, check_dtype=False)


@pytest.mark.parametrize("systems", [None, ["B"], ["B", "C"], ["C", "A"], ["A", "C"]])
def test_curve_rows_are_the_matrix_rows_shared_or_copied(verdicts, systems):
    from multiverse.analysis.curve._curve import _target_rows

    m = case_matrix(verdicts, axes=AXES)
    n_s, n_u = m.included.shape[:2]
    chosen = [m.systems.index(s) for s in systems] if systems else list(range(n_s))
    s_idx = np.repeat(chosen, n_u)
    u_idx = np.tile(np.arange(n_u), len(chosen))
    rows = _target_rows(m.included, s_idx, u_idx)
    assert np.array_equal(rows, m.included[s_idx, u_idx])
    # Every universe of systems in a row, in order: the matrix's own memory (no 0.5 GB copy at 100k universes).
    assert np.shares_memory(rows, m.included) == (chosen == list(range(chosen[0], chosen[0] + len(chosen))))
    fewer = u_idx != 1
    assert np.array_equal(_target_rows(m.included, s_idx[fewer], u_idx[fewer]), m.included[s_idx[fewer], u_idx[fewer]])


def test_universe_id_is_derived_from_axis_options(verdicts):
    bare = verdicts.drop(columns=["universe_id"])
    curve = spec_curve(bare, axes=list(AXES))
    # the same ids every analysis and load_run derive for a bare table
    from multiverse.core._keys import digest

    assert digest({"judge": "j1", "evidence": "strict", "scoring": "all"}, 12) in set(curve["universe_id"])
    assert curve["universe_id"].nunique() == 8
    with_ids = spec_curve(verdicts, axes=list(AXES))
    key = ["system", *AXES]
    left = curve.sort_values(key).reset_index(drop=True)[["rate", "n"]]
    right = with_ids.sort_values(key).reset_index(drop=True)[["rate", "n"]]
    assert_frame_equal(left, right)


def test_rows_without_ok_status_or_label_do_not_count():
    v = latent_verdicts(n_cases=10)
    v["status"] = "ok"
    v.loc[0, "status"] = "rollout_failed"
    v.loc[1, "compliant"] = pd.NA
    curve = spec_curve(v, axes=list(AXES))
    assert curve["n"].sum() == len(v) - 2
    # No status column: every labelled row counts.
    curve = spec_curve(v.drop(columns="status"), axes=list(AXES))
    assert curve["n"].sum() == len(v) - 1


def test_plain_bool_and_int_labels_are_accepted(verdicts):
    ok = verdicts[verdicts["status"] == "ok"].copy()
    as_bool = ok.assign(compliant=ok["compliant"].astype(bool))
    as_int = ok.assign(compliant=ok["compliant"].astype(int))
    assert_frame_equal(spec_curve(as_bool, axes=list(AXES)), spec_curve(as_int, axes=list(AXES)))


@pytest.mark.parametrize(
    "mutate, match",
    [
        (lambda v: v.drop(columns="case_id"), "case_id"),
        (lambda v: v.assign(compliant="yes"), "compliant"),
        (lambda v: v.assign(judge=np.where(np.arange(len(v)) % 2, "j1", "j2")), "judge"),
    ],
)
def test_bad_tables_raise_input_error(verdicts, mutate, match):
    with pytest.raises(InputError, match=match):
        spec_curve(mutate(verdicts), axes=list(AXES))


def test_unknown_primary_or_system_raises(verdicts):
    with pytest.raises(InputError, match="primary"):
        spec_curve(verdicts, axes=list(AXES), primary="nope")
    with pytest.raises(InputError, match="system"):
        spec_curve(verdicts, axes=list(AXES), system="Z")


def test_case_matrix_counts(verdicts):
    m = case_matrix(verdicts, axes=list(AXES))
    assert m.systems == ("A", "B", "C")
    assert m.compliant.shape == (3, 8, 30)
    ok = verdicts[verdicts["status"] == "ok"]
    counts = ok.groupby(["system", "universe_id", "case_id"]).size()
    assert m.included.sum() == len(ok)
    assert m.included[1, 2, 5] == counts.get(("B", "u002", "case005"), 0)
    # A prebuilt matrix gives the same curve as the table.
    assert_frame_equal(spec_curve(m, axes=list(AXES)), spec_curve(verdicts, axes=list(AXES)))


# --------------------------------------------------------------------------
# difference_curve
# --------------------------------------------------------------------------


def expected_difference(verdicts: pd.DataFrame, a: str, b: str) -> pd.DataFrame:
    """rate(a) - rate(b) over paired cases and its paired normal interval, in pandas."""
    ok = verdicts[verdicts["status"] == "ok"].astype({"compliant": float})
    per_case = ok.groupby(["universe_id", "case_id", "system"])["compliant"].agg(["sum", "size"])
    wide = per_case.unstack("system")
    wide = wide[wide[("size", a)].notna() & wide[("size", b)].notna()]
    rows = []
    for universe, cases in wide.groupby(level="universe_id"):
        na, nb = cases[("size", a)].sum(), cases[("size", b)].sum()
        d = cases[("sum", a)] / na - cases[("sum", b)] / nb
        w = (cases[("size", a)] + cases[("size", b)]) / (na + nb)
        diff = d.sum()
        k = len(cases)
        se = np.sqrt(k / (k - 1) * ((d - diff * w) ** 2).sum())
        rows.append({"universe_id": universe, "n_cases": k, "difference": diff, "se": se,
                     "rate_a": cases[("sum", a)].sum() / na,
                     "rate_b": cases[("sum", b)].sum() / nb})
    return pd.DataFrame(rows)


def test_difference_curve_matches_plain_pandas(verdicts):
    curve = difference_curve(verdicts, axes=list(AXES), a="B", b="A", primary="u001")
    expected = expected_difference(verdicts, "B", "A")
    got = curve.set_index("universe_id").loc[expected["universe_id"]].reset_index()
    assert_frame_equal(got[["universe_id", "n_cases", "difference", "rate_a", "rate_b"]],
                       expected[["universe_id", "n_cases", "difference", "rate_a", "rate_b"]],
                       check_dtype=False)
    half = stats.norm.ppf(0.975) * expected["se"].to_numpy()
    np.testing.assert_allclose(got["ci_high"] - got["difference"], half)
    np.testing.assert_allclose(got["z"], expected["difference"] / expected["se"])
    assert curve["difference"].is_monotonic_increasing
    assert curve["position"].tolist() == list(range(1, 9))
    assert curve.loc[curve["is_primary"], "universe_id"].tolist() == ["u001"]


def test_difference_curve_pairs_cases():
    v = latent_verdicts(n_cases=6)
    # System B lost case000 in u000: only 5 cases are paired there.
    drop = (v["universe_id"] == "u000") & (v["system"] == "B") & (v["case_id"] == "case000")
    curve = difference_curve(v[~drop], axes=list(AXES), a="A", b="B")
    paired = curve.set_index("universe_id")["n_cases"]
    assert paired["u000"] == 5 and paired["u001"] == 6
    with pytest.raises(InputError, match="different"):
        difference_curve(v, axes=list(AXES), a="A", b="A")


# --------------------------------------------------------------------------
# indicator_matrix and curve_summary
# --------------------------------------------------------------------------


def test_indicator_matrix(verdicts):
    curve = spec_curve(verdicts, axes=list(AXES), system="A")
    matrix = indicator_matrix(curve, list(AXES))
    assert list(matrix.index) == [
        ("judge", "j1"), ("judge", "j2"), ("evidence", "lenient"), ("evidence", "strict"),
        ("scoring", "all"), ("scoring", "imperm"),
    ]
    assert list(matrix.columns) == curve.sort_values("position")["universe_id"].tolist()
    assert matrix.dtypes.eq(bool).all()
    # Exactly one option per axis is on in every universe.
    assert (matrix.groupby(level="axis").sum() == 1).all().all()
    assert matrix.loc[("judge", "j2")].tolist() == (curve["judge"] == "j2").tolist()
    # Categorical columns keep their declared order.
    cat = curve.assign(evidence=pd.Categorical(curve["evidence"], ["strict", "lenient"]))
    assert list(indicator_matrix(cat, ["evidence"]).index.get_level_values("option")) == [
        "strict", "lenient"]
    with pytest.raises(InputError, match="one system"):
        indicator_matrix(spec_curve(verdicts, axes=list(AXES)), list(AXES))


def test_curve_summary_is_json(verdicts):
    curve = spec_curve(verdicts, axes=list(AXES), primary="u005")
    tests = [
        joint_rate_test(verdicts, axes=list(AXES), system="A", threshold=0.5, boot=99),
        joint_difference_test(verdicts, axes=list(AXES), a="C", b="A", boot=99),
    ]
    summary = json.loads(json.dumps(curve_summary(curve, tests=tests), allow_nan=False))
    assert summary["primary"] == "u005" and summary["n_universes"] == 8
    assert summary["level"] == 0.95
    a = summary["systems"]["A"]
    rates = curve.loc[curve["system"] == "A", "rate"]
    assert a["rate"] == pytest.approx(
        {"min": rates.min(), "median": rates.median(), "max": rates.max()})
    primary = curve[(curve["system"] == "A") & curve["is_primary"]].iloc[0]
    assert a["primary"]["rate"] == pytest.approx(primary["rate"])
    assert a["primary"]["position"] == primary["position"] and "rank" not in a["primary"]
    assert a["primary"]["percentile"] == pytest.approx(
        stats.percentileofscore(rates, primary["rate"], kind="mean"))
    assert a["primary"]["position_low"] <= a["primary"]["position"] <= a["primary"]["position_high"]
    rate_test, diff_test = summary["tests"]
    assert rate_test["kind"] == "rate" and diff_test["kind"] == "difference"
    assert set(rate_test["statistics"]) == set(STATISTICS)
    assert diff_test["direction"] == "greater"
    assert diff_test["primary_effect"] == pytest.approx(
        tests[1].effects.set_index("universe_id").loc["u005", "effect"])
    assert 0 < diff_test["statistics"]["median_effect"]["p"] <= 1


# --------------------------------------------------------------------------
# Joint inference: exact, hand-worked
# --------------------------------------------------------------------------


def tiny_pair() -> pd.DataFrame:
    """3 universes x 4 cases, one verdict per system and case.

    Per-case differences a - b:   u1: 1 1 0 0   u2: 1 0 0 1   u3: 1 0 0 0
    Effects (difference of rates): 0.5, 0.5, 0.25 -> median 0.5.
    Per-universe z (contributions d = diff/4, weights w = 1/4,
    se^2 = 4/3 * sum (d - D w)^2): u1, u2: 0.5 / sqrt(4/3 * 4 * 0.125^2) = sqrt 3;
    u3: 0.25 / sqrt(4/3 * (0.1875^2 + 3 * 0.0625^2)) = 1. Mean z = (2 sqrt 3 + 1) / 3.
    None exceeds 1.96.
    """
    a = {"u1": [1, 1, 1, 0], "u2": [1, 1, 0, 1], "u3": [1, 0, 1, 1]}
    b = {"u1": [0, 0, 1, 0], "u2": [0, 1, 0, 0], "u3": [0, 0, 1, 1]}
    rows = [
        {"universe_id": u, "system": s, "case_id": f"c{c + 1}", "compliant": bool(labels[u][c])}
        for s, labels in (("a", a), ("b", b)) for u in a for c in range(4)
    ]
    return pd.DataFrame(rows)


def test_exact_sign_flip_test_by_hand():
    test = joint_difference_test(tiny_pair(), a="a", b="b", boot=1000)
    assert test.exact and test.boot == 16
    assert test.observed["median_effect"] == pytest.approx(0.5)
    assert test.observed["n_significant"] == 0
    assert test.observed["stouffer_z"] == pytest.approx((2 * np.sqrt(3) + 1) / 3)
    np.testing.assert_allclose(test.effects["z"], [np.sqrt(3), np.sqrt(3), 1.0])
    # Flips (s1..s4): effects are u1 (s1+s2)/4, u2 (s1+s4)/4, u3 s1/4. Only
    # s1 = s2 = s4 (4 of 16 patterns, s3 free) reach median 0.5 and mean
    # z (2 sqrt 3 + 1)/3; every pattern has count >= 0.
    assert test.p == pytest.approx({"median_effect": 4 / 16, "n_significant": 1.0,
                                    "stouffer_z": 4 / 16})


def brute_force_flip_stats(frame: pd.DataFrame, z_crit: float) -> np.ndarray:
    """All 2**cases sign flips, one loop per pattern, in plain pandas."""
    wide = frame.pivot_table(index=["universe_id", "case_id"], columns="system",
                             values="compliant", aggfunc="mean").astype(float)
    d = (wide["a"] - wide["b"]).unstack("case_id") / 4
    out, sign = [], 0.0
    for signs in itertools.product((1, -1), repeat=4):  # the first pattern is the observed data
        flipped = d * np.array(signs)
        diff = flipped.sum(axis=1)
        se = np.sqrt(4 / 3 * ((flipped.sub(diff / 4, axis=0)) ** 2).sum(axis=1))
        z = (diff / se).where(se > 0, 0.0)
        median = diff.median()
        # Every null curve is oriented by the observed dominant direction.
        sign = sign or np.sign(median) or np.sign(z.mean()) or 1.0
        out.append([sign * median, int((sign * z > z_crit).sum()), sign * z.mean()])
    return np.array(out)


def test_exact_null_statistics_match_brute_force():
    test = joint_difference_test(tiny_pair(), a="a", b="b")
    expected = brute_force_flip_stats(tiny_pair(), stats.norm.ppf(0.975))
    np.testing.assert_allclose(test.null_stats, expected, atol=1e-12)


def test_rate_null_imposes_t_with_the_dependence_of_the_data():
    """Null curves: mean t, variance t(1-t) deff / n, universes correlated as the data are."""
    # No transcript shared across universes: replicates of a case are as alike
    # within a universe as across universes, which the null can represent.
    v = latent_verdicts(rates={"A": 0.3, "B": 0.3}, option_shift=0.0, n_cases=40, replicates=2,
                      transcript_share=0.0, seed=3)
    m = case_matrix(v, axes=list(AXES))
    n_uc, k_uc = m.included[0], m.compliant[0]
    fit = fit_latent_null(n_uc, k_uc)
    # The label-scale correlations are the plain moment estimates: compare with
    # Pearson correlations of per-case rates across universe pairs, which
    # estimate rho_b (one label per cell: m = 2 replicates here, so the
    # per-case rate's variance carries (1 + rho_w) / 2 of the label variance).
    per_case = k_uc / n_uc
    pearson = np.corrcoef(per_case)[np.triu_indices(len(per_case), 1)].mean()
    assert fit.rho_between == pytest.approx(pearson * (1 + fit.rho_within) / 2, abs=0.05)
    # At t = the pooled rate, label-scale correlations carry over unchanged.
    t = fit.pooled_rate
    draws = fit.draw_rates(t, 4000, np.random.default_rng(0))
    n = n_uc.sum(axis=1)
    assert abs(draws.mean() - t) < 4 * np.sqrt(t * (1 - t) / n.mean() / 4000)
    expected_var = t * (1 - t) / n * (1 + fit.rho_within)  # deff = 1 + (2 - 1) rho_w
    ratio = draws.var(axis=0) / expected_var
    assert 0.7 < ratio.mean() < 1.4, ratio
    corr = np.corrcoef(draws.T)[np.triu_indices(draws.shape[1], 1)].mean()
    assert corr == pytest.approx(2 * fit.rho_between / (1 + fit.rho_within), abs=0.12)


def test_rate_test_observed_effects_and_z_by_hand():
    v = latent_verdicts(n_cases=12, replicates=2, fail=0.1, seed=3)
    test = joint_rate_test(v, axes=list(AXES), system="A", threshold=0.5, boot=25, seed=11)
    ok = v[(v["status"] == "ok") & (v["system"] == "A")].astype({"compliant": float})
    rate = ok.groupby("universe_id")["compliant"].mean()
    n = ok.groupby("universe_id").size()
    effects = test.effects.set_index("universe_id")
    np.testing.assert_allclose(effects["effect"], (rate - 0.5).reindex(effects.index))
    # z at Kish's n / deff, the design effect of the curve's own Wilson intervals (2 replicates a case).
    m = case_matrix(v, axes=list(AXES))
    s = m.system_index("A")
    terms = anova_terms(m.included[s], m.compliant[s])
    own = icc_from_terms(terms)
    icc = np.where(np.isfinite(own), own, icc_from_terms(terms[np.isfinite(own)].sum(axis=0))[0])
    n_eff = pd.Series(m.included[s].sum(axis=1) / design_effect(m.included[s], icc, 0.95),
                      index=m.universes["universe_id"])
    assert (n_eff < n.reindex(n_eff.index)).all()
    z = ((rate - 0.5) / np.sqrt(0.25 / n_eff)).reindex(effects.index)
    np.testing.assert_allclose(effects["z"], z)
    # Significant exactly when the plain Wilson interval at that n excludes t.
    low, high = proportion_confint(rate.reindex(effects.index) * n_eff.reindex(effects.index),
                                   n_eff.reindex(effects.index), method="wilson")
    assert ((np.abs(z) > stats.norm.ppf(0.975)) == ((high < 0.5) | (low > 0.5))).all()
    # Two-sided p = 2 (1 + #{null >= observed}) / (B + 1), null oriented by the observed direction.
    oriented = test.observed["median_effect"] * test.direction
    assert test.p["median_effect"] == pytest.approx(
        min(1.0, 2 * (1 + (test.null_stats[:, 0] >= oriented - 1e-9).sum()) / 26))


def test_band_is_percentiles_of_sorted_null_curves():
    test = joint_difference_test(tiny_pair(), a="a", b="b", band_level=0.5)
    flips = np.array(list(itertools.product((1.0, -1.0), repeat=4)))
    d = np.array([[1, 1, 0, 0], [1, 0, 0, 1], [1, 0, 0, 0]]) / 4
    curves = np.sort(flips @ d.T, axis=1)
    expected = np.percentile(curves, [25, 50, 75], axis=0)
    np.testing.assert_allclose(test.band[["low", "median", "high"]].to_numpy().T, expected,
                               atol=1e-7)
    assert test.band["position"].tolist() == [1, 2, 3]


def test_universes_are_resampled_together():
    """Identical universes stay identical in every null curve: never resampled apart."""
    one = latent_verdicts(axes={"judge": ["j1"]}, n_cases=40, seed=5)
    copies = pd.concat([one.assign(universe_id=f"copy{k}") for k in range(6)])
    test = joint_rate_test(copies, axes=["judge"], system="A", threshold=0.5, boot=200)
    assert set(np.unique(test.null_stats[:, 1])) <= {0.0, 6.0}
    flip = joint_difference_test(copies, axes=["judge"], a="A", b="B", boot=200)
    assert set(np.unique(flip.null_stats[:, 1])) <= {0.0, 6.0}


def test_seed_makes_it_deterministic(verdicts):
    first = joint_rate_test(verdicts, axes=list(AXES), system="B", threshold=0.6, boot=50, seed=7)
    again = joint_rate_test(verdicts, axes=list(AXES), system="B", threshold=0.6, boot=50, seed=7)
    other = joint_rate_test(verdicts, axes=list(AXES), system="B", threshold=0.6, boot=50,
                            seed=np.random.default_rng(8))
    np.testing.assert_array_equal(first.null_stats, again.null_stats)
    assert not np.array_equal(first.null_stats, other.null_stats)
    assert other.to_dict()["seed"] == "generator"


def test_fixed_direction_is_one_sided():
    v = latent_verdicts(rates={"A": 0.75, "B": 0.6}, option_shift=0.0, n_cases=60, seed=2)
    greater = joint_difference_test(v, axes=list(AXES), a="A", b="B", direction="greater",
                                    boot=199)
    less = joint_difference_test(v, axes=list(AXES), a="A", b="B", direction="less", boot=199)
    assert greater.p["median_effect"] < 0.05 < less.p["median_effect"]
    with pytest.raises(InputError, match="direction"):
        joint_difference_test(v, axes=list(AXES), a="A", b="B", direction="up")


def test_bad_arguments_raise(verdicts):
    with pytest.raises(InputError, match="threshold"):
        joint_rate_test(verdicts, axes=list(AXES), system="A", threshold=1.0)
    with pytest.raises(InputError, match="boot"):
        joint_rate_test(verdicts, axes=list(AXES), system="A", threshold=0.5, boot=0)
    with pytest.raises(InputError, match="system"):
        joint_difference_test(verdicts, axes=list(AXES), a="A", b="Z")


# --------------------------------------------------------------------------
# Joint inference: behaviour under the null and power
# --------------------------------------------------------------------------

DRAWS = 200


def null_p_values(kind: str) -> np.ndarray:
    out = []
    for draw in range(DRAWS):
        v = latent_verdicts(rates={"A": 0.6, "B": 0.6}, option_shift=0.0, n_cases=40,
                          seed=1000 + draw)
        m = case_matrix(v, axes=list(AXES))
        if kind == "difference":
            test = joint_difference_test(m, a="A", b="B", boot=99, seed=draw)
        else:
            test = joint_rate_test(m, system="A", threshold=0.6, boot=99, seed=draw)
        out.append([test.p[name] for name in STATISTICS])
    return np.array(out)


def assert_valid(p: np.ndarray, name: str) -> None:
    """P(p <= alpha) <= alpha, up to binomial noise over DRAWS draws."""
    for alpha in (0.05, 0.1, 0.2):
        k = int((p <= alpha).sum())
        assert k <= stats.binom.ppf(0.999, DRAWS, alpha), (name, alpha, k)


def test_sign_flip_p_values_are_uniform_under_the_null():
    p = null_p_values("difference")
    for column, name in enumerate(STATISTICS):
        assert_valid(p[:, column], name)
    # Mean z is close to continuous, so its p-value is uniform. The median
    # effect and the count are discrete (ties with the observed value make
    # p conservative; the count is mostly 0, an atom at p = 1): valid only.
    assert stats.kstest(p[:, STATISTICS.index("stouffer_z")], "uniform").pvalue > 0.01


def test_rate_null_holds_its_level_under_the_null():
    p = null_p_values("rate")
    for column, name in enumerate(STATISTICS):
        assert_valid(p[:, column], name)
    assert stats.kstest(p[:, STATISTICS.index("stouffer_z")], "uniform").pvalue > 0.001


def test_joint_tests_have_power():
    hits = {"difference": 0, "rate": 0}
    for draw in range(20):
        v = latent_verdicts(rates={"A": 0.72, "B": 0.55}, option_shift=0.03, n_cases=80,
                          seed=500 + draw)
        m = case_matrix(v, axes=list(AXES))
        hits["difference"] += joint_difference_test(m, a="A", b="B", boot=199,
                                                    seed=draw).p["stouffer_z"] <= 0.05
        hits["rate"] += joint_rate_test(m, system="A", threshold=0.55, boot=199,
                                        seed=draw).p["stouffer_z"] <= 0.05
    assert hits["difference"] >= 16 and hits["rate"] >= 16, hits


# --------------------------------------------------------------------------
# Figures
# --------------------------------------------------------------------------


def many_universes(n_panels: int) -> tuple[pd.DataFrame, list[str]]:
    """8 x n_panels universes (32 -> 256: dense lines; 100 -> 800: raster strips)."""
    axes = {"panel": [f"p{k:03d}" for k in range(n_panels)], **AXES}
    return latent_verdicts(axes=axes, n_cases=20), list(axes)


def test_analysis_never_imports_matplotlib():
    code = ("import sys, multiverse.analysis.curve, multiverse.analysis.inference; "
            "assert 'matplotlib' not in sys.modules; assert 'litellm' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.parametrize("n_panels", [1, 32, 100])
def test_plot_curve_aligns_panels(tmp_path, verdicts, n_panels):
    from multiverse.plots import plot_curve

    if n_panels == 1:
        v, axes = verdicts, list(AXES)
    else:
        v, axes = many_universes(n_panels)
    primary = v["universe_id"].iloc[0]
    curve = spec_curve(v, axes=axes, primary=primary)
    test = joint_rate_test(v, axes=axes, system="A", threshold=0.5, boot=50)
    fig = plot_curve(curve, axes=axes, system="A", null_band=test.band, reference=0.5)
    top, bottom = fig.axes
    n = (curve["system"] == "A").sum()
    assert top.get_xlim() == bottom.get_xlim() == (0.5, n + 0.5)
    labels = [t.get_text() for t in bottom.get_yticklabels()]
    assert labels == [str(o) for _, o in indicator_matrix(curve[curve.system == "A"], axes).index]
    assert any("primary" in t.get_text() for t in top.texts)
    fig.savefig(tmp_path / "curve.png", dpi=60)
    assert (tmp_path / "curve.png").stat().st_size > 0


def test_plot_difference_and_small_multiples(tmp_path, verdicts):
    from multiverse.plots import plot_curves, plot_difference_curve

    axes = list(AXES)
    diff = difference_curve(verdicts, axes=axes, a="C", b="A", primary="u002")
    test = joint_difference_test(verdicts, axes=axes, a="C", b="A", boot=50)
    fig = plot_difference_curve(diff, axes=axes, null_band=test.band)
    assert "rate(C)" in fig.axes[0].get_ylabel()
    fig.savefig(tmp_path / "diff.png", dpi=60)
    curve = spec_curve(verdicts, axes=axes, primary="u002")
    fig = plot_curves(curve, axes=axes)
    assert len(fig.axes) == 2 * 3
    fig.savefig(tmp_path / "multi.png", dpi=60)


def test_plot_rejects_mismatched_input(verdicts):
    from multiverse.plots import plot_curve

    curve = spec_curve(verdicts, axes=list(AXES))
    with pytest.raises(InputError, match="system"):
        plot_curve(curve, axes=list(AXES))
    band = pd.DataFrame({"position": [1, 2], "low": [0, 0], "median": [0, 0], "high": [1, 1]})
    with pytest.raises(InputError, match="null_band"):
        plot_curve(curve, axes=list(AXES), system="A", null_band=band)


def _tied_curve(rates: list[float], primary: int) -> pd.DataFrame:
    """A one-system curve frame with these rates (universe ids u00, u01, ...), the primary at ``primary``."""
    ids = [f"u{i:02d}" for i in range(len(rates))]
    frame = pd.DataFrame({"universe_id": ids, "system": "A", "rate": rates, "ci_low": 0.0, "ci_high": 1.0})
    frame = frame.sort_values(["rate", "universe_id"], kind="stable", ignore_index=True)
    frame["position"] = np.arange(1, len(frame) + 1)
    frame["is_primary"] = frame["universe_id"] == ids[primary]
    return frame


def test_position_and_percentile_agree_under_ties():
    """The issue's case: 24 universes, 18 of them at the primary's rate. The position drawn from the
    universe ids (13) alone would contradict a mid-rank percentile of 62.5; the tied range does not."""
    from multiverse.analysis import position_words

    rates = [0.5 + 0.01 * i for i in range(6)] + [0.95] * 18
    # the primary is the 7th of the tied universes by id, so its drawn position is 13
    frame = _tied_curve(rates, primary=12)
    entry = curve_summary(frame)["systems"]["A"]["primary"]
    assert entry["position"] == 13
    assert (entry["position_low"], entry["position_high"]) == (7, 24)
    assert entry["percentile"] == pytest.approx(62.5)
    assert entry["percentile"] == pytest.approx(stats.percentileofscore(rates, 0.95, kind="mean"))
    assert position_words(entry["position_low"], entry["position_high"], 24) == "7th–24th lowest of 24 (18 tied)"
    assert position_words(21, 21, 24) == "21st lowest of 24"
    assert position_words(12, 12, 112) == "12th lowest of 112"


@pytest.mark.parametrize("seed", range(5))
def test_every_universe_as_primary_gets_a_range_that_holds_its_position_and_percentile(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 40))
    rates = (rng.integers(0, 4, n) / 4).tolist()  # few distinct values: ties everywhere
    for primary in range(n):
        frame = _tied_curve(rates, primary)
        entry = curve_summary(frame)["systems"]["A"]["primary"]
        value = rates[primary]
        low, high = entry["position_low"], entry["position_high"]
        assert low <= entry["position"] <= high
        assert high - low + 1 == rates.count(value)
        assert low - 1 == sum(r < value for r in rates)
        assert entry["percentile"] == pytest.approx(stats.percentileofscore(rates, value, kind="mean"))
        assert entry["percentile"] == pytest.approx(100 * ((low + high) / 2 - 0.5) / n)
