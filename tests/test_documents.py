"""Every analysis's typed document (``Analysis.document``) holds exactly the dict it is validated from.

The dict (``Analysis.source``) is what ``--json`` prints; the typed document must
lose nothing of it: ``model_dump(exclude_unset=True)`` gives the same
content back, from the analysis's own document (NaN and all) and from its
JSON form. Each analysis is built from a real source: the session's
simulated run, imports, and a world with human labels.
"""

from __future__ import annotations

import itertools
import json

import numpy as np
import pandas as pd
import pytest

import multiverse as mv
from multiverse.core import json_ready
from multiverse.results import (
    AgreementDocument,
    AnchoredCurveDocument,
    AnchoredRankingDocument,
    CalibrationDocument,
    CurveDocument,
    Document,
    PowerDocument,
    RankingDocument,
    VarianceDocument,
)


def holds_the_document(analysis: mv.Analysis, model: type[Document]) -> Document:
    """The typed view is ``model``, and both the document and its JSON form round-trip through it."""
    typed = analysis.document
    assert type(typed) is model
    assert analysis.document is typed  # validated once
    assert isinstance(analysis.source, dict)  # the dict stays what --json prints
    expected = analysis.to_dict()
    assert json_ready(typed.model_dump(exclude_unset=True)) == expected
    from_json = model.model_validate(json.loads(json.dumps(expected)))
    assert from_json.model_dump(exclude_unset=True) == expected
    return typed


@pytest.fixture(scope="module")
def run(sim_run) -> mv.Results:
    return mv.load_run(sim_run.out)


@pytest.fixture(scope="module")
def imported(tmp_path_factory) -> mv.Results:
    """An import with a primary, an excluded row and a system missing in one universe."""
    rng = np.random.default_rng(5)
    rows = [{"model": m, "item": f"q{i}", "temperature": t, "grader": g, "verdict": int(rng.random() < 0.3 + 0.2 * k)}
            for k, m in enumerate(["atlas", "beacon", "cobalt"]) for i in range(12)
            for t, g in itertools.product([0.0, 0.7], ["g1", "g2"]) if not (m == "cobalt" and t == 0.7 and g == "g2")]
    rows[0]["verdict"] = "n/a"
    folder = tmp_path_factory.mktemp("documents")
    pd.DataFrame(rows).to_csv(folder / "labels.csv", index=False)
    return mv.import_table(folder / "labels.csv", system="model", item="item", label="verdict", positive="1",
                           negative=["0"], axes=["temperature", "grader"], out_dir=folder / "import",
                           primary={"temperature": "0.0", "grader": "g1"})


@pytest.fixture(scope="module")
def numeric(imported) -> mv.Results:
    """The import with its temperature options as numbers, as a table built by hand may hold them."""
    verdicts = imported.verdicts.assign(temperature=imported.verdicts["temperature"].astype(float))
    return mv.Results(verdicts=verdicts, axes=imported.axes, primary=imported.primary)


@pytest.fixture(scope="module")
def labelled() -> tuple[mv.Results, pd.DataFrame]:
    """Two judges x two systems x 30 cases with transcripts, and people's labels of all of them."""
    rng = np.random.default_rng(11)
    rows, labels = [], []
    for system, rate in {"atlas": 0.8, "beacon": 0.55}.items():
        for i in range(30):
            key, truth = f"{system[0]}{i:03d}", bool(rng.random() < rate)
            labels.append({"system": system, "case_id": f"c{i:03d}", "transcript_key": key, "compliant": int(truth)})
            for judge in ("fair", "kind"):
                verdict = True if judge == "kind" and system == "beacon" else truth ^ bool(rng.random() < 0.1)
                rows.append({"universe_id": f"u-{judge}", "judge": judge, "system": system, "case_id": f"c{i:03d}",
                             "transcript_key": key, "status": "ok", "compliant": verdict})
    verdicts = pd.DataFrame(rows).astype({"compliant": "boolean"})
    return mv.Results(verdicts=verdicts, axes=["judge"], primary="u-fair"), pd.DataFrame(labels)


