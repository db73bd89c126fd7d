"""Agreement between the options of an axis: coefficients, pairing, degenerate cases, figures."""

from __future__ import annotations

import io
import itertools

import krippendorff
import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import cohen_kappa_score
from statsmodels.stats.inter_rater import cohens_kappa

from multiverse.analysis import agreement, cohen_kappa, gwet_ac1, pair_matrix
from multiverse.errors import InputError

# Two judges label the same ten transcripts of one system (hand-worked below).
J1 = [1, 1, 1, 1, 1, 1, 0, 0, 0, 0]
J2 = [1, 1, 1, 1, 0, 0, 0, 0, 0, 1]


def judge_verdicts(labels: dict[str, list[int]], *,
                   contexts: dict[str, list[str]] | None = None) -> pd.DataFrame:
    """Verdicts where each judge labels the same transcripts, repeated in every context of other axes."""
    contexts = contexts or {}
    rows = []
    for combo in itertools.product(*contexts.values()):
        for judge, flags in labels.items():
            for case, flag in enumerate(flags):
                options = dict(zip(contexts, combo))
                rows.append({
                    "universe_id": f"{judge}-{'-'.join(combo)}",
                    "judge": judge, **options, "system": "alpha", "case_id": f"case{case}",
                    "replicate": 0, "transcript_key": f"t{case}",
                    "judgment_key": f"{judge}-t{case}", "status": "ok", "compliant": bool(flag),
                })
    frame = pd.DataFrame(rows)
    frame["compliant"] = frame["compliant"].astype("boolean")
    return frame


# --------------------------------------------------------------------------- coefficients


def test_gwet_ac1_hand_worked_binary_table():
    # a compliant on 90 of 100, b on 85; they agree on 85.
    # pi = (90 + 85) / 200 = 0.875, p_e = 2 * 0.875 * 0.125 = 0.21875,
    # AC1 = (0.85 - 0.21875) / (1 - 0.21875) = 0.808 exactly;
    # kappa's p_e = 0.9 * 0.85 + 0.1 * 0.15 = 0.78, kappa = 0.07 / 0.22: the prevalence paradox.
    table = [[80, 10], [5, 5]]
    assert gwet_ac1(table) == pytest.approx(0.808, abs=1e-12)
    assert cohen_kappa(table) == pytest.approx(0.07 / 0.22, abs=1e-12)


def test_gwet_ac1_published_example():
    # Gwet's 3 x 3 abstractors table (irrCAC's cont3x3abstractors): AC1 = 0.849, kappa = 0.7964
    # (the R package irrCAC's documented output for gwet.ac1.table and kappa2.table).
    table = [[13, 0, 0], [0, 20, 7], [0, 4, 56]]
    assert round(gwet_ac1(table), 3) == 0.849
    assert gwet_ac1(table) == pytest.approx(0.620075 / 0.730075, rel=1e-9)
    assert cohen_kappa(table) == pytest.approx(0.7964094, abs=1e-7)


def test_cohen_kappa_is_statsmodels_and_nan_when_chance_agreement_is_one():
    table = np.array([[31, 4], [7, 18]])
    assert cohen_kappa(table) == cohens_kappa(table, return_results=False)
    assert np.isnan(cohen_kappa([[12, 0], [0, 0]]))
    assert gwet_ac1([[12, 0], [0, 0]]) == 1.0
    assert np.isnan(gwet_ac1([[0, 0], [0, 0]]))


# --------------------------------------------------------------------------- agreement


def test_pair_measures_hand_worked():
    result = agreement(judge_verdicts({"j1": J1, "j2": J2}), axes=["judge"], axis="judge")
    assert result["options"] == ["j1", "j2"]
    assert result["paired_on"] == "transcript"
    assert result["n_units"] == 10
    (pair,) = result["pairs"]
    assert pair["a"] == "j1" and pair["b"] == "j2" and pair["n"] == 10
    assert pair["confusion"] == {"both_compliant": 4, "a_only_compliant": 2,
                                 "b_only_compliant": 1, "both_noncompliant": 3}
    assert pair["percent"] == pytest.approx(0.7)
    # p_e = 0.6 * 0.5 + 0.4 * 0.5 = 0.5 -> kappa = 0.4
    assert pair["cohen_kappa"] == pytest.approx(0.4)
    # pi = 11 / 20, p_e = 2 * 0.55 * 0.45 = 0.495 -> AC1 = 0.205 / 0.505
    assert pair["gwet_ac1"] == pytest.approx(0.205 / 0.505)
    assert pair["bias"] == pytest.approx(0.1)  # rate(j1) 0.6 - rate(j2) 0.5
    # coincidences: o_01 = 3, n_0 = 9, n_1 = 11, n = 20 -> alpha = 1 - 19 * 3 / 99
    assert result["krippendorff_alpha"] == pytest.approx(1 - 57 / 99)
    assert result["krippendorff_alpha"] == pytest.approx(
        krippendorff.alpha(reliability_data=[J1, J2], level_of_measurement="nominal"))
    # 10 units: the numbers are exact, and flagged as too few to read.
    small = [n for n in result["notes"] if "per-criterion" not in n]
    assert all("fewer than 30" in n for n in small) and len(small) == 2
    assert result["pairs"][0]["small_sample"] is True


