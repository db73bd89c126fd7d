"""Inspect logs as universes: one per judge x scorer x reducer, rows equal to what Inspect's metrics count.

Each epoch is a row where that gives Inspect's figures (every reducer ``mean``, every sample
scored in as many epochs, no ``N``); otherwise each sample is one row (replicate 0) holding
the value Inspect's reducer gives it, and each epoch lost a row of its status.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from multiverse.core import OK, ROLLOUT_FAILED, universe_id
from multiverse.errors import InputError
from multiverse.importers._columns import rationale_criteria, row_keys
from multiverse.importers._inspect_log import InspectLog, LogRow
from multiverse.importers._inspect_scores import reduce_values, row_value

__all__ = ["Built", "inspect_rates", "inspect_verdicts", "metric_notes"]

#: A scorer that calls no model has this in the ``judge`` axis, when other scorers' graders differ.
RULE = "rule-based"


@dataclass
class Built:
    """The verdicts, criteria and transcripts of an import, with its universes and their scales."""

    verdicts: pd.DataFrame
    criteria: pd.DataFrame
    transcripts: dict[str, dict[str, Any]]
    axes: list[str]
    options: dict[str, dict[str, str]]
    scale: dict[str, Any]
    universe_scales: dict[str, dict[str, Any]]
    estimator: str
    metrics: list[dict[str, Any]]
    notes: list[str] = field(default_factory=list)


def inspect_verdicts(read: list[InspectLog], *, factors: list[str], partial: float,
                     scales: Mapping[str, tuple[float, float]]) -> Built:
    """Rows of every universe of ``read``, each equal to what Inspect's own metrics count."""
    by_epoch = all(log.reducers == ["mean"] for log in read) and not any(_uneven(log, s) or _has_n(log, s)
                                                                       for log in read for s in log.scorers)
    cells = [(log, scorer, reducer) for log in read for scorer in log.scorers
             for reducer in (["mean"] if by_epoch else log.reducers)]
    keys, axes = _cell_keys(cells)
    gathered = _Gathered()
    many_tasks = len({log.task for log in read}) > 1
    for i, (log, scorer, reducer) in enumerate(cells):
        option = {axis: keys[axis][i] for axis in axes}
        uid = universe_id(option)
        gathered.options[uid] = option
        low, high = scales.get(scorer, scales.get(scorer.split(":", 1)[0], scales.get("*", (0.0, 1.0))))
        if (low, high) != (0.0, 1.0):
            gathered.universe_scales[uid] = {"type": "continuous", "min": low, "max": high}
        found = log.metrics.get((scorer, reducer))
        if found is not None:
            gathered.metrics.append({"universe_id": uid, "file": str(log.path), "system": log.system,
                                     "scorer": scorer, "reducer": reducer, "metrics": found})
        rows = _epoch_rows(log, scorer, partial, (low, high)) if by_epoch else \
            _reduced_rows(log, scorer, reducer, partial, (low, high))
        gathered.add(rows, log=log, uid=uid, option=option, judge=keys["judge"][i], scorer=keys["scorer"][i],
                     many_tasks=many_tasks)
    frame = pd.DataFrame.from_records(gathered.records)
    _one_log_per_unit(frame)
    frame["transcript_key"] = row_keys(frame[["system", "case_id", "_digest"]], "transcript")
    frame["judgment_key"] = row_keys(frame[["universe_id", "system", "case_id", "replicate"]], "judgment")
    transcripts = _keyed_transcripts(frame, gathered.transcripts)
    frame["compliant"] = frame["compliant"].astype("boolean")
    frame["score"] = frame["score"].astype("float64")
    counted = (frame["status"] == OK).to_numpy()
    labelled = bool(frame["compliant"].notna().to_numpy()[counted].all()) and not gathered.universe_scales
    if labelled:
        frame["score"] = np.nan  # every value is a label: the label is the measurement
    scale = {"type": "binary"} if labelled else {"type": "continuous", "min": 0.0, "max": 1.0}
    columns = ["universe_id", *axes, *factors, "system", "case_id", "replicate", "transcript_key", "judgment_key",
               "status", "reason", "compliant", "score"]
    verdicts = frame[columns + ([] if "judge" in axes else ["_judge"])].rename(columns={"_judge": "judge"})
    criteria = rationale_criteria(verdicts, gathered.rationales, gathered.names)
    notes = [] if by_epoch else _epoch_notes(read)
    return Built(verdicts=verdicts, criteria=criteria, transcripts=transcripts, axes=axes, options=gathered.options,
                 scale=scale, universe_scales=gathered.universe_scales, estimator="pooled" if labelled else "mean",
                 metrics=gathered.metrics, notes=notes)