@pytest.mark.parametrize("options", [{}, {"threshold": 0.5}, {"threshold": "primary"}, {"diff": ("atlas", "beacon")}])
def test_curve_summary_with_its_joint_tests_and_multiplicity(run, imported, options):
    for results in (run, imported):
        analysis = results.curve(boot=99, **options)
        doc = holds_the_document(analysis, CurveDocument)
        for name, system in doc.systems.items():
            assert system.rate.min == analysis.source["systems"][name]["rate"]["min"]
            assert (system.primary is None) == (analysis.source["systems"][name]["primary"] is None)
        for test, raw in zip(doc.tests, analysis.source["tests"], strict=True):
            assert test.statistics["stouffer_z"].p_holm == raw["statistics"]["stouffer_z"]["p_holm"]
        assert (doc.multiplicity is None) == (not options)
        assert doc.notes == analysis.notes


def test_anchored_curve(labelled):
    results, labels = labelled
    analysis = results.anchored_curve(labels)
    doc = holds_the_document(analysis, AnchoredCurveDocument)
    primary = doc.systems["beacon"].primary
    assert primary is not None and primary.rate == analysis.source["systems"]["beacon"]["primary"]["rate"]
    assert set(doc.systems) == {"atlas", "beacon"}


def test_agreement(run, imported, numeric):
    doc = holds_the_document(run.agreement(), AgreementDocument)
    assert doc.per_criterion and doc.pairs[0].confusion.both_compliant >= 0
    assert holds_the_document(imported.agreement("temperature"), AgreementDocument).options == ["0.0", "0.7"]
    numbers = holds_the_document(numeric.agreement("temperature"), AgreementDocument)
    assert numbers.options == [0.0, 0.7] and {numbers.pairs[0].a, numbers.pairs[0].b} == {0.0, 0.7}


@pytest.mark.parametrize("boot", [0, 30])
def test_ranking_with_uncertainty_pairs_concordance_and_flips(run, imported, numeric, boot):
    for results in (run, imported, numeric):
        analysis = results.ranking(boot=boot)
        doc = holds_the_document(analysis, RankingDocument)
        assert (doc.uncertainty is None) == (boot == 0)
        assert [q.p_holm for q in doc.pairwise.pairs] == pytest.approx(
            [q["p_holm"] for q in analysis.source["pairwise"]["pairs"]], nan_ok=True)
        assert doc.kendall_w.systems == analysis.source["kendall_w"]["systems"]
        assert [f.changes for f in doc.flips] == [f["changes"] for f in analysis.source["flips"]]
    flips = numeric.ranking(boot=0).document.flips
    assert flips and all(isinstance(f.changes.get("temperature", 0.7), float) for f in flips)
    narrowed = holds_the_document(run.ranking(axes=["judge"], boot=0), RankingDocument)
    assert [row.axis for row in narrowed.kendall_tau.by_axis] == ["judge"]


def test_anchored_ranking(labelled):
    results, labels = labelled
    doc = holds_the_document(results.anchored_ranking(labels), AnchoredRankingDocument)
    assert doc.primary is not None and doc.primary in doc.universes


def test_variance_with_noise_and_aliasing(run, imported):
    for analysis in (run.variance(), run.variance(axes=["judge"]), imported.variance()):
        doc = holds_the_document(analysis, VarianceDocument)
        assert doc.noise is not None and doc.terms[-1].term == "Residual"
        assert [r.axis for r in doc.by_axis] == [r["axis"] for r in analysis.source["by_axis"]]
    # Two axes that change together: aliased, with their joint share.
    v = run.verdicts.assign(grader=run.verdicts["judge"].map({"judge_a": "x", "judge_b": "y"}).astype(str))
    aliased = mv.Results(verdicts=v, axes=[*run.axes, "grader"], primary=run.primary)
    doc = holds_the_document(aliased.variance(), VarianceDocument)
    assert doc.aliasing.aliased == [["judge", "grader"]] and doc.aliased_groups[0].axes == ["judge", "grader"]


