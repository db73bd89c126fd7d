"""Import promptfoo result files (``promptfoo eval -o results.json`` or ``.jsonl``) as an import directory.

================================================ ==========================================================
promptfoo                                        multiverse
================================================ ==========================================================
provider (label, else id) x prompt (label)       ``verdicts.system`` (the prompt named only when there are several)
the test (``description``, else ``test N``)      ``case_id``
each repeat of a test (``--repeat N``)           ``replicate`` 0 to N-1 (intervals cluster by test)
``success`` of the result                        ``compliant`` (promptfoo's pass: every assertion passes, or
                                                 with a ``threshold`` the weighted score reaches it)
``score`` of the result (assertion scores        ``score`` on the ``scoring`` axis's option ``score`` (when a
weighted by ``weight``), the test's              test weighs its assertions or sets a threshold; the option
``threshold``                                    ``pass`` is promptfoo's pass)
each assertion of ``gradingResult.componentResults`` a criteria row: ``pass`` the label, ``score`` the score,
                                                 ``weight``, ``reason`` the rationale (criterion: ``metric``,
                                                 else type and value)
the graders the file's tests name (an            the ``judge`` axis (when the files' graders differ): one
assertion's ``provider``, the test's             judge per file, every grader it names joined with `` + ``;
``options.provider``, ``defaultTest``'s, or      a ``--grader`` one by its ``modelName``
``--grader``)
``response.output`` (and the prompt)             ``transcripts.jsonl`` (the explorer shows it)
``vars[NAME]``                                   a design factor with ``factors=[NAME]``
a grader reply promptfoo could not read          ``status`` judge_failed, reason ``no grade: ...`` (promptfoo
(``Could not extract JSON``)                     counts it a failure; it is never a label here)
the grader's error                               ``status`` judge_failed, reason ``grader error: ...``
the provider's error (``failureReason`` 2)       ``status`` rollout_failed, reason ``system error: ...``
================================================ ==========================================================

The rate of a file's rows is promptfoo's own pass rate over the results it graded: its
``stats.successes / (successes + failures)`` less the failures that were a grader reply it
could not read. A result file's own counts and its per-prompt ``metrics`` are kept in the
manifest, and a file whose rows do not add up to them is said in a warning. Token usage,
cost, latency and named scores are recorded by promptfoo and not imported: the manifest's
``dropped`` lists them.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from multiverse.core import CRITERIA_COLUMNS, OK, RESERVED_NAMES, check_rate_direction, universe_id
from multiverse.errors import InputError
from multiverse.importers._columns import import_rates, row_keys, write_judged_import
from multiverse.importers._directory import check_ci
from multiverse.importers._guard import MAX_CASE_ID_CHARS, checked_names, import_budget
from multiverse.importers._losses import ImportLosses
from multiverse.importers._promptfoo_file import PromptfooFile, read_promptfoo_file
from multiverse.importers._unparsed import check_unparsed, count_import_unparsed, with_policy
from multiverse.results import Results

__all__ = ["import_promptfoo"]

# An unparsed reply on a pass/fail universe is counted on the labels.
_BINARY = ("binary", 0.0, 1.0)

#: Why what promptfoo records of each result is not imported.
_UNREAD = {"response.tokenUsage, cost and latencyMs": "promptfoo's bookkeeping of each call, not a verdict",
           "namedScores": "scores under the assertions' metric names: each assertion's own score is in the criteria"}


def import_promptfoo(
    results_files: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    out_dir: str | os.PathLike[str],
    *,
    factors: Sequence[str] = (),
    primary: Mapping[str, str] | None = None,
    ci: str = "wilson",
    rate: str = "compliance",
    force: bool = False,
    max_bytes: int | None = None,
    max_rows: int | None = None,
    max_transcript_bytes: int | None = None,
    merge_look_alikes: bool = False,
    unparsed: str | Sequence[str] = "exclude",
) -> Results:
    """Import promptfoo result files into ``out_dir``; see the module docstring.

    ``factors`` names test variables kept as design factors. Bad input raises
    InputError naming the file and field, and writes nothing. Bounds
    (:class:`multiverse.core.ImportBudget`): ``max_bytes`` of result files,
    ``max_rows`` results, ``max_transcript_bytes`` per prompt and output.
    Systems, graders or levels that look alike are refused unless
    ``merge_look_alikes`` reads them as one. ``unparsed``: how a grader reply promptfoo could not
    read (no grade) counts, a ``scoring.unparsed`` policy or several (an axis).
    """
    from multiverse.tables import check_output_dir

    paths = [Path(p) for p in ([results_files] if isinstance(results_files, (str, os.PathLike)) else results_files)]
    if not paths:
        raise InputError("results_files: expected at least one promptfoo result file", param="results_files")
    check_ci(ci)
    check_rate_direction(rate)
    policies = check_unparsed(unparsed)
    factors = list(factors)
    for factor in factors:
        if factor in RESERVED_NAMES or factor == "judge":
            raise InputError(f"factors: {factor}: name is reserved for the verdicts table; expected another variable",
                             param="factors")
    budget = import_budget(max_bytes, max_rows, max_transcript_bytes)
    check_output_dir(out_dir, kind="import", inputs=paths, force=force)
    read = [read_promptfoo_file(p, factors, budget) for p in paths]
    _one_name_each(read, factors, bool(merge_look_alikes))
    axes = ["judge"] if len({row.judge for f in read for row in f.rows}) > 1 else []
    verdicts, transcripts = _verdicts(read, axes, factors)
    criteria = _criteria(read, verdicts)
    warnings = _count_notes(read)
    # pass and weighted score read the same grader replies; each grader's file is an eval of its own, so its
    # provider errors are its own rollouts' (judging=(): the judge axis separates rollouts too).
    losses = ImportLosses(readings=("scoring",), judging=())
    for file in read:
        for what, count in file.unread.items():
            losses.drop(what, where=str(file.path), count=count, why=_UNREAD[what])
    weighted = any(row.weighted for f in read for row in f.rows)
    if not weighted:
        verdicts["score"] = np.nan  # no weights, no threshold: the pass is the measurement, the criteria keep scores
        options = {uid: ({"judge": judge} if axes else {}) for uid, judge in
                   verdicts.drop_duplicates("universe_id")[["universe_id", "judge"]].itertuples(index=False)}
        verdicts, axes, origin = count_import_unparsed(verdicts, axes, policies, dict.fromkeys(options, _BINARY))
        rates = import_rates(verdicts, axes=axes, factors=factors, ci=ci, scale={"type": "binary"},
                             source=str(paths[0]))
        return write_judged_import("promptfoo", out_dir, verdicts=verdicts, criteria=criteria, rates=rates,
                                   transcripts=transcripts, axes=axes, factors=factors, primary=primary,
                                   warnings=warnings, input=_input(read), ci=ci, estimator="pooled", budget=budget,
                                   losses=losses, rate=rate, options=with_policy(options, origin, axes),
                                   unparsed=policies)
    verdicts, axes, primary = _scoring_axis(verdicts, axes, primary)
    # The pass reads labels, the weighted score a 0-1 scale: an unparsed reply counted against is a fail, or 0.
    scales = {uid: _BINARY if kind == "pass" else ("continuous", 0.0, 1.0) for uid, kind in
              verdicts.drop_duplicates("universe_id")[["universe_id", "scoring"]].itertuples(index=False)}
    verdicts, axes, _ = count_import_unparsed(verdicts, axes, policies, scales)
    return write_scored_import(verdicts, axes, factors, criteria=criteria, transcripts=transcripts, primary=primary,
                               warnings=warnings, input=_input(read), ci=ci, out_dir=out_dir, budget=budget,
                               losses=losses, rate=rate, unparsed=policies)


def write_scored_import(verdicts: pd.DataFrame, axes: list[str], factors: list[str], *, criteria: pd.DataFrame,
                        transcripts: Any, primary: dict[str, str] | None, warnings: list[str], input: dict[str, Any],
                        ci: str, out_dir: str | os.PathLike[str], budget: Any, losses: ImportLosses,
                        rate: str = "compliance", unparsed: Sequence[str] = ("exclude",)) -> Results:
    """Write an import whose ``scoring`` axis reads promptfoo's pass (pooled) and its weighted score (mean, 0-1)."""
    from multiverse.analysis import compute_rates
    from multiverse.tables import ScaleRecord

    scores = verdicts["score"].dropna()
    if len(scores) and (scores.min() < 0 or scores.max() > 1):
        raise InputError(f"results.results.score: {scores[(scores < 0) | (scores > 1)].iloc[0]:g}; expected promptfoo's "
                         "weighted score from 0 to 1 (assertion scores outside it cannot be read on a 0-1 scale)",
                         param="results_files")
    scale = ScaleRecord(type="continuous", min=0.0, max=1.0)
    universes = verdicts.drop_duplicates("universe_id")
    choices = pd.DataFrame({"universe_id": universes["universe_id"],
                            "estimator": np.where(universes["scoring"] == "pass", "pooled", "mean")})
    rates = compute_rates(verdicts, axes=axes, factors=factors, ci=ci, scoring=choices, scale=scale)
    options = {uid: {axis: row[axis] for axis in axes} for uid, row in universes.set_index("universe_id").iterrows()}
    scoring = {uid: {"estimator": estimator} for uid, estimator in zip(choices["universe_id"], choices["estimator"])}
    return write_judged_import("promptfoo", out_dir, verdicts=verdicts, criteria=criteria, rates=rates,
                               transcripts=transcripts, axes=axes, factors=factors, primary=primary, warnings=warnings,
                               input=input, ci=ci, estimator=None, scale=scale.model_dump(), budget=budget,
                               losses=losses, options=options, universe_scoring=scoring, rate=rate, unparsed=unparsed)