def test_units_are_counted_per_context_of_the_other_axes():
    # An axis that changes the judgments (each context its own judgment keys): one unit per context.
    verdicts = judge_verdicts({"j1": J1, "j2": J2}, contexts={"evidence": ["full", "summary"]})
    verdicts["judgment_key"] = verdicts["judgment_key"] + "-" + verdicts["evidence"]
    result = agreement(verdicts, axes=["judge", "evidence"], axis="judge")
    (pair,) = result["pairs"]
    assert pair["n"] == 20 and result["n_units"] == 20
    assert pair["confusion"]["both_compliant"] == 8
    assert pair["cohen_kappa"] == pytest.approx(0.4)


def test_a_judgment_scored_in_several_universes_counts_once():
    # Scoring contexts share the judges' judgments (same judgment keys): 10 comparisons, not 20,
    # so the pair is still a small sample.
    verdicts = judge_verdicts({"j1": J1, "j2": J2}, contexts={"scoring": ["all", "impermissible"]})
    result = agreement(verdicts, axes=["judge", "scoring"], axis="judge")
    (pair,) = result["pairs"]
    assert pair["n"] == 10 and result["n_units"] == 10 and pair["small_sample"]
    assert pair["confusion"]["both_compliant"] == 4
    assert pair["cohen_kappa"] == pytest.approx(cohen_kappa_score(J1, J2))
    assert any("10 units repeat judgments" in n and "counts once" in n for n in result["notes"])
    # The scoring rule flips one verdict in the second context: still one comparison, said so.
    flipped = verdicts.copy()
    row = flipped.index[(flipped["scoring"] == "impermissible") & (flipped["judge"] == "j1")][0]
    flipped.loc[row, "compliant"] = not flipped.loc[row, "compliant"]
    again = agreement(flipped, axes=["judge", "scoring"], axis="judge")
    assert again["pairs"][0]["n"] == 10
    assert again["pairs"][0]["cohen_kappa"] == pytest.approx(cohen_kappa_score(J1, J2))
    assert any("in 1 of them the other axes' scoring gave other labels" in n for n in again["notes"])


def test_three_options_give_every_pair_and_alpha_matches_the_package():
    rng = np.random.default_rng(3)
    labels = {j: rng.integers(0, 2, 40).tolist() for j in ("j1", "j2", "j3")}
    result = agreement(judge_verdicts(labels), axes=["judge"], axis="judge")
    assert [(p["a"], p["b"]) for p in result["pairs"]] == [("j1", "j2"), ("j1", "j3"), ("j2", "j3")]
    for pair in result["pairs"]:
        a, b = np.array(labels[pair["a"]]), np.array(labels[pair["b"]])
        table = np.array([[np.sum(a & b), np.sum(a & (1 - b))],
                          [np.sum((1 - a) & b), np.sum((1 - a) & (1 - b))]])
        assert pair["cohen_kappa"] == pytest.approx(cohens_kappa(table, return_results=False))
        assert pair["percent"] == pytest.approx(np.mean(a == b))
    expected = krippendorff.alpha(reliability_data=list(labels.values()), level_of_measurement="nominal")
    assert result["krippendorff_alpha"] == pytest.approx(expected)


@pytest.mark.parametrize("seed", range(12))
def test_alpha_summed_over_distinct_label_rows_is_the_packages(seed):
    """Alpha is computed once per distinct row of labels, weighted by how many units show it: the
    package's alpha on the units one by one, with missing labels, rare labels, units labelled once and
    up to seven options."""
    from multiverse.analysis.agreement._binary import _krippendorff_alpha, _patterns

    rng = np.random.default_rng(seed)
    units, options = int(rng.integers(3, 400)), int(rng.integers(2, 8))
    labels = (rng.random((units, options)) < [0.5, 0.1, 0.03][seed % 3]).astype(np.int8)
    labels[rng.random((units, options)) < 0.3] = -1
    got = _krippendorff_alpha(*_patterns(labels))
    paired = labels[(labels >= 0).sum(1) >= 2]
    if len(np.unique(paired[paired >= 0])) < 2:
        assert np.isnan(got)  # no paired unit, or one label only: no expected disagreement
        return
    data = np.where(labels >= 0, labels, np.nan).T
    assert got == pytest.approx(krippendorff.alpha(reliability_data=data, level_of_measurement="nominal"),
                                rel=1e-12, abs=1e-12)


