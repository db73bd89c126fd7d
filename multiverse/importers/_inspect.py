"""Import Inspect AI logs (.eval or .json, or an ``eval-set`` folder) as an import directory.

Read with Inspect's own log API (``inspect_ai.log.read_eval_log``; the ``inspect``
extra), so every log version Inspect reads is read alike:

================================ ===========================================================
Inspect                          multiverse
================================ ===========================================================
``eval.model`` (or a named role) ``verdicts.system``
each scorer, each key of a       the ``scorer`` axis (when there are several): ``NAME`` or
scorer whose values are objects  ``NAME:KEY``, each a universe
each epoch reducer of the log    the ``reducer`` axis (when there are several)
the model a scorer's scoring     the ``judge`` axis (when the graders differ); a scorer that
events called (else the header's) calls no model (``match()``) has no judge
sample ``id``                    ``case_id``
sample ``epoch``                 ``replicate`` (intervals cluster by sample), or the sample's
                                 value reduced over its epochs by Inspect's own reducer
score value ``C`` / ``I``        ``compliant`` true / false
``P``                            ``score`` ``partial`` (0.5 unless declared), no label
``N``                            ``status`` excluded, reason ``no answer (N)``
a number or true/false           ``score`` (on ``scale``, 0 to 1 unless given; a label for true/false)
``explanation``                  ``criteria.rationale`` (criterion: the scorer's name)
the sample's ``messages``        ``transcripts.jsonl`` (the explorer shows them)
sample ``metadata[KEY]``         a design factor with ``factors=[KEY]``
================================ ===========================================================

Every row that is not a value is a loss of its kind (``importers.loss_reason``): unscored
by the grader (no grade) or a scorer exception is ``judge_failed``, a sample error before
scoring ``rollout_failed``, a cancelled or never-started sample of a failed eval ``not_run``.

Rates equal Inspect's own metrics: where every reducer is ``mean``, every sample has the
same number of scored epochs and none is ``N``, each epoch is a row (a replicate) and the
mean over rows is Inspect's mean of per-sample means; otherwise each sample is one row
(replicate 0) holding its value reduced over the epochs it has by Inspect's own reducer,
and each lost epoch a row of its status. A sample scored in fewer epochs than the others
is named in a warning. Every metric of ``log.results`` is kept in the manifest beside the
universe it belongs to.

Logs are paired as judges only where they judged the same conversations: the transcript
key digests the system, sample, epoch and the solver's output text.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from multiverse.core import RESERVED_NAMES, check_rate_direction, read_regular_file
from multiverse.errors import InputError
from multiverse.importers._columns import write_judged_import
from multiverse.importers._directory import check_ci
from multiverse.importers._guard import MAX_CASE_ID_CHARS, checked_names, import_budget
from multiverse.importers._inspect_log import InspectLog, read_inspect_log
from multiverse.importers._inspect_universes import Built, inspect_rates, inspect_verdicts, metric_notes
from multiverse.importers._losses import ImportLosses
from multiverse.importers._unparsed import check_unparsed, count_import_unparsed, rekeyed, with_policy
from multiverse.results import Results

__all__ = ["import_inspect"]

#: The files of an ``eval-set`` folder that are not logs.
_SET_FILES = ("logs.json", "eval-set.json")


def import_inspect(
    logs: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    out_dir: str | os.PathLike[str],
    *,
    scorer: str | Sequence[str] | None = None,
    system_role: str | None = None,
    judge_role: str = "grader",
    partial: float = 0.5,
    scale: Sequence[float] | Mapping[str, Sequence[float]] | None = None,
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
    """Import Inspect logs (or ``eval-set`` folders of them) into ``out_dir``; see the module docstring.

    ``scorer`` keeps only the named scorers (``NAME`` or ``NAME:KEY``; default: every one);
    ``system_role`` takes the system from a model role instead of ``eval.model``;
    ``judge_role`` is the grader's role, read only for a log without scoring events;
    ``partial`` the score of a ``P``; ``scale`` the ``(min, max)`` of scores outside 0 to 1
    (for every scorer, or ``{scorer: (min, max)}``); ``factors`` sample-metadata keys kept
    as design factors. Bad input raises InputError naming the log and field, and writes nothing.

    Bounds (:class:`multiverse.core.ImportBudget`): ``max_bytes`` of logs, counted
    inflated, and of transcripts; ``max_rows`` samples x epochs;
    ``max_transcript_bytes`` per transcript. Systems, judges or levels that look
    alike are refused unless ``merge_look_alikes`` reads them as one. ``unparsed``: how an
    unscored sample (no grade) counts, a ``scoring.unparsed`` policy or several (an axis).
    """
    from multiverse.tables import check_output_dir

    given = [Path(p) for p in ([logs] if isinstance(logs, (str, os.PathLike)) else logs)]
    if not given:
        raise InputError("logs: expected at least one Inspect log", param="logs")
    check_ci(ci)
    check_rate_direction(rate)
    policies = check_unparsed(unparsed)
    if not (isinstance(partial, (int, float)) and 0 <= partial <= 1):
        raise InputError(f"partial: {partial!r}; expected a score from 0 to 1 for a P", param="partial")
    scales = _scales(scale)
    factors = list(factors)
    for factor in factors:
        if factor in RESERVED_NAMES or factor in ("judge", "scorer", "reducer"):
            raise InputError(f"factors: {factor}: name is reserved for the verdicts table; expected another metadata "
                             "key", param="factors")
    losses = ImportLosses(readings=("reducer",))  # each reducer reads the same epochs
    paths, notes = _log_paths(given, losses)
    budget = import_budget(max_bytes, max_rows, max_transcript_bytes)
    check_output_dir(out_dir, kind="import", inputs=given, force=force)
    wanted = [scorer] if isinstance(scorer, str) else list(scorer) if scorer else None
    read = [read_inspect_log(p, scorers=wanted, system_role=system_role, judge_role=judge_role, factors=factors,
                             budget=budget) for p in paths]
    _one_name_each(read, factors, bool(merge_look_alikes))
    _scales_named(scales, read)
    for log in read:
        for what, (n, why) in log.dropped.items():
            losses.drop(what, where=str(log.path), count=n, why=why)
    built = _count_unparsed(inspect_verdicts(read, factors=factors, partial=float(partial), scales=scales),
                             policies)
    rates = inspect_rates(built, factors=factors, ci=ci)
    if "scorer" in built.axes:  # a dict scorer's keys (NAME:KEY) are one call of NAME: one judgment lost, not one per key
        losses.calls["scorer"] = {o: o.split(":", 1)[0] for o in built.verdicts["scorer"].astype(str).unique()}
    warnings = notes + _pairing_notes(built.verdicts, built.axes) + built.notes + metric_notes(built, rates)
    for log in read:
        if log.status != "success":
            warnings.append(f"{log.path}: the eval ended {log.status}: its samples that were cancelled or never "
                            "started are rows not_run, never labels")
    return write_judged_import("inspect", out_dir, verdicts=built.verdicts, criteria=built.criteria, rates=rates,
                               transcripts=built.transcripts, axes=built.axes, factors=factors, primary=primary,
                               warnings=warnings, input={"logs": [_log_entry(log) for log in read],
                                                         "judge_role": judge_role, "system_role": system_role,
                                                         "partial": float(partial), "metrics": built.metrics},
                               ci=ci, estimator=built.estimator, scale=built.scale, budget=budget,
                               options=built.options, universe_scales=built.universe_scales, losses=losses, rate=rate,
                               unparsed=policies)


def _scales_named(scales: dict[str, tuple[float, float]], read: list[Any]) -> None:
    """Refuse a scale named for a scorer no log holds: it would scale nothing, silently (issue 45)."""
    scorers = {s for log in read for s in log.scorers}
    known = scorers | {s.split(":", 1)[0] for s in scorers}
    for name in scales:
        if name != "*" and name not in known:
            raise InputError(f"scale: {name}: no scorer of the logs is named so (scorers: "
                             f"{', '.join(sorted(known)[:8]) or 'none'}); expected SCORER=MIN:MAX of one of them",
                             param="scale")


def _scales(scale: Any) -> dict[str, tuple[float, float]]:
    """``{scorer or "*": (min, max)}`` from one range or a range per scorer; refused in one line otherwise."""
    if scale is None:
        return {}
    ranges = dict(scale) if isinstance(scale, Mapping) else {"*": scale}
    out = {}
    for name, bounds in ranges.items():
        try:
            low, high = (float(b) for b in bounds)
        except (TypeError, ValueError):
            raise InputError(f"scale: {bounds!r}; expected two numbers, the scorer's min and max", param="scale") from None
        if not (low < high and all(abs(b) < 1e12 for b in (low, high))):
            raise InputError(f"scale: {low:g} to {high:g}; expected a min below the max", param="scale")
        out[str(name)] = (low, high)
    return out


def _refusal(path: Path) -> Callable[[str], InputError]:
    """The refusal of a file read for the logs: its path, then the problem."""
    return lambda problem: InputError(f"{path}: {problem}", param="logs")


def _log_paths(given: list[Path], losses: ImportLosses) -> tuple[list[Path], list[str]]:
    """The logs named, an ``eval-set`` folder read as its tasks' logs (an earlier attempt of a task dropped)."""
    import json

    paths: list[Path] = []
    notes: list[str] = []
    for path in given:
        if not path.is_dir():
            paths.append(path)
            continue
        found = sorted(p for p in path.iterdir() if p.suffix.lower() in (".eval", ".json") and p.name not in _SET_FILES
                       and p.is_file())
        manifest = path / "eval-set.json"
        tasks = []
        if manifest.is_file():
            # A list of tasks: a few KB. Read within a spec file's bound (a 300 MB manifest was read whole),
            # and a manifest nested past the parser's depth is as unreadable as one that is not JSON.
            data = read_regular_file(manifest, _refusal(manifest), what="manifest of an eval set")
            try:
                tasks = [str(t["task_id"]) for t in json.loads(data)["tasks"]]
            except (ValueError, KeyError, TypeError, RecursionError):
                raise InputError(f"{manifest}: tasks: expected Inspect's eval-set manifest (a list of tasks with "
                                 "their task_id)", param="logs") from None
        if not tasks:
            if not found:
                raise InputError(f"{path}: a directory without Inspect logs; expected a log (.eval or .json) or an "
                                 "eval-set folder of them", param="logs")
            paths += found
            continue
        for task in tasks:
            attempts = [p for p in found if p.stem.endswith(f"_{task}")]
            if not attempts:
                notes.append(f"{manifest}: task {task} has no log in the folder: nothing of it is imported")
                continue
            paths.append(attempts[-1])  # the name begins with its time: the last attempt is the eval-set's
            for earlier in attempts[:-1]:
                losses.drop(f"an earlier attempt of task {task}", where=str(earlier), count=None,
                            why="eval-set retried the task; its last attempt is imported")
    return paths, notes


