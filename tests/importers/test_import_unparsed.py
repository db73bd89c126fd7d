"""Imports count an unparsed reply as ``scoring.unparsed`` says, as a run does (issue 42).

A grader reply that named no grade (``core.unparsed_rows``) of every importer is
left out, counted against the system or counted as a tie, by ``--unparsed``
(the same name on every import; several make an ``unparsed`` axis), recorded in
the manifest. Cross-path: a run whose judge answers unreadably now and then,
and the same verdicts exported as a table and imported, give the same rates
under each policy. promptfoo counts an unreadable grader reply as a failed
test, so ``against`` gives its own pass rate. A property test holds the
table importer's rates equal to a recount from scratch for any table.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from cli_runner import run_cli
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from promptfoo_runs import recorded_features
from test_unparsed_policy import _spec

from multiverse.core import unparsed_rows
from multiverse.engine import run
from multiverse.importers import import_inspect, import_lm_eval, import_promptfoo, import_table
from multiverse.spec import load_spec

HERE = Path(__file__).resolve().parent  # tests/importers
NO_GRADE = "UNPARSED"


def _as_table(verdicts: pd.DataFrame, scored: bool) -> pd.DataFrame:
    """One universe's verdicts as a table: the label (or score), the no-grade value, or empty for a failed call."""
    ok = (verdicts["status"] == "ok").to_numpy()
    value = (verdicts["score"].map(lambda s: f"{s:g}") if scored
             else verdicts["compliant"].map(lambda c: "true" if c is True else "false"))
    label = np.where(ok, value.astype(str), np.where(unparsed_rows(verdicts), NO_GRADE, ""))
    return pd.DataFrame({"system": verdicts["system"].astype(str), "item": verdicts["case_id"].astype(str),
                         "replicate": verdicts["replicate"].astype(int), "label": label})


@pytest.mark.parametrize("scored", [False, True])
def test_a_run_and_its_table_imported_give_the_same_rates_under_each_policy(tmp_path, scored):
    scale = {"type": "ordinal", "min": 1, "max": 5} if scored else None
    spec_path = _spec(tmp_path, scale=scale, scoring={"estimator": "mean"} if scored else None)
    run(load_spec(spec_path), out=tmp_path / "run", store=tmp_path / "store", progress=False)
    verdicts = pd.read_parquet(tmp_path / "run" / "verdicts.parquet")
    run_rates = pd.read_parquet(tmp_path / "run" / "rates.parquet")
    run_rates = run_rates[run_rates["subgroup"] == "all"]
    excluded = verdicts[verdicts["unparsed"].astype(str) == "exclude"]
    assert unparsed_rows(excluded).sum() >= 3
    table = _as_table(excluded, scored)
    table.to_csv(tmp_path / "table.csv", index=False)
    column = {"score": "label", "scale": (1, 5)} if scored else {"label": "label"}
    imported = import_table(tmp_path / "table.csv", system="system", item="item", replicate="replicate",
                            out_dir=tmp_path / "import", no_grade=[NO_GRADE], unparsed=["exclude", "against"],
                            **column)
    assert imported.axes == ["unparsed"] and imported.manifest.unparsed == ["exclude", "against"]
    rates = imported.rates[imported.rates["subgroup"] == "all"]
    for policy in ("exclude", "against"):
        for system in ("atlas", "beacon"):
            mine = run_rates[(run_rates["unparsed"].astype(str) == policy) & (run_rates["system"] == system)]
            theirs = rates[(rates["unparsed"] == policy) & (rates["system"] == system)]
            assert len(mine) == len(theirs) == 1
            assert int(theirs["n"].iloc[0]) == int(mine["n"].iloc[0]), (policy, system)
            assert theirs["rate"].iloc[0] == pytest.approx(mine["rate"].iloc[0], abs=1e-12), (policy, system)
            # The same intervals: the same clustering by case, the same ICC rule over the same universes.
            assert theirs["ci_low"].iloc[0] == pytest.approx(mine["ci_low"].iloc[0], abs=1e-9), (policy, system)
            assert theirs["ci_high"].iloc[0] == pytest.approx(mine["ci_high"].iloc[0], abs=1e-9), (policy, system)
    # One policy alone is that universe of the axis, with the ids of an import without axes.
    alone = import_table(tmp_path / "table.csv", system="system", item="item", replicate="replicate",
                         out_dir=tmp_path / "alone", no_grade=[NO_GRADE], unparsed="against", **column)
    assert alone.axes == [] and alone.manifest.unparsed == "against"
    both = rates[rates["unparsed"] == "against"].set_index("system")["rate"]
    assert (alone.rates[alone.rates["subgroup"] == "all"].set_index("system")["rate"] == both).all()


def test_promptfoo_counts_an_unreadable_grader_reply_as_a_fail_and_against_gives_its_pass_rate(tmp_path):


    files = recorded_features()
    default = import_promptfoo(files, tmp_path / "default")
    against = import_promptfoo(files, tmp_path / "against", unparsed="against")
    axis = import_promptfoo(files, tmp_path / "axis", unparsed=["exclude", "against"])
    assert default.manifest.unparsed == "exclude" and against.manifest.unparsed == "against"
    assert axis.axes == ["judge", "scoring", "unparsed"]
    for path in files:
        document = json.loads(path.read_text(encoding="utf-8"))
        stats = document["results"]["stats"]
        judge = document["config"]["defaultTest"]["options"]["provider"]["id"]
        for results in (against, axis):
            v = results.verdicts
            mine = v[(v["judge"] == judge) & (v["scoring"] == "pass") & (v["status"] == "ok")]
            if "unparsed" in v.columns:
                mine = mine[mine["unparsed"] == "against"]
            # promptfoo's own pass rate: successes over successes and failures (its errors are the system's).
            assert mine["compliant"].astype(bool).mean() == pytest.approx(
                stats["successes"] / (stats["successes"] + stats["failures"]), abs=1e-12)
    # The weighted score of an unreadable reply counted against is the scale's lowest, 0.
    v = against.verdicts
    counted = v["reason"].astype(str).str.contains("scoring.unparsed: against")
    assert counted.any() and (v.loc[counted & (v["scoring"] == "score"), "score"] == 0.0).all()
    assert not (v.loc[counted & (v["scoring"] == "pass"), "compliant"].astype(bool)).any()
    # The axis reads the same judgments: a lost judgment is counted once, as in the default import.
    assert axis.manifest.losses["no_grade"].lost == default.manifest.losses["no_grade"].lost > 0