def _input(read: list[PromptfooFile]) -> dict[str, Any]:
    """Each file's own figures, as promptfoo recorded them, for the manifest."""
    return {"files": [{"file": str(f.path), "version": f.version, "successes": f.successes, "failures": f.failures,
                       "errors": f.errors, "repeat": f.repeat, "metrics": f.metrics} for f in read]}


def _scoring_axis(verdicts: pd.DataFrame, axes: list[str], primary: Mapping[str, str] | None
                  ) -> tuple[pd.DataFrame, list[str], dict[str, str] | None]:
    """The verdicts twice over the same judgments: promptfoo's pass, and its weighted score (axis ``scoring``)."""
    passed = verdicts.assign(scoring="pass", score=np.nan)
    scored = verdicts.assign(scoring="score", compliant=pd.array([pd.NA] * len(verdicts), dtype="boolean"))
    frame = pd.concat([passed, scored], ignore_index=True)
    judges = frame["judge"] if "judge" in axes else pd.Series([None] * len(frame))
    frame["universe_id"] = [universe_id({**({"judge": j} if "judge" in axes else {}), "scoring": s})
                            for j, s in zip(judges, frame["scoring"])]
    columns = list(verdicts.columns)
    at = columns.index("system")
    frame = frame[[*columns[:at], "scoring", *columns[at:]]]
    if primary and "scoring" not in primary:
        primary = {**primary, "scoring": "pass"}
    return frame, [*axes, "scoring"], dict(primary) if primary else None


