"""Import Inspect AI logs (.eval or .json) as an import directory.

Read with Inspect's own log API (``inspect_ai.log.read_eval_log``; the ``inspect``
extra), so every log version Inspect reads is read alike:

================================ ===========================================================
Inspect                          multiverse
================================ ===========================================================
``eval.model`` (or a named role) ``verdicts.system``
grader role in ``model_roles``,  the ``judge`` axis (when the logs' judges differ): each judge
else the scorer's model          a universe
sample ``id``                    ``case_id``
sample ``epoch``                 ``replicate`` (intervals cluster by sample)
score value ``C`` / ``I``        ``compliant`` true / false
``P``                            ``score`` ``partial`` (0.5 unless declared), no label
``N``                            ``status`` excluded, reason ``no answer (N)``
a number in [0, 1] or true/false ``score`` (and a label for true/false)
an object ``{key: value}``       the value of the key named with the scorer (``NAME:KEY``)
``explanation``                  ``criteria.rationale`` (criterion: the scorer's name)
the sample's ``messages``        ``transcripts.jsonl`` (the explorer shows them)
sample ``metadata[KEY]``         a design factor with ``factors=[KEY]``
a sample ``error``               ``status`` rollout_failed, never a label
no score from the scorer         ``status`` judge_failed
================================ ===========================================================

Logs are paired as judges only where they judged the same conversations: the
transcript key digests the system, sample, epoch and the solver's output text,
so two logs whose solver produced different text for a sample are not paired on
it; the import then says how many differ, ``agreement`` compares the judges on the
units with the same output, and where no output is shared it pairs them on system,
sample and epoch with a note. With only C/I values the rate is the share of
correct (sample, epoch) rows, which is Inspect's ``accuracy`` when every sample
has the same number of epochs; a warning says when they do not. Partial credit
and numbers are scores on a continuous [0, 1] scale whose rate is their mean.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from multiverse.core import OK, RESERVED_NAMES, universe_id
from multiverse.errors import InputError
from multiverse.importers._columns import import_rates, rationale_criteria, row_keys, write_judged_import
from multiverse.importers._directory import check_ci
from multiverse.importers._guard import checked_names, import_budget
from multiverse.importers._inspect_log import InspectLog, read_inspect_log
from multiverse.results import Results

__all__ = ["import_inspect"]


def import_inspect(
    logs: str | os.PathLike | Sequence[str | os.PathLike],
    out_dir: str | os.PathLike,
    *,
    scorer: str | None = None,
    system_role: str | None = None,
    judge_role: str = "grader",
    partial: float = 0.5,
    factors: Sequence[str] = (),
    primary: Mapping[str, str] | None = None,
    ci: str = "wilson",
    force: bool = False,
    max_bytes: int | None = None,
    max_rows: int | None = None,
    max_transcript_bytes: int | None = None,
    merge_look_alikes: bool = False,
) -> Results:
    """Import Inspect logs into ``out_dir``; see the module docstring.

    ``scorer`` names the scorer to import when a log has several (``NAME:KEY`` for a
    scorer whose values are objects); ``system_role`` takes the system from a model
    role instead of ``eval.model``; ``judge_role`` is the role of the grader;
    ``partial`` the score of a ``P``; ``factors`` sample-metadata keys kept as design
    factors. Bad input raises InputError naming the log and field, and writes nothing.

    Bounds (:class:`multiverse.core.ImportBudget`): ``max_bytes`` of logs, counted
    inflated, and of transcripts; ``max_rows`` samples x epochs;
    ``max_transcript_bytes`` per transcript. Systems, judges or levels that look
    alike are refused unless ``merge_look_alikes`` reads them as one.
    """
    from multiverse.tables import check_output_dir

    paths = [Path(p) for p in ([logs] if isinstance(logs, (str, os.PathLike)) else logs)]
    if not paths:
        raise InputError("logs: expected at least one Inspect log", param="logs")
    check_ci(ci)
    if not (isinstance(partial, (int, float)) and 0 <= partial <= 1):
        raise InputError(f"partial: {partial!r}; expected a score from 0 to 1 for a P", param="partial")
    factors = list(factors)
    for factor in factors:
        if factor in RESERVED_NAMES or factor == "judge":
            raise InputError(f"factors: {factor}: name is reserved for the verdicts table; expected another metadata "
                             "key", param="factors")
    budget = import_budget(max_bytes, max_rows, max_transcript_bytes)
    check_output_dir(out_dir, kind="import", inputs=paths, force=force)
    name, _, key = (scorer or "").partition(":")
    read = [read_inspect_log(p, scorer=name or None, key=key or None, system_role=system_role, judge_role=judge_role,
                             partial=float(partial), factors=factors, budget=budget) for p in paths]
    _one_name_each(read, factors, bool(merge_look_alikes))
    _check_distinct(read)
    axes = ["judge"] if len({log.judge for log in read}) > 1 else []
    verdicts, transcripts, rationales, criteria_names = _verdicts(read, axes, factors)
    warnings = _pairing_notes(verdicts, axes) + _epoch_notes(read) + _excluded_notes(read)
    scored = bool(verdicts["compliant"].isna().to_numpy()[(verdicts["status"] == OK).to_numpy()].any())
    scale = {"type": "continuous", "min": 0.0, "max": 1.0} if scored else {"type": "binary"}
    if not scored:
        verdicts["score"] = np.nan  # binary: the label is the measurement
    estimator = "mean" if scored else "pooled"
    criteria = rationale_criteria(verdicts, rationales, criteria_names)
    rates = import_rates(verdicts, axes=axes, factors=factors, ci=ci, scale=scale, source=str(paths[0]))
    return write_judged_import("inspect", out_dir, verdicts=verdicts, criteria=criteria, rates=rates,
                               transcripts=transcripts, axes=axes, factors=factors, primary=primary, warnings=warnings,
                               input={"logs": [_log_entry(log) for log in read], "judge_role": judge_role,
                                      "system_role": system_role, "partial": float(partial)},
                               ci=ci, estimator=estimator, scale=scale, budget=budget)


def _one_name_each(read: list[InspectLog], factors: list[str], merge: bool) -> None:
    """Systems, judges and factor levels: nothing unshowable, no two alike (or merged when asked)."""
    systems = checked_names([log.system for log in read], "eval.model (the systems)", merge=merge)
    judges = checked_names([log.judge for log in read], "the judges", merge=merge)
    for log in read:
        log.system, log.judge = systems[log.system], judges[log.judge]
    for factor in factors:
        levels = checked_names([row.factors[factor] for log in read for row in log.rows],
                               f"samples.metadata.{factor}", merge=merge, param="factors")
        for log in read:
            for row in log.rows:
                row.factors[factor] = levels[row.factors[factor]]


def _check_distinct(read: list[InspectLog]) -> None:
    seen: dict[tuple[str, str, str], Path] = {}
    for log in read:
        key = (log.task, log.system, log.judge)
        if key in seen:
            raise InputError(f"{log.path}: eval.model: {log.system} judged by {log.judge} on task {log.task} is also "
                             f"in {seen[key]}; expected one log per task, system and judge", param="logs")
        seen[key] = log.path


def _verdicts(read: list[InspectLog], axes: list[str], factors: list[str]
              ) -> tuple[pd.DataFrame, dict[str, dict[str, Any]], list[str], list[str]]:
    records: list[dict[str, Any]] = []
    transcripts: dict[str, dict[str, Any]] = {}
    rationales: list[str] = []
    names: list[str] = []
    many_tasks = len({log.task for log in read}) > 1
    for log in read:
        uid = universe_id({"judge": log.judge} if axes else {})
        for row in log.rows:
            case_id = f"{log.task}/{row.case_id}" if many_tasks else row.case_id
            records.append({"universe_id": uid, "judge": log.judge, **row.factors, "system": log.system,
                            "case_id": case_id, "replicate": row.replicate, "_digest": row.output_digest,
                            "status": row.status, "reason": row.reason, "compliant": row.compliant,
                            "score": row.score, "_turns": row.turns})
            rationales.append(row.rationale)
            names.append(log.scorer)
    frame = pd.DataFrame.from_records(records)
    duplicated = frame.duplicated(["universe_id", "system", "case_id", "replicate"])
    if duplicated.any():
        first = frame[duplicated].iloc[0]
        raise InputError(f"samples: {first['case_id']} epoch {first['replicate']} of {first['system']} appears twice "
                         "for one judge; expected each sample and epoch once", param="logs")
    # The same system, sample, epoch and solver output is the same conversation, whoever judged it.
    frame["transcript_key"] = row_keys(frame[["system", "case_id", "replicate", "_digest"]], "transcript")
    frame["judgment_key"] = row_keys(frame[["universe_id", "system", "case_id", "replicate"]], "judgment")
    for key, system, turns, status, reason in frame[["transcript_key", "system", "_turns", "status", "reason"]
                                                    ].itertuples(index=False):
        failed = status == "rollout_failed"
        transcripts.setdefault(key, {"system": system, "status": "rollout_failed" if failed else OK,
                                     "reason": reason if failed else "", "turns": turns})
    frame["compliant"] = frame["compliant"].astype("boolean")
    frame["score"] = frame["score"].astype("float64")
    columns = ["universe_id", *axes, *factors, "system", "case_id", "replicate", "transcript_key", "judgment_key",
               "status", "reason", "compliant", "score"]
    return frame[[*columns, *([] if axes else ["judge"])]], transcripts, rationales, names


def _pairing_notes(verdicts: pd.DataFrame, axes: list[str]) -> list[str]:
    """Say where two judges' logs hold different solver output for the same sample and epoch."""
    if not axes:
        return []
    per_unit = verdicts.groupby(["system", "case_id", "replicate"])["transcript_key"].nunique()
    differ = int((per_unit > 1).sum())
    if not differ:
        return []
    same = len(per_unit) - differ
    paired = (f"agreement pairs the judges on the {same:,} with the same output" if same else
              "no output is shared, so agreement pairs the judges by sample and epoch, not on the transcript")
    return [f"{differ:,} of {len(per_unit):,} (system, sample, epoch) units have different solver output in the "
            f"judges' logs (the judges did not grade the same conversation there): {paired}"]


def _epoch_notes(read: list[InspectLog]) -> list[str]:
    notes = []
    for log in read:
        counts = pd.Series([row.case_id for row in log.rows]).value_counts()
        if counts.nunique() > 1:
            notes.append(f"{log.path}: samples have {counts.min()} to {counts.max()} epochs: the rate weighs each "
                         "(sample, epoch) alike, Inspect's accuracy each sample alike, so the two differ")
    return notes


def _excluded_notes(read: list[InspectLog]) -> list[str]:
    notes = []
    for log in read:
        n = sum(row.status == "excluded" for row in log.rows)
        if n:
            notes.append(f"{log.path}: {n} rows scored N (no answer) are excluded; Inspect's accuracy counts them as 0")
    return notes


def _log_entry(log: InspectLog) -> dict[str, Any]:
    return {"file": str(log.path), "task": log.task, "system": log.system, "judge": log.judge,
            "judge_from": log.judge_from, "scorer": log.scorer, "inspect_version": log.version,
            "inspect_accuracy": log.accuracy}
