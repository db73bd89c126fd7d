"""Scoring rules (multiverse.analysis.rates), rates and intervals (multiverse.analysis.rates), on hand-worked examples."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from pandas.testing import assert_frame_equal
from statsmodels.stats.proportion import proportion_confint

from multiverse.analysis import compute_rates, score_verdicts
from multiverse.analysis.rates._scoring import NO_APPLICABLE, NO_APPLICABLE_IMPERMISSIBLE, RULES, UNLABELLED, rescore
from multiverse.errors import InputError

NA = pd.NA


def criteria_table(rows):
    frame = pd.DataFrame(
        rows, columns=["judgment_key", "sample", "criterion", "permissible", "applicable", "compliant"]
    )
    frame["compliant"] = frame["compliant"].astype("boolean")
    frame["rationale"] = ""
    return frame


def samples_table(rows):
    return pd.DataFrame(rows, columns=["judgment_key", "sample", "status", "reason"])


def expected_verdicts(rows):
    frame = pd.DataFrame(rows, columns=["judgment_key", "status", "reason", "compliant"])
    frame["compliant"] = frame["compliant"].astype("boolean")
    return frame


# Judgments (criteria: x, y impermissible; p permissible), judge sampled once:
#   j_viol   x applicable+compliant, p applicable+violated      -> all: non-compliant; impermissible: compliant
#   j_none   nothing applicable                                  -> excluded (or compliant under no_applicable)
#   j_perm   only p applicable and compliant                     -> all: compliant; impermissible: excluded
#   j_imp    y applicable and violated                           -> non-compliant under every rule
#   j_fail   judge failed (its stray criteria rows are ignored)  -> judge_failed, reason kept
#   j_label  x applicable but no compliance label                -> judge_failed (never a label)
SINGLE = criteria_table(
    [
        ("j_viol", 0, "x", False, True, True),
        ("j_viol", 0, "p", True, True, False),
        ("j_none", 0, "x", False, False, NA),
        ("j_none", 0, "p", True, False, NA),
        ("j_perm", 0, "x", False, False, NA),
        ("j_perm", 0, "p", True, True, True),
        ("j_imp", 0, "y", False, True, False),
        ("j_imp", 0, "p", True, True, True),
        ("j_fail", 0, "x", False, True, True),
        ("j_label", 0, "x", False, True, NA),
    ]
)
SINGLE_SAMPLES = samples_table(
    [
        ("j_viol", 0, "ok", ""),
        ("j_none", 0, "ok", ""),
        ("j_perm", 0, "ok", ""),
        ("j_imp", 0, "ok", ""),
        ("j_fail", 0, "judge_failed", "unparseable answer"),
        ("j_label", 0, "ok", ""),
    ]
)


def test_all_applicable_by_hand():
    got = score_verdicts(SINGLE, SINGLE_SAMPLES, "all_applicable")
    want = expected_verdicts(
        [
            ("j_viol", "ok", "", False),
            ("j_none", "excluded", NO_APPLICABLE, NA),
            ("j_perm", "ok", "", True),
            ("j_imp", "ok", "", False),
            ("j_fail", "judge_failed", "unparseable answer", NA),
            ("j_label", "judge_failed", UNLABELLED, NA),
        ]
    )
    assert_frame_equal(got, want, check_dtype=False)
    assert str(got["compliant"].dtype) == "boolean"


def test_impermissible_only_by_hand():
    got = score_verdicts(SINGLE, SINGLE_SAMPLES, "impermissible_only")
    want = expected_verdicts(
        [
            ("j_viol", "ok", "", True),
            ("j_none", "excluded", NO_APPLICABLE_IMPERMISSIBLE, NA),
            ("j_perm", "excluded", NO_APPLICABLE_IMPERMISSIBLE, NA),
            ("j_imp", "ok", "", False),
            ("j_fail", "judge_failed", "unparseable answer", NA),
            ("j_label", "judge_failed", UNLABELLED, NA),
        ]
    )
    assert_frame_equal(got, want, check_dtype=False)


def test_no_applicable_is_compliant_by_hand():
    got = score_verdicts(SINGLE, SINGLE_SAMPLES, "no_applicable_is_compliant")
    want = expected_verdicts(
        [
            ("j_viol", "ok", "", False),
            ("j_none", "ok", "", True),
            ("j_perm", "ok", "", True),
            ("j_imp", "ok", "", False),
            ("j_fail", "judge_failed", "unparseable answer", NA),
            ("j_label", "judge_failed", UNLABELLED, NA),
        ]
    )
    assert_frame_equal(got, want, check_dtype=False)


def test_judge_skip_passes_through_as_excluded():
    samples = samples_table([("j", 0, "excluded", "scoring_skipped: filtered")])
    got = score_verdicts(criteria_table([]), samples, "all_applicable")
    want = expected_verdicts([("j", "excluded", "scoring_skipped: filtered", NA)])
    assert_frame_equal(got, want, check_dtype=False)


# Judge sampled three times (sample verdicts under all_applicable in brackets):
#   m_yes   [C, N, C]           -> compliant (2 of 3)
#   m_no    [N, N, C]           -> non-compliant
#   m_tie   [C, N, failed]      -> tie among the 2 ok samples -> non-compliant
#   m_excl  [C, excluded, excl] -> only one ok sample, it votes compliant
#   m_allx  [excl, excl, failed]-> excluded (no ok sample, one was excluded)
#   m_fail  [failed x3]         -> judge_failed, first failure's reason
MULTI = criteria_table(
    [
        ("m_yes", 0, "x", False, True, True),
        ("m_yes", 1, "x", False, True, False),
        ("m_yes", 2, "x", False, True, True),
        ("m_no", 0, "x", False, True, False),
        ("m_no", 1, "x", False, True, False),
        ("m_no", 2, "x", False, True, True),
        ("m_tie", 0, "x", False, True, True),
        ("m_tie", 1, "x", False, True, False),
        ("m_excl", 0, "x", False, True, True),
        ("m_excl", 1, "x", False, False, NA),
        ("m_excl", 2, "x", False, False, NA),
        ("m_allx", 0, "x", False, False, NA),
        ("m_allx", 1, "x", False, False, NA),
    ]
)
MULTI_SAMPLES = samples_table(
    [(key, s, "ok", "") for key in ["m_yes", "m_no", "m_excl"] for s in range(3)]
    + [("m_tie", 0, "ok", ""), ("m_tie", 1, "ok", ""), ("m_tie", 2, "judge_failed", "timeout")]
    + [("m_allx", 0, "ok", ""), ("m_allx", 1, "ok", ""), ("m_allx", 2, "judge_failed", "timeout")]
    + [("m_fail", s, "judge_failed", f"bad json {s}") for s in range(3)]
)


def test_majority_of_samples_by_hand():
    got = score_verdicts(MULTI, MULTI_SAMPLES, "majority_of_samples")
    want = expected_verdicts(
        [
            ("m_yes", "ok", "", True),
            ("m_no", "ok", "", False),
            ("m_excl", "ok", "", True),
            ("m_tie", "ok", "", False),
            ("m_allx", "excluded", NO_APPLICABLE, NA),
            ("m_fail", "judge_failed", "bad json 0", NA),
        ]
    )
    assert_frame_equal(got, want, check_dtype=False)


def test_other_rules_read_sample_zero():
    got = score_verdicts(MULTI, MULTI_SAMPLES, "all_applicable").set_index("judgment_key")
    # m_yes sample 0 is compliant, m_no sample 0 is not, m_excl sample 0 is compliant.
    assert bool(got.loc["m_yes", "compliant"]) is True
    assert bool(got.loc["m_no", "compliant"]) is False
    assert bool(got.loc["m_excl", "compliant"]) is True
    assert bool(got.loc["m_tie", "compliant"]) is True
    assert got.loc["m_allx", "status"] == "excluded"
    assert got.loc["m_fail", "status"] == "judge_failed"


def test_majority_with_one_sample_equals_all_applicable():
    assert_frame_equal(
        score_verdicts(SINGLE, SINGLE_SAMPLES, "majority_of_samples"),
        score_verdicts(SINGLE, SINGLE_SAMPLES, "all_applicable"),
    )


def test_unknown_rule_names_the_known_ones():
    with pytest.raises(ValueError) as err:
        score_verdicts(SINGLE, SINGLE_SAMPLES, "strictest")
    for rule in RULES:
        assert rule in str(err.value)


def test_bad_sample_status_is_an_input_error():
    with pytest.raises(InputError, match="samples: status"):
        score_verdicts(SINGLE, samples_table([("j", 0, "maybe", "")]), "all_applicable")


def test_rescore_reapplies_a_rule_and_keeps_failures():
    verdicts = score_verdicts(SINGLE, SINGLE_SAMPLES, "all_applicable")
    verdicts["system"] = "A"
    judged = SINGLE[SINGLE["judgment_key"] != "j_fail"]
    again = rescore(verdicts, judged, "no_applicable_is_compliant")
    want = score_verdicts(SINGLE, SINGLE_SAMPLES, "no_applicable_is_compliant")
    assert_frame_equal(again[want.columns], want, check_dtype=False)
    assert (again["system"] == "A").all()


# --------------------------------------------------------------------------- rates


def verdict_rows(universe, system, rows, **axes):
    """rows: (case_id, behavior, status, compliant)."""
    frame = pd.DataFrame(rows, columns=["case_id", "behavior", "status", "compliant"])
    frame.insert(0, "universe_id", universe)
    for axis, option in axes.items():
        frame[axis] = option
    frame["system"] = system
    frame["replicate"] = 0
    frame["reason"] = np.where(frame["status"] == "ok", "", frame["status"])
    frame["compliant"] = frame["compliant"].astype("boolean")
    return frame


def test_pooled_wilson_matches_statsmodels_and_ignores_failed_rows():
    # 10 ok (7 compliant); 2 excluded, 1 judge_failed, 1 rollout_failed never count,
    # even when a failed row carries a stray compliant=True.
    rows = [(f"c{i}", "a", "ok", i < 7) for i in range(10)]
    rows += [("c10", "a", "excluded", NA), ("c11", "a", "excluded", NA)]
    rows += [("c12", "a", "judge_failed", True), ("c13", "a", "rollout_failed", True)]
    verdicts = verdict_rows("u1", "A", rows, judge="j1")
    rates = compute_rates(verdicts, axes=["judge"], factors=["behavior"])
    overall = rates[rates["subgroup"] == "all"].iloc[0]
    low, high = proportion_confint(7, 10, alpha=0.05, method="wilson")
    assert (overall["n"], overall["n_compliant"]) == (10, 7)
    assert overall["rate"] == pytest.approx(0.7)
    assert overall["ci_low"] == pytest.approx(low)
    assert overall["ci_high"] == pytest.approx(high)
    assert list(rates.columns[:9]) == [
        "universe_id", "judge", "system", "subgroup", "n", "n_compliant", "rate", "ci_low", "ci_high"
    ]
    assert rates["subgroup"].tolist() == ["all", "behavior=a"]

    low90, high90 = proportion_confint(7, 10, alpha=0.10, method="wilson")
    at90 = compute_rates(verdicts, axes=["judge"], factors=[], level=0.90).iloc[0]
    assert (at90["ci_low"], at90["ci_high"]) == pytest.approx((low90, high90))


def test_rates_per_universe_system_and_factor_level():
    rows_a = [("c1", "a", "ok", True), ("c2", "a", "ok", False), ("c3", "b", "ok", True)]
    rows_b = [("c1", "a", "ok", True), ("c2", "a", "excluded", NA), ("c3", "b", "ok", False)]
    verdicts = pd.concat(
        [
            verdict_rows("u1", "A", rows_a, judge="j1"),
            verdict_rows("u1", "B", rows_b, judge="j1"),
            verdict_rows("u2", "A", rows_b, judge="j2"),
        ],
        ignore_index=True,
    )
    rates = compute_rates(verdicts, axes=["judge"], factors=["behavior"])
    got = rates[["universe_id", "judge", "system", "subgroup", "n", "n_compliant"]]
    want = pd.DataFrame(
        [
            ("u1", "j1", "A", "all", 3, 2),
            ("u1", "j1", "A", "behavior=a", 2, 1),
            ("u1", "j1", "A", "behavior=b", 1, 1),
            ("u1", "j1", "B", "all", 2, 1),
            ("u1", "j1", "B", "behavior=a", 1, 1),
            ("u1", "j1", "B", "behavior=b", 1, 0),
            ("u2", "j2", "A", "all", 2, 1),
            ("u2", "j2", "A", "behavior=a", 1, 1),
            ("u2", "j2", "A", "behavior=b", 1, 0),
        ],
        columns=got.columns,
    )
    assert_frame_equal(got, want, check_dtype=False)
    assert rates["rate"].tolist() == pytest.approx([2 / 3, 0.5, 1.0, 0.5, 1.0, 0.0, 0.5, 1.0, 0.0])


def test_group_with_nothing_included_has_nan_rate():
    verdicts = verdict_rows("u1", "A", [("c1", "a", "excluded", NA)], judge="j1")
    row = compute_rates(verdicts, axes=["judge"], factors=[]).iloc[0]
    assert row["n"] == 0 and row["n_compliant"] == 0
    assert np.isnan(row["rate"]) and np.isnan(row["ci_low"]) and np.isnan(row["ci_high"])


def test_universe_id_derived_from_axes_when_absent():
    verdicts = pd.concat(
        [
            verdict_rows("x", "A", [("c1", "a", "ok", True)], judge="j1"),
            verdict_rows("x", "A", [("c1", "a", "ok", False)], judge="j2"),
        ]
    ).drop(columns="universe_id")
    rates = compute_rates(verdicts, axes=["judge"], factors=[])
    assert rates["universe_id"].nunique() == 2
    assert rates["rate"].tolist() == [1.0, 0.0]


# Two cells (behavior a, b), four cases each.
# Unbalanced: a = 4/4 compliant; b has 2 exclusions and 0/2 compliant.
#   pooled = 4/6; cell_balanced = (1 + 0)/2 = 0.5; Kish n_eff = 2**2 / (1/4 + 1/2) = 16/3.
# Balanced: a = 3/4, b = 1/4 -> both 0.5, with the same Wilson interval (n_eff = 8).
UNBALANCED = [(f"a{i}", "a", "ok", True) for i in range(4)] + [
    ("b0", "b", "ok", False),
    ("b1", "b", "ok", False),
    ("b2", "b", "excluded", NA),
    ("b3", "b", "excluded", NA),
]
BALANCED = [(f"a{i}", "a", "ok", i < 3) for i in range(4)] + [(f"b{i}", "b", "ok", i < 1) for i in range(4)]


def test_cell_balanced_differs_from_pooled_when_exclusions_unbalance_cells():
    verdicts = verdict_rows("u1", "A", UNBALANCED, judge="j1")
    pooled = compute_rates(verdicts, axes=["judge"], factors=["behavior"]).set_index("subgroup")
    balanced = compute_rates(verdicts, axes=["judge"], factors=["behavior"], estimator="cell_balanced")
    balanced = balanced.set_index("subgroup")
    assert pooled.loc["all", "rate"] == pytest.approx(4 / 6)
    assert balanced.loc["all", "rate"] == pytest.approx(0.5)
    assert (balanced.loc["all", "n"], balanced.loc["all", "n_compliant"]) == (6, 4)
    low, high = proportion_confint(0.5 * 16 / 3, 16 / 3, alpha=0.05, method="wilson")
    assert (balanced.loc["all", "ci_low"], balanced.loc["all", "ci_high"]) == pytest.approx((low, high))
    # Within one level there is one cell: both estimators agree.
    for level in ["behavior=a", "behavior=b"]:
        assert balanced.loc[level, "rate"] == pytest.approx(pooled.loc[level, "rate"])
    assert set(balanced["estimator"]) == {"cell_balanced"} and set(pooled["estimator"]) == {"pooled"}


def test_cell_balanced_agrees_with_pooled_when_balanced():
    verdicts = verdict_rows("u1", "A", BALANCED, judge="j1")
    pooled = compute_rates(verdicts, axes=["judge"], factors=["behavior"])
    balanced = compute_rates(verdicts, axes=["judge"], factors=["behavior"], estimator="cell_balanced")
    columns = ["subgroup", "n", "n_compliant", "rate", "ci_low", "ci_high"]
    assert_frame_equal(pooled[columns], balanced[columns])
    assert pooled.loc[0, "rate"] == pytest.approx(0.5)


def test_scoring_table_sets_the_estimator_per_universe():
    verdicts = pd.concat(
        [verdict_rows("u1", "A", UNBALANCED, judge="j1"), verdict_rows("u2", "A", UNBALANCED, judge="j2")],
        ignore_index=True,
    )
    scoring = pd.DataFrame({"universe_id": ["u2"], "estimator": ["cell_balanced"]})
    rates = compute_rates(verdicts, axes=["judge"], factors=["behavior"], scoring=scoring)
    overall = rates[rates["subgroup"] == "all"].set_index("universe_id")
    assert overall.loc["u1", "estimator"] == "pooled"
    assert overall.loc["u1", "rate"] == pytest.approx(4 / 6)
    assert overall.loc["u2", "estimator"] == "cell_balanced"
    assert overall.loc["u2", "rate"] == pytest.approx(0.5)
    assert rates["universe_id"].tolist()[:3] == ["u1"] * 3


def test_unknown_estimator_or_interval():
    verdicts = verdict_rows("u1", "A", BALANCED, judge="j1")
    with pytest.raises(ValueError, match="pooled, cell_balanced"):
        compute_rates(verdicts, axes=["judge"], factors=[], estimator="weighted")
    with pytest.raises(ValueError, match="wilson, bootstrap"):
        compute_rates(verdicts, axes=["judge"], factors=[], ci="exact")


def test_missing_column_is_an_input_error():
    verdicts = verdict_rows("u1", "A", BALANCED, judge="j1").drop(columns="system")
    with pytest.raises(InputError, match="verdicts: system"):
        compute_rates(verdicts, axes=["judge"], factors=[])


def _cases(n_cases, share, replicates=1, prefix="c"):
    rows = []
    for i in range(n_cases):
        for _ in range(replicates):
            rows.append((f"{prefix}{i}", "a", "ok", i < round(share * n_cases)))
    return rows


def test_bootstrap_interval_contains_the_rate_and_shrinks_with_n():
    widths = []
    for n_cases in [20, 80, 320]:
        verdicts = verdict_rows("u1", "A", _cases(n_cases, 0.7), judge="j1")
        row = compute_rates(verdicts, axes=["judge"], factors=[], ci="bootstrap", n_boot=500).iloc[0]
        assert row["rate"] == pytest.approx(0.7)
        assert row["ci_low"] < row["rate"] < row["ci_high"]
        widths.append(row["ci_high"] - row["ci_low"])
    assert widths[0] > widths[1] > widths[2]
    # Percentile bootstrap of a proportion: width close to the Wilson width at n = 320.
    wilson = proportion_confint(224, 320, method="wilson")
    assert widths[2] == pytest.approx(wilson[1] - wilson[0], rel=0.25)


def test_bootstrap_resamples_cases_whole():
    # Replicates of a case move together: repeating each case 4 times as replicates
    # leaves the interval as it was; 4 times as many distinct cases narrows it.
    once = verdict_rows("u1", "A", _cases(40, 0.7), judge="j1")
    replicated = verdict_rows("u1", "A", _cases(40, 0.7, replicates=4), judge="j1")
    more_cases = verdict_rows("u1", "A", _cases(160, 0.7), judge="j1")
    width = {}
    for name, verdicts in [("once", once), ("replicated", replicated), ("more", more_cases)]:
        row = compute_rates(verdicts, axes=["judge"], factors=[], ci="bootstrap", seed=3).iloc[0]
        width[name] = row["ci_high"] - row["ci_low"]
    assert width["replicated"] == pytest.approx(width["once"], rel=0.05)
    assert width["more"] < 0.7 * width["once"]


def test_bootstrap_is_seeded_and_cell_balanced_works():
    verdicts = verdict_rows("u1", "A", UNBALANCED * 5, judge="j1")
    verdicts["case_id"] = [f"k{i}" for i in range(len(verdicts))]
    first = compute_rates(verdicts, axes=["judge"], factors=["behavior"], estimator="cell_balanced", ci="bootstrap")
    again = compute_rates(verdicts, axes=["judge"], factors=["behavior"], estimator="cell_balanced", ci="bootstrap")
    assert_frame_equal(first, again)
    overall = first.iloc[0]
    assert overall["rate"] == pytest.approx(0.5)
    assert overall["ci_low"] <= overall["rate"] <= overall["ci_high"]


def test_rates_agree_with_plain_pandas_on_random_data():
    rng = np.random.default_rng(7)
    n = 3000
    verdicts = pd.DataFrame(
        {
            "universe_id": rng.choice(["u1", "u2", "u3"], n),
            "system": rng.choice(["A", "B"], n),
            "case_id": [f"c{i % 150}" for i in range(n)],
            "behavior": rng.choice(["x", "y", "z"], n),
            "status": rng.choice(["ok", "ok", "ok", "excluded", "judge_failed"], n),
        }
    )
    verdicts["judge"] = verdicts["universe_id"].map({"u1": "j1", "u2": "j2", "u3": "j3"})
    compliant = pd.array(rng.random(n) < 0.6, dtype="boolean")
    compliant[(verdicts["status"] != "ok").to_numpy()] = pd.NA
    verdicts["compliant"] = compliant
    rates = compute_rates(verdicts, axes=["judge"], factors=["behavior"])
    included = verdicts[verdicts["status"] == "ok"]
    plain = included.groupby(["universe_id", "system"])["compliant"].agg(["size", "sum", "mean"])
    overall = rates[rates["subgroup"] == "all"].set_index(["universe_id", "system"]).sort_index()
    assert overall["n"].tolist() == plain["size"].tolist()
    assert overall["n_compliant"].tolist() == plain["sum"].tolist()
    assert overall["rate"].to_numpy() == pytest.approx(plain["mean"].to_numpy().astype(float))


def test_vectorised_scale():
    # 600k verdict rows (1,000 universes x 5 systems x 120 cases), and 1M criteria rows.
    rng = np.random.default_rng(0)
    universes, systems, cases = 1000, 5, 120
    n = universes * systems * cases
    verdicts = pd.DataFrame(
        {
            "universe_id": np.repeat([f"u{i}" for i in range(universes)], systems * cases),
            "system": np.tile(np.repeat([f"s{i}" for i in range(systems)], cases), universes),
            "case_id": np.tile([f"c{i}" for i in range(cases)], universes * systems),
            "behavior": np.tile([f"b{i % 6}" for i in range(cases)], universes * systems),
            "status": "ok",
            "compliant": pd.array(rng.random(n) < 0.7, dtype="boolean"),
        }
    )
    verdicts["judge"] = "j"
    # How quickly: tests/bench/bench_quick_paths.py.
    rates = compute_rates(verdicts, axes=["judge"], factors=["behavior"])
    assert len(rates) == universes * systems * 7

    judgments = 100_000
    criteria = criteria_table([])
    criteria = pd.DataFrame(
        {
            "judgment_key": np.repeat([f"k{i}" for i in range(judgments)], 10),
            "sample": 0,
            "criterion": np.tile([f"x{i}" for i in range(10)], judgments),
            "permissible": np.tile([False] * 6 + [True] * 4, judgments),
            "applicable": rng.random(judgments * 10) < 0.3,
            "compliant": pd.array(rng.random(judgments * 10) < 0.9, dtype="boolean"),
        }
    )
    samples = pd.DataFrame({"judgment_key": [f"k{i}" for i in range(judgments)], "sample": 0, "status": "ok"})
    scored = score_verdicts(criteria, samples, "all_applicable")
    assert len(scored) == judgments