def _cell_keys(cells: list[tuple[InspectLog, str, str]]) -> tuple[dict[str, list[str]], list[str]]:
    """Each cell's judge, scorer and reducer, and the axes among them that vary (a judge only among graders)."""
    judges = {log.judges[s][0] for log, s, _ in cells}
    keys = {"judge": [(log.judges[s][0] or RULE) for log, s, _ in cells],
            "scorer": [_regraded(log, s) for log, s, _ in cells], "reducer": [r for _, _, r in cells]}
    axes = [axis for axis in ("judge", "scorer", "reducer")
            if len(set(keys[axis])) > 1 and (axis != "judge" or len(judges - {None}) > 1)]
    return keys, axes


@dataclass
class _Gathered:
    """What the cells of the logs add up to, before it becomes the verdicts table."""

    records: list[dict[str, Any]] = field(default_factory=list)
    rationales: list[str] = field(default_factory=list)
    names: list[str] = field(default_factory=list)
    transcripts: dict[str, dict[str, Any]] = field(default_factory=dict)
    options: dict[str, dict[str, str]] = field(default_factory=dict)
    universe_scales: dict[str, dict[str, Any]] = field(default_factory=dict)
    metrics: list[dict[str, Any]] = field(default_factory=list)

    def add(self, rows: list[tuple[Any, ...]], *, log: InspectLog, uid: str, option: dict[str, str], judge: str, scorer: str,
            many_tasks: bool) -> None:
        for row, status, reason, compliant, score, rationale, key, turns, replicate in rows:
            case_id = f"{log.task}/{row.case_id}" if many_tasks else row.case_id
            self.records.append({"universe_id": uid, **option, "_judge": judge, **row.factors,
                                 "system": log.system, "case_id": case_id, "replicate": replicate,
                                 "_digest": key, "status": status, "reason": reason, "compliant": compliant,
                                 "score": score, "_file": str(log.path)})
            self.rationales.append(rationale)
            self.names.append(scorer)
            self.transcripts.setdefault(f"{log.system}\x00{case_id}\x00{key}",
                                        {"turns": turns, "status": status, "reason": reason})


def _one_log_per_unit(frame: pd.DataFrame) -> None:
    """Refuse two logs that give the same universe, system, case and epoch (one line naming both files)."""
    unit = ["universe_id", "system", "case_id", "replicate"]
    duplicated = frame.duplicated(unit)
    if duplicated.any():
        second = frame[duplicated].iloc[0]
        first = frame[(frame[unit] == second[unit]).all(axis=1)].iloc[0]
        raise InputError(f"{second['_file']}: eval.model: {second['system']} on {second['case_id']} (epoch "
                         f"{second['replicate']}) judged by {second['_judge']} is also in {first['_file']}; expected "
                         "one log per task, system and judge", param="logs")


