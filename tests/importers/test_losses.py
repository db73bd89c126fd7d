"""The import-status contract every importer keeps (issue 43): kinds of loss, their statuses, the manifest's counts."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from multiverse.core import STATUSES, unparsed_rows
from multiverse.importers import LOSS_KINDS, LOSS_UNITS, ImportLosses, loss_lines, loss_reason
from multiverse.importers._directory import write_import_dir
from multiverse.tables import Manifest


def test_each_kind_has_its_status_and_a_no_grade_is_an_unparsed_answer():
    assert loss_reason("no_grade", "Grade not found in model output:  x\n y") == (
        "judge_failed", "no grade: Grade not found in model output: x y")
    assert loss_reason("grader_error", "") == ("judge_failed", "grader error")
    assert loss_reason("system_error", "RuntimeError: 503")[0] == "rollout_failed"
    assert loss_reason("not_run", "cancelled")[0] == "not_run" and "not_run" in STATUSES
    frame = pd.DataFrame([dict(zip(("status", "reason"), loss_reason(kind, "x"))) for kind in LOSS_KINDS])
    # Only the no-grade row is a judge's answer that named nothing (scoring.unparsed decides it).
    assert unparsed_rows(frame).tolist() == [kind == "no_grade" for kind in LOSS_KINDS]
    with pytest.raises(KeyError):
        loss_reason("a label", "x")


@given(st.lists(st.sampled_from([*LOSS_KINDS, "ok", "excluded"]), min_size=1, max_size=30))
def test_the_manifest_counts_every_row_once_by_status_and_by_kind(kinds):
    rows = [("ok", "") if k == "ok" else ("excluded", "no answer (N)") if k == "excluded" else loss_reason(k, "why")
            for k in kinds]
    verdicts = pd.DataFrame(rows, columns=["status", "reason"])
    fields = ImportLosses().manifest_fields(verdicts)
    assert sum(fields["statuses"].values()) == len(kinds) and list(fields["statuses"])[:len(STATUSES)] == list(STATUSES)
    lost = {k: kinds.count(k) for k in LOSS_KINDS if kinds.count(k)}
    assert {k: v["rows"] for k, v in fields["losses"].items()} == lost
    assert all(v["status"] == LOSS_KINDS[k][0] for k, v in fields["losses"].items())
    manifest = Manifest.from_document(fields)
    lines = loss_lines(manifest)
    assert len(lines) == len(lost) and all(line.startswith("lost: ") and "\n" not in line for line in lines)


def test_an_import_folder_records_statuses_losses_and_drops(tmp_path):
    verdicts = pd.DataFrame({"universe_id": "u0", "system": "s", "case_id": ["a", "b", "c"], "replicate": 0,
                             "status": ["ok", *(loss_reason(k, "boom")[0] for k in ("grader_error", "not_run"))],
                             "reason": ["", "grader error: boom", "not run: cancelled"],
                             "compliant": pd.array([True, pd.NA, pd.NA], dtype="boolean")})
    rates = pd.DataFrame({"universe_id": ["u0"], "system": ["s"], "n": [1], "n_compliant": [1], "rate": [1.0],
                          "ci_low": [0.2], "ci_high": [1.0]})
    losses = ImportLosses()
    losses.drop("samples.scores.x.metadata", where="a.eval", count=3, why="not a measurement")
    results = write_import_dir(tmp_path / "out", verdicts=verdicts, criteria=None, rates=rates,
                               manifest={"source": "table", "axes": [], "factors": [], "universes": ["u0"]},
                               losses=losses)
    on_disk = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert on_disk["statuses"] == {"ok": 1, "excluded": 0, "not_run": 1, "rollout_failed": 0, "judge_failed": 1}
    assert set(on_disk["losses"]) == {"grader_error", "not_run"}
    assert on_disk["dropped"] == [{"what": "samples.scores.x.metadata", "where": "a.eval", "count": 3,
                                   "why": "not a measurement"}]
    lines = loss_lines(results.manifest)
    assert lines[-1] == "dropped: samples.scores.x.metadata (3) in a.eval: not a measurement"
    assert lines[0].startswith("lost: 1 of 3 judgments: the scorer or grader raised") and "grader error: boom" in lines[0]


# Several universes over the same judgments: a reading axis (Inspect's reducer, promptfoo's scoring,
# lm-eval's filter) repeats each judgment; several judges each make their own; a rollout is read by every judge.
_KINDS = st.sampled_from(["ok", "ok", *LOSS_KINDS])


@given(systems=st.integers(1, 2), cases=st.integers(1, 4), replicates=st.integers(1, 3), judges=st.integers(1, 3),
       readings=st.integers(1, 3), reading_axis=st.sampled_from(["reducer", "scoring", "filter"]), data=st.data())
def test_a_loss_counts_once_per_lost_judgment_or_rollout_whatever_the_universes(
        systems, cases, replicates, judges, readings, reading_axis, data):
    rollouts = [(f"s{s}", f"c{c}", r) for s in range(systems) for c in range(cases) for r in range(replicates)]
    system_fate = {u: data.draw(st.sampled_from(["ok", "ok", "system_error", "not_run"])) for u in rollouts}
    judge_fate = {(*u, f"j{j}"): data.draw(st.sampled_from(["ok", "ok", "no_grade", "grader_error"]))
                  for u in rollouts for j in range(judges)}
    rows = []
    for (system, case, rep, judge), fate in judge_fate.items():
        kind = system_fate[(system, case, rep)] if system_fate[(system, case, rep)] != "ok" else fate
        status, reason = ("ok", "") if kind == "ok" else loss_reason(kind, "why")
        rows += [{"universe_id": f"{judge}-{k}", "judge": judge, reading_axis: f"o{k}", "system": system,
                  "case_id": case, "replicate": rep, "status": status, "reason": reason} for k in range(readings)]
    verdicts = pd.DataFrame(rows)
    axes = [*(["judge"] if judges > 1 else []), reading_axis]
    fields = ImportLosses(readings=(reading_axis,)).manifest_fields(verdicts, axes)
    # From scratch: the lost things themselves, not the rows that repeat them.
    want = {k: len([u for u, f in system_fate.items() if f == k]) for k in ("system_error", "not_run")}
    want |= {k: len([u for u, f in judge_fate.items() if f == k and system_fate[u[:3]] == "ok"])
             for k in ("no_grade", "grader_error")}
    want = {k: n for k, n in want.items() if n}
    assert {k: v["lost"] for k, v in fields["losses"].items()} == want
    for kind, loss in fields["losses"].items():
        unit = LOSS_UNITS[kind]
        total = len(rollouts) if unit == "rollouts" else len(judge_fate)
        per = readings * (judges if unit == "rollouts" else 1)  # rows each lost thing fills
        assert (loss["unit"], loss["of"], loss["rows"]) == (unit, total, want[kind] * per)
        assert loss["message"].startswith(f"{want[kind]} of {total} {unit if total != 1 else unit[:-1]}")
        assert (f"({loss['rows']} of {len(verdicts)} verdict rows" in loss["message"]) == (per != 1)
    # Without the axes (an unknown import) every universe's rows stay their own judgments.
    unknown = ImportLosses().manifest_fields(verdicts)["losses"]
    assert all(v["lost"] == v["rows"] for k, v in unknown.items() if LOSS_UNITS[k] == "judgments")


def test_a_rollout_under_another_simulated_user_is_another_rollout():
    # ASSERT's user axis changes the conversation; its judge axis only who read it.
    status, reason = loss_reason("system_error", "503")
    verdicts = pd.DataFrame({"universe_id": ["a", "b", "c"], "judge": ["j1", "j2", "j1"], "user": ["u1", "u1", "u2"],
                             "system": "s", "case_id": "x", "replicate": 0, "status": status, "reason": reason})
    loss = ImportLosses().manifest_fields(verdicts, ["judge", "user"])["losses"]["system_error"]
    assert (loss["lost"], loss["of"], loss["rows"]) == (2, 2, 3)
    assert loss["message"].startswith("2 of 2 rollouts (3 of 3 verdict rows across the universes)")



def test_the_keys_of_one_scorer_call_are_one_judgment():
    # Inspect's dict scorer: one call, one value per key, each key an option of the scorer axis.
    status, reason = loss_reason("grader_error", "boom")
    verdicts = pd.DataFrame({"universe_id": ["a", "b", "c", "a", "b", "c"], "scorer": ["s:x", "s:y", "t"] * 2,
                             "judge": "j", "system": "m", "case_id": ["q1"] * 3 + ["q2"] * 3, "replicate": 0,
                             "status": [status, status, "ok", "ok", "ok", "ok"],
                             "reason": [reason, reason, "", "", "", ""]})
    calls = {"scorer": {"s:x": "s", "s:y": "s", "t": "t"}}
    loss = ImportLosses(calls=calls).manifest_fields(verdicts, ["scorer"])["losses"]["grader_error"]
    assert (loss["lost"], loss["of"], loss["rows"]) == (1, 4, 2)  # calls: (q1, s) (q1, t) (q2, s) (q2, t)
    apart = ImportLosses().manifest_fields(verdicts, ["scorer"])["losses"]["grader_error"]
    assert (apart["lost"], apart["of"]) == (2, 6)
    assert list(verdicts["scorer"]) == ["s:x", "s:y", "t"] * 2  # the verdicts themselves keep their options