def test_every_import_takes_the_same_option_and_records_it(tmp_path):
    """Inspect and lm-eval take --unparsed as the others do; lm-eval scores every sample itself (a reply its filter
    found no answer in is its metric's 0), so no row of it is unparsed and every policy gives the same rates."""
    inspect = import_inspect(HERE / "inspect_logs" / "grader-a.eval", tmp_path / "inspect",
                             unparsed=["exclude", "against"])
    assert inspect.manifest.unparsed == ["exclude", "against"] and "unparsed" in inspect.axes
    lm_dir = HERE / "lm_eval_results"
    sources = sorted(p for p in lm_dir.rglob("results_*.json"))[:1]
    lm = import_lm_eval(sources, tmp_path / "lm", unparsed=["exclude", "against"])
    rates = lm.rates[lm.rates["subgroup"] == "all"]
    by = [c for c in ("filter", "metric", "system") if c in rates.columns]
    paired = rates.pivot_table(index=by, columns="unparsed", values="rate")
    assert len(paired) and np.allclose(paired["exclude"], paired["against"])
    assert not any(w for w in lm.warnings if "lm-eval reports" in w)


@pytest.mark.parametrize(("args", "message"), [
    (["--unparsed", "tie"], "label: --unparsed tie counts a reply as a tie, which labels have not"),
    (["--unparsed", "against", "--unparsed", "against"], "unparsed: against is given twice"),
])
def test_a_policy_an_import_cannot_take_is_refused_in_one_line_and_nothing_is_written(tmp_path, args, message):
    pd.DataFrame({"system": ["a", "a"], "item": ["c1", "c2"], "label": ["true", NO_GRADE]}).to_csv(
        tmp_path / "t.csv", index=False)
    code, _, err = run_cli(["import", "table", tmp_path / "t.csv", "--system", "system", "--item", "item",
                            "--label", "label", "--no-grade", NO_GRADE, "--out", tmp_path / "out", *args])
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "out" / "manifest.json").exists()


def test_the_cli_counts_no_grade_values_and_says_how_many_it_counted(tmp_path):
    pd.DataFrame({"system": ["a"] * 4, "item": ["c1", "c2", "c3", "c4"],
                  "label": ["true", NO_GRADE, "false", ""]}).to_csv(tmp_path / "t.csv", index=False)
    code, _, err = run_cli(["import", "table", tmp_path / "t.csv", "--system", "system", "--item", "item",
                            "--label", "label", "--no-grade", NO_GRADE, "--unparsed", "against",
                            "--out", tmp_path / "out"])
    assert code == 0, err
    assert "unparsed replies counted by --unparsed: 1 against" in err
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest["unparsed"] == "against" and manifest["input"]["no_grade"] == [NO_GRADE]
    assert manifest["input"]["missing_labels"] == 1
    rates = pd.read_parquet(tmp_path / "out" / "rates.parquet")
    assert rates.loc[rates["subgroup"] == "all", "rate"].tolist() == [pytest.approx(1 / 3)]


_CELLS = st.lists(st.sampled_from(["true", "false", NO_GRADE, ""]), min_size=1, max_size=12)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(systems=st.lists(_CELLS, min_size=1, max_size=3),
       policies=st.lists(st.sampled_from(["exclude", "against"]), min_size=1, max_size=2, unique=True))
def test_any_table_under_any_policies_gives_the_recounted_rates(tmp_path_factory, systems, policies):
    rows = [{"system": f"s{i}", "item": f"c{j}", "label": label}
            for i, labels in enumerate(systems) for j, label in enumerate(labels)]
    folder = tmp_path_factory.mktemp("prop")
    pd.DataFrame(rows).to_csv(folder / "t.csv", index=False)
    counted = [i for i, labels in enumerate(systems) if any(x in ("true", "false") for x in labels)]
    if not counted:
        return  # nothing graded: no rate to compare (the import's own checks decide)
    result = import_table(folder / "t.csv", system="system", item="item", label="label", out_dir=folder / "out",
                          no_grade=[NO_GRADE], unparsed=policies)
    rates = result.rates[result.rates["subgroup"] == "all"]
    for policy in policies:
        mine = rates[rates["unparsed"] == policy] if len(policies) > 1 else rates
        for i, labels in enumerate(systems):
            passed, failed = labels.count("true"), labels.count("false")
            ungraded = labels.count(NO_GRADE) if policy == "against" else 0
            n = passed + failed + ungraded
            row = mine[mine["system"] == f"s{i}"]
            if not n:
                assert row.empty or int(row["n"].iloc[0]) == 0
                continue
            assert int(row["n"].iloc[0]) == n and row["rate"].iloc[0] == pytest.approx(passed / n, abs=1e-12)