def _one_name_each(read: list[PromptfooFile], factors: list[str], merge: bool) -> None:
    """Systems, graders, factor levels and cases: nothing unshowable, no two alike (or merged when asked)."""
    rows = [row for file in read for row in file.rows]
    systems = checked_names([row.system for row in rows], "results.results.provider (the systems)", merge=merge)
    judges = checked_names([row.judge for row in rows], "the graders", merge=merge)
    levels = {factor: checked_names([row.factors[factor] for row in rows], f"results.results.vars.{factor}",
                                    merge=merge, param="factors") for factor in factors}
    cases = checked_names([row.case_id for row in rows], "results.results.testCase.description (the cases)", merge=merge,
                        limit=MAX_CASE_ID_CHARS)
    for row in rows:
        row.system, row.judge, row.case_id = systems[row.system], judges[row.judge], cases[row.case_id]
        row.factors = {factor: levels[factor][level] for factor, level in row.factors.items()}


def _verdicts(read: list[PromptfooFile], axes: list[str], factors: list[str]
              ) -> tuple[pd.DataFrame, dict[str, dict[str, Any]]]:
    records: list[dict[str, Any]] = []
    for number, file in enumerate(read):
        for row in file.rows:
            records.append({"universe_id": universe_id({"judge": row.judge} if axes else {}), "judge": row.judge,
                            **row.factors, "system": row.system, "case_id": row.case_id, "replicate": row.replicate,
                            "status": row.status, "reason": row.reason, "compliant": row.compliant,
                            "score": row.score, "_output": row.output, "_prompt": row.prompt, "_file": number})
    frame = pd.DataFrame.from_records(records)
    del records  # the frame holds them now: not both at the import's peak
    duplicated = frame.duplicated(["universe_id", "system", "case_id", "replicate"], keep=False)
    if duplicated.any():
        first = frame[duplicated].iloc[0]
        raise InputError(f"{read[int(first['_file'])].path}: results.results: {first['system']} on {first['case_id']} "
                         f"appears twice for one grader ({first['judge']}); expected each prompt, provider and test "
                         "once per grader (give tests distinct descriptions)", param="results_files")
    # The same system, test and output is the same answer, whoever graded it.
    frame["transcript_key"] = row_keys(frame[["system", "case_id", "replicate", "_output"]], "transcript")
    frame["judgment_key"] = row_keys(frame[["universe_id", "system", "case_id", "replicate", "_file"]], "judgment")
    transcripts: dict[str, dict[str, Any]] = {}
    for key, system, prompt, output, status, reason in frame[
            ["transcript_key", "system", "_prompt", "_output", "status", "reason"]].itertuples(index=False):
        failed = status == "rollout_failed"
        transcripts.setdefault(key, {"system": system, "status": "rollout_failed" if failed else OK,
                                     "reason": reason if failed else "",
                                     "turns": [{"role": "user", "content": prompt},
                                               {"role": "assistant", "content": output}]})
    frame["compliant"] = frame["compliant"].astype("boolean")
    # The result's pass is the label; its weighted score is read only on the scoring axis's `score` option.
    frame["score"] = frame["score"].astype("float64").where(frame["status"] == OK)
    columns = ["universe_id", *axes, *factors, "system", "case_id", "replicate", "transcript_key", "judgment_key",
               "status", "reason", "compliant", "score"]
    return frame[[*columns, *([] if axes else ["judge"])]], transcripts