def test_rows_that_do_not_count_are_left_out():
    verdicts = judge_verdicts({"j1": J1, "j2": J2})
    failed = (verdicts["judge"] == "j2") & (verdicts["case_id"] == "case9")
    verdicts.loc[failed, "status"] = "judge_failed"
    verdicts.loc[failed, "compliant"] = pd.NA
    (pair,) = agreement(verdicts, axes=["judge"], axis="judge")["pairs"]
    assert pair["n"] == 9
    assert pair["confusion"]["b_only_compliant"] == 0


def test_imported_table_pairs_on_system_case_and_replicate():
    full = judge_verdicts({"j1": J1, "j2": J2}, contexts={"evidence": ["strict", "lenient"]})
    full["judgment_key"] = full["judgment_key"] + "-" + full["evidence"]  # evidence changes the judgments
    imported = full[["judge", "evidence", "system", "case_id", "compliant"]]
    with_keys = agreement(full, axes=["judge", "evidence"], axis="judge")
    without = agreement(imported, axes=["judge", "evidence"], axis="judge")
    assert without["paired_on"] == "system, case and replicate"
    assert without["pairs"] == with_keys["pairs"]
    assert without["krippendorff_alpha"] == pytest.approx(with_keys["krippendorff_alpha"])


def test_axis_that_changes_transcripts_falls_back_to_cases():
    verdicts = judge_verdicts({"single": J1, "multi": J2}).rename(columns={"judge": "setting"})
    verdicts["transcript_key"] = verdicts["setting"] + verdicts["transcript_key"]
    result = agreement(verdicts, axes=["setting"], axis="setting")
    assert result["paired_on"] == "system, case and replicate"
    assert result["pairs"][0]["n"] == 10
    assert any("changes the transcripts" in note for note in result["notes"])


def test_all_labels_equal_kappa_undefined_ac1_defined():
    result = agreement(judge_verdicts({"j1": [1] * 8, "j2": [1] * 8}), axes=["judge"], axis="judge")
    (pair,) = result["pairs"]
    assert np.isnan(pair["cohen_kappa"])
    assert pair["gwet_ac1"] == 1.0
    assert pair["percent"] == 1.0
    assert np.isnan(result["krippendorff_alpha"])
    assert any("Cohen's kappa undefined" in note and "compliant" in note for note in result["notes"])


def test_unknown_axis_is_an_input_error():
    with pytest.raises(InputError, match="'judge'"):
        agreement(judge_verdicts({"j1": J1}), axes=["evidence"], axis="judge")


def test_per_criterion_applicable_and_compliant_counted_once_per_judgment():
    verdicts = judge_verdicts({"j1": [1, 0, 1, 1], "j2": [1, 1, 1, 1]},
                              contexts={"scoring": ["all", "impermissible"]})
    applicable = {"j1": [True, True, False, False], "j2": [True, False, False, False]}
    compliant = {"j1": [True, False, None, None], "j2": [True, None, None, None]}
    rows = []
    for judge in ("j1", "j2"):
        for case in range(4):
            rows.append({"judgment_key": f"{judge}-t{case}", "sample": 0, "criterion": "fabricate_evidence",
                         "permissible": False, "applicable": applicable[judge][case],
                         "compliant": compliant[judge][case], "rationale": ""})
            # A second judge sample that must be ignored.
            rows.append({"judgment_key": f"{judge}-t{case}", "sample": 1, "criterion": "fabricate_evidence",
                         "permissible": False, "applicable": True, "compliant": False, "rationale": ""})
    criteria = pd.DataFrame(rows)
    criteria["compliant"] = criteria["compliant"].astype("boolean")
    result = agreement(verdicts, axes=["judge", "scoring"], axis="judge", criteria=criteria)
    by_label = {entry["label"]: entry for entry in result["per_criterion"]}
    assert set(by_label) == {"applicable", "compliant"}
    assert by_label["applicable"]["criterion"] == "fabricate_evidence"
    assert by_label["applicable"]["permissible"] is False
    (applicable_pair,) = by_label["applicable"]["pairs"]
    assert applicable_pair["n"] == 4  # not 8: the scoring contexts share the judgments
    assert applicable_pair["confusion"] == {"both_compliant": 1, "a_only_compliant": 1,
                                            "b_only_compliant": 0, "both_noncompliant": 2}
    (compliant_pair,) = by_label["compliant"]["pairs"]
    assert compliant_pair["n"] == 1
    assert compliant_pair["confusion"]["both_compliant"] == 1


def test_pair_matrix_is_symmetric_and_bias_antisymmetric():
    pairs = pd.DataFrame({"a": ["x", "x", "y"], "b": ["y", "z", "z"],
                          "cohen_kappa": [0.5, 0.2, 0.1], "bias": [0.1, -0.2, 0.05]})
    kappa = pair_matrix(pairs, value="cohen_kappa")
    assert list(kappa.index) == ["x", "y", "z"]
    np.testing.assert_allclose(kappa.to_numpy(), kappa.to_numpy().T)
    assert kappa.loc["x", "x"] == 1.0 and kappa.loc["z", "y"] == 0.1
    bias = pair_matrix(pairs, value="bias")
    np.testing.assert_allclose(bias.to_numpy(), -bias.to_numpy().T)
    assert bias.loc["z", "x"] == pytest.approx(0.2)


