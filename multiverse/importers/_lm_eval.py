"""Import lm-evaluation-harness output (``lm_eval run ... --log_samples``) as an import directory.

lm-eval writes, per run, ``results_<time>.json`` (each task's metrics, their ``_stderr``, the
model, the task configs) and beside it ``samples_<task>_<time>.jsonl`` (one line per document
and filter: the document, the prompt, the model's answers, the filtered answer and each
metric's value). Both are read, with their bounds, and checked field by field:

=================================== =============================================================
lm-eval                             multiverse
=================================== =============================================================
``model_name`` of the results file  ``verdicts.system`` (one results file per model)
the task and ``doc_id``             ``case_id`` ``TASK:DOC_ID``, and the design factor ``task``
the filter, the metric              the axes ``filter`` and ``metric`` (when there are several):
                                    each (filter, metric) a universe over the same answers
the metric's value of a sample      ``score`` on a 0-1 scale; the rate is its mean (lm-eval's
                                    ``mean`` aggregation), its ``se`` lm-eval's ``_stderr``
``resps`` (every repeat) and the    ``transcripts.jsonl``: the prompt, each answer, the answer
``filtered_resps``                  the filter kept
``doc[KEY]``                        a design factor with ``factors=[KEY]``
=================================== =============================================================

lm-eval scores one answer per document and filter: with ``repeats`` its filter (``take_first``,
``majority_vote``) makes one answer of the repeats, so there are no replicates to import; the
repeats are kept in the transcripts. A metric that is not a mean of per-document values in
[0, 1] (a corpus-level BLEU, a perplexity) cannot be reproduced from the samples: it is left
out and listed in the manifest's ``dropped``, as are each document's other fields. The
import checks its per-task rates and standard errors against the results file's and says
where one differs.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from multiverse.core import OK, RESERVED_NAMES, ImportBudget, universe_id
from multiverse.errors import InputError
from multiverse.importers._columns import row_keys, write_judged_import
from multiverse.importers._directory import check_ci
from multiverse.importers._guard import checked_names, import_budget, text_only
from multiverse.importers._losses import ImportLosses
from multiverse.importers._unparsed import check_unparsed, count_import_unparsed, with_policy
from multiverse.results import Results

__all__ = ["import_lm_eval"]

_RESULTS = re.compile(r"results_(?P<time>.+)\.json")
#: Results files found in a folder: more is a wrong folder (a home directory), not a run.
_MAX_RESULTS = 1_000


@dataclass
class _Run:
    """One results file and its samples: what the import needs."""

    path: Path
    system: str
    version: str
    figures: dict[str, dict[str, Any]]
    rows: list[dict[str, Any]] = field(default_factory=list)
    transcripts: dict[str, dict[str, Any]] = field(default_factory=dict)


def import_lm_eval(
    sources: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    out_dir: str | os.PathLike[str],
    *,
    factors: Sequence[str] = (),
    primary: Mapping[str, str] | None = None,
    ci: str = "wilson",
    force: bool = False,
    max_bytes: int | None = None,
    max_rows: int | None = None,
    max_transcript_bytes: int | None = None,
    merge_look_alikes: bool = False,
    rate: str = "compliance",
    unparsed: str | Sequence[str] = "exclude",
) -> Results:
    """Import lm-eval results files (or the folders holding them) into ``out_dir``; see the module docstring.

    ``factors`` names document fields kept as design factors (``task`` is always one).
    Bad input raises InputError naming the file and field, and writes nothing. Bounds
    (:class:`multiverse.core.ImportBudget`): ``max_bytes`` of results and samples files,
    ``max_rows`` samples, ``max_transcript_bytes`` per transcript. Models or levels that
    look alike are refused unless ``merge_look_alikes`` reads them as one. ``rate`` is the way the
    import's figures read a rate (the manifest's ``rate``), as for every import. ``unparsed`` is taken
    as every import takes it (several: an axis), though lm-eval scores every sample itself (a reply
    its filter found no answer in is its metric's 0), so no row is an unparsed reply.
    """
    from multiverse.analysis import compute_rates
    from multiverse.core import check_rate_direction
    from multiverse.tables import ScaleRecord, check_output_dir

    check_rate_direction(rate)
    policies = check_unparsed(unparsed)
    paths = [Path(p) for p in ([sources] if isinstance(sources, (str, os.PathLike)) else sources)]
    if not paths:
        raise InputError("sources: expected at least one lm-eval results file or output folder", param="sources")
    check_ci(ci)
    factors = _factor_names(factors)
    budget = import_budget(max_bytes, max_rows, max_transcript_bytes)
    files = [f for p in paths for f in _results_files(p)]
    check_output_dir(out_dir, kind="import", inputs=files, force=force)
    losses = ImportLosses(readings=("filter", "metric"))  # each filter and metric reads the same responses
    runs = [_read_run(path, factors, budget, losses) for path in files]
    frame = pd.DataFrame.from_records([row for run in runs for row in run.rows])
    if frame.empty:
        raise InputError(f"{files[0]}: expected at least one sample with a metric of 0-1 values to import")
    systems = _named(frame, factors, bool(merge_look_alikes))
    axes = [axis for axis in ("filter", "metric") if frame[axis].nunique() > 1]
    frame["universe_id"] = [universe_id({axis: row[i] for i, axis in enumerate(axes)})
                            for row in frame[axes].itertuples(index=False)] if axes else universe_id({})
    duplicated = frame.duplicated(["universe_id", "system", "case_id"], keep=False)
    if duplicated.any():
        first = frame[duplicated].iloc[0]
        raise InputError(f"{first['_file']}: {first['system']} on {first['case_id']} ({first['filter']}, "
                         f"{first['metric']}) appears twice; expected each model's run of a task once",
                         param="sources")
    frame["judgment_key"] = row_keys(frame[["universe_id", "system", "case_id"]], "judgment")
    frame["replicate"] = 0
    frame["status"], frame["reason"] = OK, ""
    frame["compliant"] = pd.array([pd.NA] * len(frame), dtype="boolean")
    all_factors = ["task", *factors]
    verdicts = frame[["universe_id", *axes, *all_factors, "system", "case_id", "replicate", "transcript_key",
                      "judgment_key", "status", "reason", "compliant", "score"]].copy()
    scale = ScaleRecord(type="continuous", min=0.0, max=1.0)
    options = {uid: {axis: row[axis] for axis in axes}
               for uid, row in frame.drop_duplicates("universe_id").set_index("universe_id").iterrows()}
    verdicts, axes, origin = count_import_unparsed(verdicts, axes, policies, dict.fromkeys(options, (
        "continuous", 0.0, 1.0)))
    options = with_policy(options, origin, axes)
    rates = compute_rates(verdicts, axes=axes, factors=all_factors, ci=ci, estimator="mean", scale=scale)
    warnings = _figure_notes(runs, rates, axes, systems, set(frame[["task", "metric", "filter"]].itertuples(
        index=False, name=None)))
    figures = [{"file": str(r.path), "system": r.system, "lm_eval_version": r.version, "results": r.figures} for r in runs]
    transcripts = {key: record for run in runs for key, record in run.transcripts.items()}
    return write_judged_import("lm-eval", out_dir, verdicts=verdicts, criteria=None, rates=rates,
                               transcripts=transcripts, axes=axes, factors=all_factors, primary=primary,
                               warnings=warnings, input={"files": figures}, ci=ci, estimator="mean",
                               scale=scale.model_dump(), budget=budget, losses=losses, options=options, rate=rate,
                               unparsed=policies)


def _factor_names(factors: Sequence[str]) -> list[str]:
    """The document fields kept as factors (``task`` always is one); a reserved name is refused."""
    names = [f for f in factors if f != "task"]
    for factor in names:
        if factor in RESERVED_NAMES or factor in ("filter", "metric"):
            raise InputError(f"factors: {factor}: name is reserved for the verdicts table; expected another document "
                             "field", param="factors")
    return names


def _named(frame: pd.DataFrame, factors: list[str], merge: bool) -> dict[str, str]:
    """Models and factor levels: nothing unshowable, no two alike (or merged); the systems' names."""
    systems = checked_names(frame["system"], "model_name (the systems)", merge=merge)
    frame["system"] = frame["system"].map(systems)
    for factor in factors:
        levels = checked_names(frame[factor], f"doc.{factor}", merge=merge, param="factors")
        frame[factor] = frame[factor].map(levels)
    return systems


def _results_files(path: Path) -> list[Path]:
    """A results file as it is; a folder's results files (lm-eval writes them under a folder per model)."""
    if path.is_file():
        if not _RESULTS.fullmatch(path.name):
            raise InputError(f"{path}: expected an lm-eval results file (results_<time>.json) or its output folder")
        return [path]
    if not path.is_dir():
        raise InputError(f"{path}: file not found; expected an lm-eval results file or output folder")
    found = []
    for candidate in sorted(path.rglob("results_*.json")):
        if _RESULTS.fullmatch(candidate.name) and candidate.is_file():
            found.append(candidate)
            if len(found) > _MAX_RESULTS:
                raise InputError(f"{path}: more than {_MAX_RESULTS:,} results files; expected an lm-eval output folder")
    if not found:
        raise InputError(f"{path}: no results_<time>.json in the folder; expected lm-eval output (its output path)")
    return found


def _json(path: Path, data: bytes, where: str = "") -> Any:
    try:
        text = data.decode("utf-8")
        return text_only(json.loads(text), text)
    except (ValueError, RecursionError) as exc:
        detail = " ".join(str(exc).split())[:200]
        raise InputError(f"{path}: {where}cannot read as JSON: {detail}") from None


def _read_run(path: Path, factors: list[str], budget: ImportBudget, losses: ImportLosses) -> _Run:
    fail = lambda problem: InputError(f"{path}: {problem}", param="max_bytes")  # noqa: E731
    document = _json(path, budget.read_file(path, fail, what="lm-eval results file"))
    if not isinstance(document, Mapping) or not isinstance(document.get("results"), Mapping):
        raise InputError(f"{path}: results: expected an object of tasks (lm-eval's results file)")
    system = document.get("model_name")
    if not isinstance(system, str) or not system.strip():
        raise InputError(f"{path}: model_name: {_shown(system)}; expected the model's name")
    configs = document["configs"] if isinstance(document.get("configs"), Mapping) else {}
    time = _RESULTS.fullmatch(path.name)
    assert time is not None
    figures = {str(task): {k: v for k, v in values.items() if "," in str(k) and isinstance(v, (int, float))}
               for task, values in document["results"].items() if isinstance(values, Mapping)}
    run = _Run(path=path, system=system.strip(), version=str(document.get("lm_eval_version") or ""), figures=figures)
    for task in figures:
        samples = path.parent / f"samples_{task}_{time['time']}.jsonl"
        if not samples.is_file():
            raise InputError(f"{samples}: file not found; expected the samples of task {task} (lm-eval logs them with log_samples)")
        config: Mapping[str, Any] = configs[task] if isinstance(configs.get(task), Mapping) else {}
        _read_samples(samples, task, config, run, factors, budget, losses)
    return run


def _aggregations(config: Mapping[str, Any]) -> dict[str, str]:
    """Each metric's aggregation as the task config names it (a function's name, or ``mean``)."""
    listed: list[Any] = config["metric_list"] if isinstance(config.get("metric_list"), list) else []
    return {str(m.get("metric")): str(m.get("aggregation", "mean")) for m in listed if isinstance(m, Mapping)}


def _read_samples(path: Path, task: str, config: Mapping[str, Any], run: _Run, factors: list[str],
                  budget: ImportBudget, losses: ImportLosses) -> None:
    data = budget.read_file(path, lambda problem: InputError(f"{path}: {problem}", param="max_bytes"),
                            what="lm-eval samples file")
    lines = [line for line in data.split(b"\n") if line.strip()]
    budget.take_rows(len(lines), str(path))
    aggregations = _aggregations(config)
    skipped: dict[str, tuple[str, int]] = {}
    doc_fields: dict[str, int] = {}
    for number, line in enumerate(lines, start=1):
        sample = _json(path, line, f"line {number}: ")
        where = f"{path}: line {number}"
        if not isinstance(sample, Mapping):
            raise InputError(f"{where}: expected a JSON object (one sample)")
        doc_id, filter_name, metrics = sample.get("doc_id"), sample.get("filter"), sample.get("metrics")
        if isinstance(doc_id, bool) or not isinstance(doc_id, (int, str)) or str(doc_id).strip() == "":
            raise InputError(f"{where}: doc_id: {_shown(doc_id)}; expected the document's id")
        if not isinstance(filter_name, str) or not filter_name.strip():
            raise InputError(f"{where}: filter: {_shown(filter_name)}; expected the filter's name")
        if not isinstance(metrics, list) or not all(isinstance(m, str) for m in metrics):
            raise InputError(f"{where}: metrics: {_shown(metrics)}; expected a list of metric names")
        doc = sample["doc"] if isinstance(sample.get("doc"), Mapping) else {}
        doc_fields[str(doc_id)] = len([k for k in doc if k not in factors])
        levels = {}
        for factor in factors:
            value = doc.get(factor)
            if value is None or isinstance(value, (Mapping, list)) or str(value).strip() == "":
                raise InputError(f"{where}: doc.{factor}: {_shown(value)}; expected a level (text or a number) in "
                                 "every document", param="factors")
            levels[factor] = str(value).strip()
        case = f"{task}:{doc_id}"
        key = _transcript(run, case, sample)
        for metric in metrics:
            value = sample.get(metric)
            why = _unreadable(metric, value, aggregations.get(metric, "mean"))
            if why:
                first = skipped.get(f"{metric},{filter_name}", (why, 0))
                skipped[f"{metric},{filter_name}"] = (first[0], first[1] + 1)
                continue
            run.rows.append({"system": run.system, "case_id": case, "task": task, "filter": filter_name.strip(),
                             "metric": metric, "score": float(value or 0), "transcript_key": key, "_file": str(path),
                             **levels})
    for name, (why, count) in skipped.items():
        losses.drop(f"{task}: {name}", where=str(path), count=count, why=why)
    if sum(doc_fields.values()):
        losses.drop("doc fields not named as factors", where=str(path), count=sum(doc_fields.values()),
                    why="the document's own fields; --factor keeps one as a design factor")


def _unreadable(metric: str, value: Any, aggregation: str) -> str:
    """Why a metric's value cannot be a 0-1 score whose mean is lm-eval's figure (empty when it can)."""
    if aggregation != "mean":
        return f"aggregated by {aggregation}, not a mean of the samples' values: not reproducible from them"
    if isinstance(value, bool):
        return ""
    if not isinstance(value, (int, float)) or not math.isfinite(value):
        return f"a sample's value is {_shown(value)}, not a number"
    if not 0 <= value <= 1:
        return f"a sample's value is {value:g}, outside 0-1"
    return ""


def _transcript(run: _Run, case: str, sample: Mapping[str, Any]) -> str:
    """The transcript of a sample (the prompt, every answer, the filtered one); its key."""
    arguments = sample.get("arguments")
    prompt = ""
    if isinstance(arguments, Mapping) and arguments:
        first = next(iter(arguments.values()))
        if isinstance(first, Mapping) and "arg_0" in first:
            prompt = first["arg_0"] if isinstance(first["arg_0"], str) else json.dumps(first["arg_0"])
    answers: list[Any] = sample["resps"] if isinstance(sample.get("resps"), list) else []
    flat = [a for group in answers for a in (group if isinstance(group, list) else [group])]
    texts = [a if isinstance(a, str) else json.dumps(a) for a in flat]
    kept = sample.get("filtered_resps")
    kept_text = json.dumps(kept) if not isinstance(kept, str) else kept
    key = str(row_keys(pd.DataFrame({"s": [run.system], "c": [case], "a": [json.dumps(texts)]}), "transcript")[0])
    turns = [{"role": "user", "content": prompt}] + [{"role": "assistant", "content": t} for t in texts]
    turns.append({"role": "assistant", "content": f"(kept by the filter {sample.get('filter')}) {kept_text}"})
    run.transcripts.setdefault(key, {"system": run.system, "status": OK, "reason": "", "turns": turns})
    return key


def _figure_notes(runs: list[_Run], rates: pd.DataFrame, axes: list[str], systems: dict[str, str],
                  imported: set[tuple[str, str, str]]) -> list[str]:
    """Where an imported per-task rate or standard error is not lm-eval's own (metrics left out are listed apart)."""
    notes = []
    for run in runs:
        mine = rates[rates["system"] == systems[run.system]]
        for task, figures in run.figures.items():
            for name, value in figures.items():
                metric, _, filter_name = name.partition(",")
                if metric.endswith("_stderr") or (task, metric, filter_name) not in imported:
                    continue
                row = mine[mine["subgroup"] == f"task={task}"]
                for axis, option in (("filter", filter_name), ("metric", metric)):
                    if axis in axes:
                        row = row[row[axis] == option]
                if "unparsed" in axes and len(row):  # no row is unparsed: every policy's rate is the same
                    row = row[row["unparsed"] == row["unparsed"].iloc[0]]
                if len(row) != 1:
                    continue  # a metric the import left out (listed as dropped)
                stderr = figures.get(f"{metric}_stderr,{filter_name}")
                got = float(row["rate"].iloc[0]), float(row["se"].iloc[0])
                if not math.isclose(got[0], value, abs_tol=1e-9) or (
                        isinstance(stderr, (int, float)) and not math.isclose(got[1], stderr, abs_tol=1e-9)):
                    notes.append(f"{run.path}: {task} {name}: lm-eval reports {value:g} (stderr {stderr}), the "
                                 f"import {got[0]:g} (se {got[1]:g})")
    return notes


def _shown(value: Any) -> str:
    shown = repr(value)
    return shown if len(shown) <= 40 else shown[:37] + "..."