def _keyed_transcripts(frame: pd.DataFrame, gathered: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The transcripts by their keys: a system's failure stays the transcript's status."""
    transcripts = dict(gathered)
    for key, system, case_id, digest in frame[["transcript_key", "system", "case_id", "_digest"]
                                              ].itertuples(index=False):
        record = transcripts[f"{system}\x00{case_id}\x00{digest}"]
        failed = record["status"] == ROLLOUT_FAILED
        transcripts.setdefault(key, {"system": system, "status": ROLLOUT_FAILED if failed else OK,
                                     "reason": record["reason"] if failed else "", "turns": record["turns"]})
    return {k: v for k, v in transcripts.items() if "\x00" not in k}


def _regraded(log: InspectLog, option: str) -> str:
    """The scorer a re-grade appended (``inspect score --action append`` names it ``NAME1``) grades again.

    A scorer named as another of the log plus a number, whose grader differs, is that scorer
    graded by another judge: the same option of the scorer axis, another of the judge axis.
    """
    name, sep, key = option.partition(":")
    found = re.fullmatch(r"(.+?)[0-9]+", name)
    if found is None:
        return option
    first = found.group(1) + sep + key
    if first in log.judges and log.judges[first][0] is not None and log.judges[first][0] != log.judges[option][0]:
        return first
    return option


def _valued(row: LogRow, scorer: str) -> bool:
    return row.cells[scorer].status == OK


def _uneven(log: InspectLog, scorer: str) -> bool:
    counts: dict[str, int] = {}
    for row in log.rows:
        counts[row.case_id] = counts.get(row.case_id, 0) + _valued(row, scorer)
    return len({n for n in counts.values() if n}) > 1


def _has_n(log: InspectLog, scorer: str) -> bool:
    return any(row.cells[scorer].value == "N" for row in log.rows if _valued(row, scorer))


def _epoch_rows(log: InspectLog, scorer: str, partial: float, scale: tuple[float, float]) -> list[tuple[Any, ...]]:
    out = []
    for row in log.rows:
        c = row.cells[scorer]
        if c.status == OK:
            status, reason, compliant, score = row_value(log.path, f"samples.scores.{scorer}.value", c.value, partial,
                                                         scale)
        else:
            status, reason, compliant, score = c.status, c.reason, None, math.nan
        out.append((row, status, reason, compliant, score, c.rationale, f"{row.replicate}:{row.output_digest}",
                    row.turns, row.replicate))
    return out


def _reduced_rows(log: InspectLog, scorer: str, reducer: str, partial: float, scale: tuple[float, float]
                  ) -> list[tuple[Any, ...]]:
    """One row per sample with its reduced value; one per lost epoch, of its status."""
    samples: dict[str, list[LogRow]] = {}
    for row in log.rows:
        samples.setdefault(row.case_id, []).append(row)
    out: list[tuple[Any, ...]] = []
    for epochs in samples.values():
        scored = [r for r in epochs if _valued(r, scorer)]
        for r in epochs:
            c = r.cells[scorer]
            if c.status != OK:
                out.append((r, c.status, c.reason, None, math.nan, c.rationale, f"{r.replicate}:{r.output_digest}",
                            r.turns, r.replicate))
        if not scored:
            continue
        value = reduce_values([r.cells[scorer].value for r in scored], reducer)
        status, reason, compliant, score = row_value(log.path, f"samples.scores.{scorer} reduced by {reducer}", value,
                                                     partial, scale)
        # The sample's conversations are all its epochs', whichever a scorer could score: one key for every judge.
        digest = hashlib.sha256("|".join(r.output_digest for r in epochs).encode()).hexdigest()[:16]
        turns = [t for r in epochs for t in [{"role": "system", "content": f"epoch {r.replicate}"}, *r.turns]]
        rationale = "\n\n".join(f"epoch {r.replicate}: {r.cells[scorer].rationale}" for r in scored
                                if r.cells[scorer].rationale)
        out.append((scored[0], status, reason, compliant, score, rationale, f"epochs:{digest}", turns, 0))
    return out


def _epoch_notes(read: list[InspectLog]) -> list[str]:
    """Name the samples scored in fewer epochs than the others: reduced over those, as Inspect reduces them."""
    notes = []
    for log in read:
        for scorer in log.scorers:
            counts: dict[str, int] = {}
            for row in log.rows:
                counts[row.case_id] = counts.get(row.case_id, 0) + _valued(row, scorer)
            most = max(counts.values(), default=0)
            fewer = {case: n for case, n in counts.items() if n < most}
            if fewer:
                shown = ", ".join(f"{case} ({n} of {most})" for case, n in list(fewer.items())[:10])
                more = f" and {len(fewer) - 10:,} more" if len(fewer) > 10 else ""
                notes.append(f"{log.path}: {scorer}: {len(fewer):,} sample{'s' if len(fewer) > 1 else ''} scored in "
                             f"fewer epochs than the others: {shown}{more}; each is reduced over the epochs it has, "
                             "as Inspect reduces it (a sample with none is left out)")
    return notes


def inspect_rates(built: Built, *, factors: Sequence[str], ci: str) -> pd.DataFrame:
    """The rates of the import: shares of labels, or mean scores each on its universe's scale."""
    from multiverse.analysis import compute_rates
    from multiverse.tables import ScaleRecord

    if built.scale["type"] == "binary":
        return compute_rates(built.verdicts, axes=built.axes, factors=factors, ci=ci)
    ends = pd.DataFrame([{"universe_id": uid, "estimator": "mean",
                          "low": built.universe_scales.get(uid, {}).get("min", 0.0),
                          "high": built.universe_scales.get(uid, {}).get("max", 1.0)} for uid in built.options])
    return compute_rates(built.verdicts, axes=built.axes, factors=factors, ci=ci, estimator="mean",
                         scale=ScaleRecord(**built.scale), scoring=ends)


def metric_notes(built: Built, rates: pd.DataFrame) -> list[str]:
    """Say where a rate is not Inspect's own accuracy or mean of the same universe and system (one log each)."""
    overall = rates[rates["subgroup"] == "all"].set_index(["universe_id", "system"])
    logs_per_cell: dict[tuple[str, str], int] = {}
    for m in built.metrics:
        logs_per_cell[(m["universe_id"], m["system"])] = logs_per_cell.get((m["universe_id"], m["system"]), 0) + 1
    notes = []
    for m in built.metrics:
        cell = (m["universe_id"], m["system"])
        figure = m["metrics"].get("accuracy", m["metrics"].get("mean"))
        if figure is None or logs_per_cell[cell] > 1 or cell not in overall.index:
            continue
        row = overall.loc[cell]
        mine = float(row["mean"]) if "mean" in overall.columns and not pd.isna(row["mean"]) else float(row["rate"])
        if not math.isclose(mine, figure, rel_tol=1e-9, abs_tol=1e-12):
            notes.append(f"{Path(m['file']).name}: {m['scorer']} reduced by {m['reducer']}: the import gives "
                         f"{mine:.6g}, Inspect's own figure is {figure:.6g}")
    return notes