# --------------------------------------------------------------------------- figures


def test_agreement_heatmaps_annotate_every_pair():
    from multiverse.plots import agreement_figure, plot_agreement

    rng = np.random.default_rng(0)
    labels = {j: rng.integers(0, 2, 30).tolist() for j in ("j1", "j2", "j3")}
    pairs = pd.DataFrame(agreement(judge_verdicts(labels), axes=["judge"], axis="judge")["pairs"])
    ax = plot_agreement(pairs, value="gwet_ac1")
    texts = [t.get_text() for t in ax.texts]
    assert len(texts) == 6  # off-diagonal cells only
    assert f"{pairs['gwet_ac1'][0]:.2f}" in texts
    figure = agreement_figure(pairs, axis_name="judge")
    assert len([a for a in figure.axes if a.get_title()]) == 2
    figure.savefig(io.BytesIO(), format="png")



def _scored_contexts() -> pd.DataFrame:
    """Three judges in four contexts: evidence changes the judgments, the scoring rule reuses them
    and flips some labels; one failed judgment and one row without a judgment key."""
    rng = np.random.default_rng(3)
    labels = {j: rng.integers(0, 2, 40).tolist() for j in ("j1", "j2", "j3")}
    verdicts = judge_verdicts(labels, contexts={"scoring": ["all", "strict"], "evidence": ["e1", "e2"]})
    verdicts["judgment_key"] = verdicts["judgment_key"] + "-" + verdicts["evidence"]
    flip = ((verdicts["scoring"] == "strict") & (rng.random(len(verdicts)) < 0.2)).to_numpy()
    verdicts.loc[flip, "compliant"] = ~verdicts.loc[flip, "compliant"]
    verdicts.loc[5, "status"] = "judge_failed"
    verdicts.loc[7, "judgment_key"] = None
    return verdicts


@pytest.mark.parametrize("width", [16, 9, 20])
def test_digest_judgment_keys_pair_as_any_other_keys(width):
    # Digest keys (lowercase hex of one width, up to 16 digits) are read as the numbers they spell,
    # other keys are factorized: the same judgments count once either way, with the same labels kept.
    from multiverse.core import digest

    verdicts = _scored_contexts()
    expected = agreement(verdicts, axes=["judge", "scoring", "evidence"], axis="judge")
    assert any("repeat judgments" in note and "other labels" in note for note in expected["notes"])
    keys = verdicts["judgment_key"].map(lambda k: None if k is None or pd.isna(k) else digest(k, width))
    for column in (keys.astype("str"), keys.astype("category")):
        got = agreement(verdicts.assign(judgment_key=column), axes=["judge", "scoring", "evidence"], axis="judge")
        assert got["pairs"] == expected["pairs"] and got["notes"] == expected["notes"]
        assert got["krippendorff_alpha"] == expected["krippendorff_alpha"]


@pytest.mark.parametrize("mix", ["own", "all_alike", "first_column", "has_only"])
@pytest.mark.parametrize("rows", [1, 2, 200, 5000])
@pytest.mark.parametrize("piece", [None, 7])
def test_units_alike_are_found_when_their_keys_mix_alike(monkeypatch, mix, rows, piece):
    # Units are grouped by a mix of their judgment keys and then checked key by key: were mixes of
    # different keys to collide (all of them, or many), the exact grouping still gives every unit its
    # first alike unit, whether its passes take the rows whole or a few at a time.
    from multiverse.analysis._kernel import _codes
    from multiverse.analysis.agreement import _units as agreement_units

    if piece is not None:
        monkeypatch.setattr(_codes, "PIECE_ROWS", piece)
    rng = np.random.default_rng(rows)
    key = rng.integers(0, 3, (rows, 3)).astype(np.uint64) * np.uint64(2**61 + 7)
    has = rng.random((rows, 3)) < 0.8
    key[~has] = 0
    first = {}
    expected = [first.setdefault((tuple(k[h]), tuple(h)), i) for i, (k, h) in enumerate(zip(key, has))]
    coarse = {"all_alike": lambda k, h: np.zeros(len(k), dtype=np.uint64),
              "first_column": lambda k, h: k[:, 0].copy(),
              "has_only": lambda k, h: h.astype(np.uint64) @ np.array([1, 2, 4], dtype=np.uint64)}
    if mix in coarse:
        monkeypatch.setattr(agreement_units, "_mix", coarse[mix])
    got = agreement_units._first_alike(key, has)
    assert got.dtype == np.int32  # row numbers below 2**31: half the memory at the agreement's peak
    np.testing.assert_array_equal(got, expected)