def test_calibration(labelled):
    results, labels = labelled
    analysis = results.calibrate(labels, alpha=0.1)
    doc = holds_the_document(analysis, CalibrationDocument)
    assert doc.alpha == 0.1 and len(doc.rates) == 4 and len(doc.judges) == 2
    assert doc.rates[0].judge == "fair"  # the axis columns are kept as extra keys


def test_power(run, imported):
    for results in (run, imported):
        doc = holds_the_document(results.power(baseline_rate=0.7), PowerDocument)
        assert doc.comparisons[0].n_per_group == results.power(baseline_rate=0.7).source["comparisons"][0]["n_per_group"]
    # Too few cases for any difference: the comparisons carry a note and no detectable difference.
    tiny = holds_the_document(run.power(baseline_rate=0.5, alpha=0.001, power=0.99), PowerDocument)
    assert all(c.note and c.detectable_difference is None for c in tiny.comparisons)


def test_keys_a_model_does_not_declare_are_kept_and_missing_ones_refused(run):
    document = {**run.power().source, "later": {"added": [1, 2]}}
    doc = PowerDocument.model_validate(document)
    assert doc.model_dump(exclude_unset=True) == document
    del document["comparisons"]
    with pytest.raises(ValueError, match="comparisons"):
        PowerDocument.model_validate(document)


def test_a_bare_analysis_reads_as_a_plain_document(run):
    bare = mv.Analysis("mine", {"answer": 42, "notes": ["n"]}, pd.DataFrame())
    assert type(bare.document) is Document and bare.document.answer == 42 and bare.notes == ["n"]
    # The document is read by attribute: the analysis has no dict-style access left to read it by key.
    assert not any(hasattr(bare, name) for name in ("__getitem__", "get", "keys"))


def test_an_analysis_built_from_its_model_keeps_it_and_its_json(run):
    # A builder that made the frame from the model hands it over: the same object, with the rate direction the
    # JSON gains, and the JSON still the dict as the analysis function wrote it.
    source = {"pairs": [{"b": 2, "a": 1}], "notes": []}
    model = Document.model_validate(source)
    built = mv.Analysis("mine", source, pd.DataFrame(), model=model)
    assert built.schema is Document and built.document.model_dump() == {**source, "rate_direction": "compliance"}
    assert list(built.to_dict()) == ["pairs", "notes", "rate_direction"] and built.to_dict()["pairs"] == [{"b": 2, "a": 1}]
    # What results builds this way holds what --json prints (the rate direction too), as every analysis does.
    for analysis, schema in ((run.variance(axes=run.axes[:1]), VarianceDocument), (run.ranking(boot=0), RankingDocument),
                             (run.agreement(), AgreementDocument), (run.power(), PowerDocument)):
        assert holds_the_document(analysis, schema).model_extra == {"rate_direction": "compliance"}


def test_rows_frame_is_the_rows_as_written_with_the_leading_columns_first():
    from multiverse.results import VarianceDocument, rows_frame

    rows = [{"term": "judge", "kind": "axis", "axis": "judge", "sum_sq": 1.0, "df": 1.0, "share": 0.5, "extra": 3},
            {"term": "Residual", "kind": "residual", "axis": None, "sum_sq": 1.0, "df": 2.0, "share": 0.5}]
    document = {"terms": rows, "by_axis": [], "balanced": True, "aliasing": {"aliased": [], "nested": []},
                "aliased_groups": [], "noise": None, "summary": [], "notes": []}
    terms = VarianceDocument.model_validate(document).terms
    # only the keys a row was given: the noise keys (declared, with defaults) are not made up
    assert rows_frame(terms).equals(pd.DataFrame(rows))
    assert list(rows_frame(terms, first=("extra", "missing", "axis")).columns) == [
        "extra", "axis", "term", "kind", "sum_sq", "df", "share"]
    assert rows_frame([]).empty
