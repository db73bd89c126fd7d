"""The analysis room writes a document whole: narrowed to the axes shown, with the reference system and notes.

``results`` no longer edits the dict an analysis function returns (it reads the typed model), so these
keywords must give exactly what the edit gave: the document over every axis with only the rows (and the
variance's summary lines) of the hidden axes left out, and everything else, values and key order, unchanged.
Drawn over every subset of three axes; the ranking's reference is checked against dropping its rows by hand.
"""

from __future__ import annotations

import itertools
import json

import pandas as pd
import pytest
from synthetic import VERDICT_AXES, latent_verdicts

from multiverse.analysis import OPPONENT, bradley_terry, curve_summary, ranking, spec_curve, variance
from multiverse.core import json_ready
from multiverse.results import CurveDocument

AXES = list(VERDICT_AXES)
SUBSETS = [list(c) for n in range(len(AXES) + 1) for c in itertools.combinations(AXES, n)]


def _json(document: dict) -> str:
    return json.dumps(json_ready(document))  # key order included: --json prints it as written


@pytest.fixture(scope="module")
def verdicts() -> pd.DataFrame:
    return latent_verdicts(rates={"atlas": 0.8, "beacon": 0.6, "comet": 0.5}, n_cases=20, seed=3)


@pytest.fixture(scope="module")
def full_variance(verdicts):
    return variance(verdicts, axes=AXES, resamples=20, seed=1)


@pytest.fixture(scope="module")
def full_ranking(verdicts):
    return ranking(verdicts, axes=AXES, primary=None, bootstrap=0)


@pytest.mark.parametrize("shown", SUBSETS, ids=["+".join(s) or "none" for s in SUBSETS])
def test_variance_shown_leaves_out_only_the_hidden_axes_rows(verdicts, full_variance, shown):
    got = variance(verdicts, axes=AXES, resamples=20, seed=1, shown=shown)
    hidden = [a for a in AXES if a not in shown]
    expected = {**full_variance,
                "by_axis": [r for r in full_variance["by_axis"] if r["axis"] in shown],
                "terms": [r for r in full_variance["terms"] if r["axis"] not in hidden],
                "summary": [line for line in full_variance["summary"]
                            if not any(line.startswith(f"{a}:") for a in hidden)]}
    assert _json(got) == _json(expected)
    assert [r["axis"] for r in got["by_axis"]] == shown  # in the model's order, every shown axis kept
    # the system, interactions with a shown axis only, and the residual stay
    assert {r["kind"] for r in got["terms"]} >= {"system", "residual"}


@pytest.mark.parametrize("shown", SUBSETS, ids=["+".join(s) or "none" for s in SUBSETS])
def test_ranking_shown_narrows_only_the_tau_by_axis(verdicts, full_ranking, shown):
    got = ranking(verdicts, axes=AXES, primary=None, bootstrap=0, shown=shown)
    tau = full_ranking["kendall_tau"]
    expected = {**full_ranking, "kendall_tau": {**tau, "by_axis": [r for r in tau["by_axis"] if r["axis"] in shown]}}
    assert _json(got) == _json(expected)
    assert [r["axis"] for r in got["kendall_tau"]["by_axis"]] == shown


def test_ranking_reference_is_left_out_named_and_noted(verdicts):
    got = ranking(verdicts, axes=AXES, primary=None, bootstrap=0, reference="beacon")
    by_hand = ranking(verdicts[verdicts["system"] != "beacon"], axes=AXES, primary=None, bootstrap=0)
    note = "the reference system beacon is left out of the ranking: every other system's scores are preferences over it"
    assert "beacon" not in got["systems"] and got["notes"] == [*by_hand["notes"], note]
    assert _json(got) == _json({**by_hand, "notes": [*by_hand["notes"], note], "reference": "beacon"})
    assert "reference" not in ranking(verdicts, axes=AXES, primary=None, bootstrap=0)


def test_bradley_terry_shown_narrows_only_its_stability_tau():
    rows = []
    for judge in ("j1", "j2"):
        for order in ("ab", "ba"):
            for case in range(12):
                for a, b in (("atlas", "beacon"), ("beacon", "comet"), ("atlas", "comet")):
                    win = (case + (a == "atlas") * 3 + (judge == "j2") + (order == "ba")) % 4 != 0
                    rows.append({"universe_id": f"{judge}-{order}", "judge": judge, "order": order, "system": a,
                                 OPPONENT: b, "case_id": f"c{case}", "status": "ok", "compliant": win})
    games = pd.DataFrame(rows)
    full = bradley_terry(games, axes=["judge", "order"], bootstrap=0)
    for shown in ([], ["order"], ["judge", "order"]):
        got = bradley_terry(games, axes=["judge", "order"], bootstrap=0, shown=shown)
        tau = full["stability"]["kendall_tau"]
        narrowed = {**tau, "by_axis": [r for r in tau["by_axis"] if r["axis"] in shown]}
        assert _json(got) == _json({**full, "stability": {**full["stability"], "kendall_tau": narrowed}})


def test_curve_summary_writes_the_callers_notes_last_and_validates_as_its_model(verdicts):
    curve = spec_curve(verdicts, axes=AXES)
    plain = curve_summary(curve)
    assert list(plain)[-1] == "notes" and plain["notes"] == []
    noted = curve_summary(curve, notes=["a", "b"])
    assert noted["notes"] == ["a", "b"] and _json({**noted, "notes": []}) == _json(plain)
    assert CurveDocument.model_validate(noted).notes == ["a", "b"]