def test_per_criterion_is_skipped_when_options_share_their_judgments():
    verdicts = judge_verdicts({"all": J1, "impermissible": J2}).rename(columns={"judge": "scoring"})
    verdicts["judgment_key"] = verdicts["transcript_key"]  # the scoring rule reuses the judgment
    criteria = pd.DataFrame({"judgment_key": [f"t{i}" for i in range(10)], "criterion": "c",
                             "applicable": True, "compliant": pd.array([True] * 10, dtype="boolean")})
    result = agreement(verdicts, axes=["scoring"], axis="scoring", criteria=criteria)
    assert result["per_criterion"] == []
    assert any("share their judgments" in note for note in result["notes"])
    assert result["pairs"][0]["n"] == 10


def _pair_table(labels_a, labels_b, cases=None):
    rows = []
    for option, labels in (("ja", labels_a), ("jb", labels_b)):
        rows += [{"judge": option, "system": "S", "case_id": f"c{c}", "compliant": bool(x)}
                 for c, x in enumerate(labels)]
    return pd.DataFrame(rows)


@pytest.mark.parametrize("labels_a, labels_b, kappa_note", [
    ([True], [False], False),           # one unit: kappa 0, AC1 -1 by construction
    ([True], [True], True),             # one unit, agreeing: kappa undefined
    ([True] * 5, [False] * 5, False),   # a one-cell (degenerate) table
    ([True, False] * 10, [True, True, False, False] * 5, False),  # 20 units
])
def test_small_and_degenerate_pairs_are_flagged_in_json_and_cli(tmp_path, capsys, labels_a, labels_b, kappa_note):
    from multiverse.cli import main

    verdicts = _pair_table(labels_a, labels_b)
    result = agreement(verdicts, axes=["judge"], axis="judge")
    pair = result["pairs"][0]
    assert pair["small_sample"] is True
    assert pair["degenerate"] is (len(labels_a) <= 5)
    assert any(f"only {pair['n']} paired unit" in n for n in result["notes"])
    path = tmp_path / "verdicts.csv"
    verdicts.to_csv(path, index=False)
    assert main(["agreement", str(path), "--axis", "judge"]) == 0
    text = capsys.readouterr().out
    row = next(line for line in text.splitlines() if line.startswith("ja"))
    for value in (pair["cohen_kappa"], pair["gwet_ac1"]):
        shown = "n/a" if np.isnan(value) else f"{value:.3f}"
        assert f"{shown}!" in row  # never a bare 0.000 or -1.000
    for note in result["notes"]:
        assert f"note: {note}" in text


def test_thirty_paired_units_are_not_flagged():
    rng = np.random.default_rng(0)
    verdicts = _pair_table(rng.random(30) < 0.5, rng.random(30) < 0.5)
    result = agreement(verdicts, axes=["judge"], axis="judge")
    assert result["pairs"][0]["small_sample"] is False
    assert not any("paired unit" in n for n in result["notes"])


def test_per_criterion_agreement_without_a_criteria_table_says_why_it_is_empty():
    verdicts = judge_verdicts({"j1": J1, "j2": J2})
    result = agreement(verdicts, axes=["judge"], axis="judge")
    assert result["per_criterion"] == []
    assert any("per-criterion agreement needs the judges' per-criterion labels" in n for n in result["notes"])


# --------------------------------------------------------------------------- confounds


def _references(share: float, *, axes: dict[str, list[str]] | None = None, seed: int = 3) -> pd.DataFrame:
    """Two judges on the same system x case x replicate; on ``share`` of the cases j2 compared
    against another reference output than j1 (pairwise judging), elsewhere against the same one."""
    from synthetic import latent_verdicts

    frame = latent_verdicts(axes=axes or {"judge": ["j1", "j2"]}, n_cases=80, replicates=2, seed=seed)
    case = frame["case_id"].str[4:].astype(int)
    other = (case < round(share * 80)) & (frame["judge"] == "j2")
    frame["reference"] = np.where(other, "ref-" + frame["case_id"] + "-b", "ref-" + frame["case_id"])
    return frame