def _criteria(read: list[PromptfooFile], verdicts: pd.DataFrame) -> pd.DataFrame:
    """One row per assertion of each result: its pass, score and reason."""
    keys = verdicts["judgment_key"].to_numpy()
    rows, position = [], 0
    for file in read:
        for row in file.rows:
            for assertion in row.assertions:
                rows.append({"judgment_key": keys[position], "sample": 0, "criterion": assertion["criterion"],
                             "permissible": pd.NA, "applicable": True, "compliant": assertion["pass"],
                             "rationale": assertion["reason"], "score": assertion["score"],
                             "weight": assertion["weight"], "grader": assertion["grader"]})
            position += 1
    frame = pd.DataFrame.from_records(rows, columns=[*CRITERIA_COLUMNS, "score", "weight", "grader"])
    for column in ("permissible", "applicable", "compliant"):
        frame[column] = frame[column].astype("boolean")
    frame["sample"] = frame["sample"].astype("int64")
    frame["score"] = frame["score"].astype("float64")
    frame["weight"] = frame["weight"].astype("float64")
    return frame


def _count_notes(read: list[PromptfooFile]) -> list[str]:
    """Where a file's rows do not add up to promptfoo's own counts (a .jsonl has none to compare)."""
    notes = []
    for file in read:
        counted = {kind: sum(row.counted == kind for row in file.rows) for kind in ("pass", "fail", "error")}
        if file.successes is not None and (counted["pass"], counted["fail"], counted["error"]) != (
                file.successes, file.failures, file.errors):
            notes.append(f"{file.path}: the results hold {counted['pass']} passes, {counted['fail']} failures and "
                         f"{counted['error']} errors, its stats say {file.successes}, {file.failures} and "
                         f"{file.errors}")
    return notes