def _one_name_each(read: list[InspectLog], factors: list[str], merge: bool) -> None:
    """Systems, judges, scorers, cases and factor levels: nothing unshowable, no two alike (or merged when asked)."""
    systems = checked_names([log.system for log in read], "eval.model (the systems)", merge=merge)
    judges = checked_names([j for log in read for j, _ in log.judges.values() if j is not None], "the judges",
                           merge=merge)
    cases = checked_names([row.case_id for log in read for row in log.rows], "samples.id (the cases)", merge=merge,
                        limit=MAX_CASE_ID_CHARS)
    for log in read:
        log.system = systems[log.system]
        for row in log.rows:
            row.case_id = cases[row.case_id]
        log.judges = {s: (judges[j] if j is not None else None, where) for s, (j, where) in log.judges.items()}
    for factor in factors:
        levels = checked_names([row.factors[factor] for log in read for row in log.rows],
                               f"samples.metadata.{factor}", merge=merge, param="factors")
        for log in read:
            for row in log.rows:
                row.factors[factor] = levels[row.factors[factor]]


def _pairing_notes(verdicts: Any, axes: list[str]) -> list[str]:
    """Say where two judges' logs hold different solver output for the same sample and epoch."""
    if "judge" not in axes:
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


def _count_unparsed(built: Built, policies: list[str]) -> Built:
    """``built`` with its unscored samples counted as ``policies`` say (``importers._unparsed``)."""
    ends = {uid: (built.scale["type"], float(built.universe_scales.get(uid, built.scale).get("min", 0.0)),
                  float(built.universe_scales.get(uid, built.scale).get("max", 1.0))) for uid in built.options}
    verdicts, axes, origin = count_import_unparsed(built.verdicts, built.axes, policies, ends)
    metrics = [{**m, "universe_id": new} for m in built.metrics for new, (old, _) in origin.items()
               if old == m["universe_id"]]
    return replace(built, verdicts=verdicts, axes=axes, options=with_policy(built.options, origin, axes),
                   universe_scales=rekeyed(built.universe_scales, origin), metrics=metrics)


def _log_entry(log: InspectLog) -> dict[str, Any]:
    return {"file": str(log.path), "task": log.task, "system": log.system, "status": log.status,
            "inspect_version": log.version, "reducers": log.reducers,
            "scorers": {name: {"judge": judge, "judge_from": where} for name, (judge, where) in log.judges.items()}}