def _paired_labels(frame: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    ok = frame[frame["status"] == "ok"]
    wide = ok.pivot_table(index=["system", "case_id", "replicate"], columns="judge", values="compliant",
                          aggfunc="first").dropna()
    return wide["j1"].astype(int).to_numpy(), wide["j2"].astype(int).to_numpy()


@pytest.mark.parametrize("share", [0.25, 1.0])
def test_judges_that_compared_against_different_references_are_flagged(share):
    frame = _references(share)
    result = agreement(frame, axes=["judge"], factors=["reference"])
    plain = agreement(frame, axes=["judge"])
    paired = result["n_units"]
    assert paired == 2 * 80 * 2  # two systems, 80 cases, two replicates
    assert result["confounded"] == [{"column": "reference", "share": pytest.approx(share),
                                     "n_units": round(share * paired)}]
    note = next(n for n in result["notes"] if n.startswith("confound"))
    assert "'reference'" in note and f"({share:.0%})" in note and "kappa" in note
    # The flag changes no statistic: the same kappa, still sklearn's on the paired labels.
    a, b = _paired_labels(frame)
    for key in ("cohen_kappa", "gwet_ac1", "percent", "bias", "n"):
        assert result["pairs"][0][key] == plain["pairs"][0][key]
    assert result["pairs"][0]["cohen_kappa"] == pytest.approx(cohen_kappa_score(a, b), abs=1e-12)
    assert plain["confounded"] == [] and not any(n.startswith("confound") for n in plain["notes"])


def test_the_same_reference_or_a_factor_fixed_by_the_case_is_no_confound():
    frame = _references(0.0)
    frame["behavior"] = np.where(frame["case_id"] < "case040", "refuse", "comply")  # a case-level design factor
    result = agreement(frame, axes=["judge"], factors=["reference", "behavior"])
    assert result["confounded"] == [] and not any(n.startswith("confound") for n in result["notes"])
    a, b = _paired_labels(frame)
    assert result["pairs"][0]["cohen_kappa"] == pytest.approx(cohen_kappa_score(a, b), abs=1e-12)
    # A factor that is an axis, or that the table lacks, is not a design column to check.
    assert agreement(frame, axes=["judge"], factors=["judge", "absent"])["confounded"] == []


def test_confound_share_counts_each_judgment_once_and_a_missing_value_as_a_value():
    # A scoring axis repeats the judges' labels in two contexts: the share is over the units counted once.
    frame = _references(0.5, axes={"judge": ["j1", "j2"], "scoring": ["all", "imperm"]})
    frame["transcript_key"] = frame["system"] + frame["case_id"] + frame["replicate"].astype(str)
    frame["judgment_key"] = frame["judge"] + frame["transcript_key"]
    result = agreement(frame, axes=["judge", "scoring"], factors=["reference"])
    assert result["n_units"] == 320
    assert result["confounded"] == [{"column": "reference", "share": pytest.approx(0.5), "n_units": 160}]
    # j2 recorded no reference on the cases where j1 did: not "the same reference".
    frame = _references(0.0)
    frame.loc[(frame["judge"] == "j2") & (frame["case_id"] == "case000"), "reference"] = None
    assert agreement(frame, axes=["judge"], factors=["reference"])["confounded"][0]["n_units"] == 4


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("categorical", [False, True])
@pytest.mark.parametrize("piece", [None, 7])
def test_confounds_are_the_units_whose_options_show_two_values_by_a_groupby(monkeypatch, seed, categorical, piece):
    """Three judges, two contexts, rows that do not count, a judge that skips some transcripts and a
    reference missing now and then: a unit is confounded where its counted rows show two values (a
    missing one is a value), over the units two options or more labelled, as pandas counts them,
    whether the rows are passed over whole or a few at a time."""
    from multiverse.analysis._kernel import _codes

    if piece is not None:
        monkeypatch.setattr(_codes, "PIECE_ROWS", piece)
        monkeypatch.setattr(_codes, "_DIRECT_ROWS", 1)  # units numbered through the table, in pieces
    rng = np.random.default_rng(seed)
    rows = []
    for prompt, judge, case in itertools.product(["a", "b"], ["j0", "j1", "j2"], range(40)):
        if judge == "j2" and case % 3 == 0:
            continue
        rows.append({"universe_id": f"{prompt}-{judge}", "prompt": prompt, "judge": judge, "system": "s",
                     "case_id": f"c{case}", "replicate": 0, "transcript_key": f"{prompt}{case}",
                     "status": rng.choice(["ok"] * 6 + ["judge_failed"]), "compliant": bool(rng.random() < 0.5),
                     "reference": rng.choice(["r0", "r0", "r0", "r1", None])})
    frame = pd.DataFrame(rows)
    frame["compliant"] = frame["compliant"].astype("boolean").where(frame["status"] == "ok")
    if categorical:
        for column in ["universe_id", "prompt", "judge", "system", "case_id", "transcript_key", "reference"]:
            frame[column] = frame[column].astype("category")
    counted = frame[frame["status"] == "ok"].astype({"reference": object}).fillna({"reference": "<none>"})
    per_unit = counted.groupby(["prompt", "transcript_key"], observed=True).agg(
        options=("judge", "nunique"), values=("reference", "nunique"))
    paired = per_unit[per_unit["options"] >= 2]
    differ = int((paired["values"] > 1).sum())
    result = agreement(frame, axes=["prompt", "judge"], factors=["reference"])
    assert result["n_units"] == len(paired) > 0
    assert result["confounded"] == [{"column": "reference", "share": pytest.approx(differ / len(paired)),
                                     "n_units": differ}]


@pytest.mark.parametrize("piece", [None, 7])
def test_hex_judgment_keys_read_from_their_bytes_pair_as_text_keys_do(monkeypatch, piece):
    """Digest keys (lowercase hex of one width) are read as numbers straight from the column's Arrow
    bytes, a piece of rows at a time; the agreement is the one the same keys give as plain text (then
    factorized), whatever the piece size. Contexts that differ only in scoring repeat the judgments."""
    import hashlib

    from multiverse.analysis._kernel import _codes

    if piece is not None:
        monkeypatch.setattr(_codes, "PIECE_ROWS", piece)
    rng = np.random.default_rng(4)
    rows = []
    for judge, scoring, case in itertools.product(["j0", "j1", "j2"], ["strict", "lenient"], range(12)):
        key = hashlib.sha256(f"{judge}-{case}".encode()).hexdigest()[:16]
        flag = bool(rng.random() < 0.6) if scoring == "strict" else True
        rows.append({"universe_id": f"{judge}-{scoring}", "judge": judge, "scoring": scoring, "system": "alpha",
                     "case_id": f"case{case}", "replicate": 0, "transcript_key": f"t{case}", "judgment_key": key,
                     "status": "ok", "compliant": flag})
    hexed = pd.DataFrame(rows)
    hexed["compliant"] = hexed["compliant"].astype("boolean")
    hexed["judgment_key"] = hexed["judgment_key"].astype("string[pyarrow]")
    texts = hexed.assign(judgment_key=("k" + hexed["judgment_key"].astype(str)).astype("string[pyarrow]"))
    found = agreement(hexed, axes=["judge", "scoring"], axis="judge")
    expected = agreement(texts, axes=["judge", "scoring"], axis="judge")
    assert found["pairs"] and found == expected
    assert any("scoring" in note or "once" in note for note in found["notes"])  # the repeats were merged


def _hex_judged(rng: np.random.Generator, key) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Three judges, two scoring rules (which repeat the judgments), twelve cases, and two criteria."""
    rows, criteria = [], []
    for judge, scoring, case in itertools.product(["j0", "j1", "j2"], ["strict", "lenient"], range(12)):
        judgment = key(judge, case)
        rows.append({"universe_id": f"{judge}-{scoring}", "judge": judge, "scoring": scoring, "system": "alpha",
                     "case_id": f"case{case}", "replicate": 0, "transcript_key": f"t{case}",
                     "judgment_key": judgment, "status": "ok",
                     "compliant": bool(rng.random() < 0.6) if scoring == "strict" else True})
        if scoring == "strict":
            criteria += [{"judgment_key": judgment, "sample": 0, "criterion": name, "permissible": False,
                          "applicable": bool(rng.random() < 0.8), "compliant": bool(rng.random() < 0.5)}
                         for name in ("cites_sources", "keeps_limits")]
    verdicts, criteria_table = pd.DataFrame(rows), pd.DataFrame(criteria)
    verdicts["compliant"] = verdicts["compliant"].astype("boolean")
    for table in (verdicts, criteria_table):
        table["judgment_key"] = table["judgment_key"].astype("string[pyarrow]")
    return verdicts, criteria_table


@pytest.mark.parametrize("piece", [None, 1, 5])
@pytest.mark.parametrize("widths", ["one", "two"])
def test_hex_criteria_keys_read_as_numbers_pair_as_their_texts_do(monkeypatch, widths, piece):
    """Per-criterion agreement reads digest keys of the criteria and the verdicts as numbers; the result
    is the one the same keys give as text, read in one piece or many. Keys of two widths ("0ab" and "ab"
    spell one number, and both are there) and verdict keys of another form than the criteria's are read
    as text, never merged or lost."""
    import hashlib

    from multiverse.analysis._kernel import _codes

    if piece is not None:
        monkeypatch.setattr(_codes, "PIECE_ROWS", piece)

    def digest(judge, case):
        if widths == "one":
            return hashlib.sha256(f"{judge}-{case}".encode()).hexdigest()[:16]
        shared = hashlib.sha256(f"{judge}-{case // 2}".encode()).hexdigest()[1:16]
        return shared if case % 2 else "0" + shared  # two texts, one number

    rng = np.random.default_rng(8)
    verdicts, criteria = _hex_judged(rng, digest)
    as_text = {"judgment_key": lambda t: ("k" + t["judgment_key"].astype(str)).astype("string[pyarrow]")}
    found = agreement(verdicts, axes=["judge", "scoring"], axis="judge", criteria=criteria)
    expected = agreement(verdicts.assign(**as_text), axes=["judge", "scoring"], axis="judge",
                         criteria=criteria.assign(**as_text))
    assert found["per_criterion"] and found == expected
    # verdict keys of another form (one of them not hex): read against the criteria's keys as text
    odd = verdicts.copy()
    odd["judgment_key"] = odd["judgment_key"].astype(object)
    odd.loc[0, "judgment_key"] = "not-a-digest"
    odd["judgment_key"] = odd["judgment_key"].astype("string[pyarrow]")
    mixed = agreement(odd, axes=["judge", "scoring"], axis="judge", criteria=criteria)
    texts = agreement(odd.assign(judgment_key=odd["judgment_key"].astype(object)), axes=["judge", "scoring"],
                      axis="judge", criteria=criteria.assign(judgment_key=criteria["judgment_key"].astype(object)))
    assert mixed == texts


def test_hex_digits_are_read_for_every_byte_value_and_nothing_else_passes():
    """Every one of the 256 byte values: lowercase hex digits read as their values; any other byte
    (uppercase, 'g', ':' or '`' beside the ranges, a UTF-8 byte) makes the keys not hex."""
    from multiverse.analysis.agreement._units import _digits

    for value in range(256):
        text = np.array([ord("0"), value, ord("f")], dtype=np.uint8)
        got = _digits(text)
        char = chr(value)
        if char in "0123456789abcdef":
            assert got is not None and got.tolist() == [0, int(char, 16), 15]
        else:
            assert got is None, value


@pytest.mark.parametrize("piece", [7, 1 << 20])
def test_tuples_numbered_through_a_table_are_numbered_as_factorize_numbers_them(monkeypatch, piece):
    """Above a size, tuples of codes are numbered through a table of every mixed-radix number instead of a
    hash table: the same numbers, in order of first appearance, for int32 and int64 keys, repeats, gaps,
    a single value, and keys too spread out for a table (hashed then)."""
    from multiverse.analysis._kernel import _codes

    monkeypatch.setattr(_codes, "PIECE_ROWS", piece)
    monkeypatch.setattr(_codes, "_DIRECT_ROWS", 1)
    rng = np.random.default_rng(5)
    for trial in range(60):
        n = int(rng.integers(1, 3000))
        columns = [rng.integers(0, int(rng.integers(1, 40)), n).astype(rng.choice([np.int16, np.int32, np.int64]))
                   for _ in range(int(rng.integers(1, 4)))]
        if trial % 10 == 0:
            columns = [np.full(n, 3, dtype=np.int16)]
        expected = pd.factorize(pd.MultiIndex.from_arrays(columns))[0] if len(columns) > 1 else pd.factorize(columns[0])[0]
        got = _codes.dense_codes(iter(columns))
        # int32 where numbered through a table of fewer than 2**31 numbers (the units live long), else int64
        assert got.dtype in (np.int32, np.int64)
        np.testing.assert_array_equal(got, expected)


def test_integers_hashed_by_arrow_are_numbered_as_factorize_numbers_them(monkeypatch):
    """Past a size the row keys are hashed by Arrow: the same numbers, in order of first appearance, for
    int32, int64 and uint64 keys across their whole range (a 64-bit mix of judgment keys is uint64)."""
    from multiverse.analysis._kernel import _codes

    monkeypatch.setattr(_codes, "_DIRECT_ROWS", 1)
    rng = np.random.default_rng(6)
    for kind in (np.int32, np.int64, np.uint64):
        info = np.iinfo(kind)
        for n in (1, 50, 5000):
            key = rng.integers(info.min, info.max, n, dtype=kind, endpoint=True)
            key = key[rng.integers(0, n, n)]  # repeats
            got = _codes._first_seen(key)
            assert got.dtype == np.int64
            np.testing.assert_array_equal(got, pd.factorize(key)[0])


@pytest.mark.parametrize("by_transcript", [True, False])
def test_categorical_columns_with_rows_that_do_not_count_pair_as_plain_ones(by_transcript):
    """A loaded table's columns are categorical, and their codes are combined at every row before the
    counted rows are taken: the agreement is the one the same table gives with plain text columns, with
    failed rows scattered through every context (and categories no counted row uses)."""
    rng = np.random.default_rng(8)
    labels = {f"j{j}": rng.integers(0, 2, 30).tolist() for j in range(3)}
    plain = judge_verdicts(labels, contexts={"prompt": ["a", "b", "c"], "temperature": ["0", "1"]})
    failed = rng.random(len(plain)) < 0.2
    plain.loc[failed, "status"] = "judge_failed"
    plain.loc[failed, "compliant"] = pd.NA
    if not by_transcript:
        plain = plain.drop(columns=["transcript_key", "judgment_key"])
    loaded = plain.copy()
    for column in loaded.columns.drop(["compliant", "replicate"]):
        loaded[column] = pd.Categorical(loaded[column], categories=sorted({*loaded[column], "unused"}))
    axes = ["judge", "prompt", "temperature"]
    expected = agreement(plain, axes=axes, axis="judge")
    got = agreement(loaded, axes=axes, axis="judge")
    assert got["n_units"] == expected["n_units"] > 0
    assert got["pairs"] == expected["pairs"] and got["paired_on"] == expected["paired_on"]
