"""Import ASSERT run directories (shared/formats/assert.md) as an import directory.

Each run is a universe; the system is the run's target. Runs that differ only in their
target share a universe (one universe, several systems).

Axes are the measurement choices that differ between the runs, read from config.yaml
(and from the score rows, which re-judging scripts annotate):

=================== ==================================================================
axis                source
=================== ==================================================================
judge               ``judge_model`` of the score rows, else ``pipeline.judge.model.name``
judge_temperature   ``judge_temperature`` of the rows, else ``pipeline.judge.model.temperature``
judge_n             ``judge_n`` of the rows, else ``pipeline.judge.n`` (absent = 1)
user                ``pipeline.inference.tester.model`` (the simulated user)
max_turns           ``pipeline.inference.max_turns``
checkpoint_turn     per row, when turn-checkpoint rows are present (``final`` otherwise)
run                 only when two runs would otherwise collide (same choices, same target)
scoring             only when several scoring rules are imported at once
=================== ==================================================================

or they are given explicitly as ``name=run_dir:option`` (then nothing is inferred).

Criteria come from the run's own taxonomy version (artifacts.json ->
artifacts.systematize.path), matched by category name: a node judgment becomes a
criteria row with ``applicable = relevant`` and ``compliant = not violated``. A judge
sampled n > 1 times (``multi_judge.verdicts``) gives one criteria sample per successful
verdict, numbered first, then ``multi_judge.n_failed`` failed samples. Transcript
verdicts follow our scoring rules (default ``all_applicable``). ``judge_failed`` rows
become judge_failed; ``scoring_skipped`` and ``filter_skipped`` become excluded, with
ASSERT's ``judge_error`` kept as the reason. A test-set case with no transcript in
inference_set.jsonl (ASSERT leaves errored cases out) becomes rollout_failed, and a
transcript with no score row becomes judge_failed.

case_id is ``<test-set version>@<input hash prefix>:<type>:<test_case_id>``, so cases
join across runs only when they come from the same test set. universe_id follows
the one rule, ``keys.universe_id({axis: option})`` (the scoring rule is an option when several are imported).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from multiverse.analysis import compute_rates, score_verdicts
from multiverse.core import OK, RESERVED_NAMES, SCORING_RULES, digest, universe_id
from multiverse.errors import InputError
from multiverse.importers._assert_runs import (
    AssertRun,
    option_name,
    read_run,
    run_targets,
)
from multiverse.importers._directory import (
    check_ci,
    resolve_primary,
    write_import_dir,
)
from multiverse.importers._guard import import_budget, one_name_each
from multiverse.importers._unparsed import check_unparsed, count_import_unparsed
from multiverse.results import Results

__all__ = ["INFERRED_AXES", "import_assert"]

INFERRED_AXES = ("judge", "judge_temperature", "judge_n", "user", "max_turns")
_SETTING = {"prompt": "single_turn", "scenario": "multi_turn"}
_SKIPPED = ("scoring_skipped", "filter_skipped")


def import_assert(
    run_dirs: str | os.PathLike[str] | Sequence[str | os.PathLike[str]], out_dir: str | os.PathLike[str],
    axes: Mapping[str, Mapping[str | os.PathLike[str], str]] | Iterable[str] | None = None,
    *,
    scoring: str | Sequence[str] = "all_applicable",
    primary: Mapping[str, str] | None = None,
    ci: str = "wilson",
    rate: str = "compliance",
    force: bool = False,
    max_bytes: int | None = None,
    max_rows: int | None = None,
    max_transcript_bytes: int | None = None, merge_look_alikes: bool = False, unparsed: str | Sequence[str] = "exclude",
) -> Results:
    """Import ASSERT run directories into ``out_dir``; see the module docstring.

    ``axes``: None to infer them, a mapping ``{axis: {run_dir: option}}``, or strings
    ``"name=run_dir:option"`` as given on the command line. ``scoring``: one scoring
    rule, or several (they become a ``scoring`` axis). ``primary`` ({axis: option})
    names the pre-registered universe (none when absent); ``ci`` the interval method of
    the rates; ``rate`` how its figures read them (the manifest's). ``out_dir`` is checked first: never
    one of the runs, nor inside one (see :func:`multiverse.tables._places.check_output_dir`; ``force``
    allows a folder holding other files). Returns the Results with verdicts, criteria and rates; bad input
    raises InputError and writes nothing. Bounds: ``max_bytes`` of run files, ``max_rows`` JSON lines.
    ``unparsed``: how a criterion left without a label counts (``scoring.unparsed``; several: an axis).
    """
    from multiverse.tables import check_output_dir

    if isinstance(run_dirs, (str, os.PathLike)):
        run_dirs = [run_dirs]
    if not run_dirs:
        raise InputError("run_dirs: expected at least one ASSERT run directory", param="run_dirs")
    check_ci(ci)
    policies = check_unparsed(unparsed)
    budget = import_budget(max_bytes, max_rows, max_transcript_bytes)
    check_output_dir(out_dir, kind="import", input_dirs=run_dirs, force=force)
    rules = [scoring] if isinstance(scoring, str) else list(scoring)
    for rule in rules:
        if rule not in SCORING_RULES:
            raise InputError(f"scoring: unknown rule {rule!r}; expected one of: {', '.join(SCORING_RULES)}", param="scoring")
    warnings: list[str] = []
    runs = [read_run(Path(path), warnings, budget) for path in run_dirs]
    _check_distinct(runs)

    run_options, axis_names = _run_axes(runs, axes)
    _separate_collisions(runs, run_options, axis_names, explicit=axes is not None, warnings=warnings)
    transcripts, criteria, samples, factors = _transcripts(runs, run_options, warnings)
    if any(record["_checkpoint_seen"] for record in transcripts):
        # Turn-checkpoint rows judge one transcript at several turns: each turn is an option.
        axis_names.append("checkpoint_turn")
        for record in transcripts:
            record["_options"].setdefault("checkpoint_turn", "final")
    if len(rules) > 1:
        axis_names.append("scoring")
    if "setting" in axis_names:
        # An explicit setting axis replaces the setting factor derived from the case type.
        factors.remove("setting")
    _check_names(axis_names, factors, runs)
    _warn_test_sets(runs, transcripts, warnings)

    verdicts, criteria = _score(transcripts, criteria, samples, rules, axis_names, factors)
    verdicts, criteria = one_name_each(verdicts, criteria, axis_names, factors, merge=bool(merge_look_alikes))
    verdicts, axis_names, _ = count_import_unparsed(verdicts, axis_names, policies, _binary_scales(verdicts))
    rates = compute_rates(verdicts, axes=axis_names, factors=factors, ci=ci)
    universes = verdicts.drop_duplicates("universe_id")
    options = {row["universe_id"]: {axis: row[axis] for axis in axis_names} for _, row in universes.iterrows()}
    manifest = {
        "source": "assert",
        "axes": axis_names,
        "factors": factors,
        "universes": list(options),
        "primary": resolve_primary(primary, axis_names, options),
        "primary_declared": bool(primary),
        "warnings": warnings,
        "universe_options": options,
        "runs": [
            {"path": str(run.path), "name": run.name, "test_set": run.test_set,
             "taxonomy": str(run.taxonomy_file), "options": run_options[i], "targets": run.targets}
            for i, run in enumerate(runs)
        ],
        "scoring": rules[0] if len(rules) == 1 else rules,
        "estimator": "pooled",
        "ci": ci,
        "level": 0.95,
    }
    return write_import_dir(out_dir, verdicts=verdicts, criteria=criteria, rates=rates, manifest=manifest, rate=rate,
                            unparsed=policies)


def _binary_scales(verdicts: pd.DataFrame) -> dict[str, tuple[str, float, float]]:
    return dict.fromkeys(verdicts["universe_id"].astype(str).unique(), ("binary", 0.0, 1.0))


def _check_distinct(runs: list[AssertRun]) -> None:
    seen: dict[Path, Path] = {}
    for run in runs:
        resolved = run.path.resolve()
        if resolved in seen:
            raise InputError(f"{run.path}: run directory given twice", param="run_dirs")
        seen[resolved] = run.path


# --------------------------------------------------------------------------- axes


def _run_axes(runs: list[AssertRun], axes: Any) -> tuple[list[dict[str, str]], list[str]]:
    """Per-run options and the axis names, explicit or inferred."""
    if axes is None:
        names = [axis for axis in INFERRED_AXES if len({run.choices[axis] for run in runs}) > 1]
        return [{axis: run.choices[axis] for axis in names} for run in runs], names
    explicit = _parse_axes(axes)
    by_path = {run.path.resolve(): i for i, run in enumerate(runs)}
    options: list[dict[str, str]] = [{} for _ in runs]
    for axis, assignments in explicit.items():
        for run_dir, option in assignments.items():
            index = by_path.get(Path(run_dir).resolve())
            if index is None:
                raise InputError(f"axis {axis}: {run_dir}: not one of the imported run directories", param="axes")
            if axis in options[index]:
                raise InputError(f"axis {axis}: {run_dir}: given two options", param="axes")
            options[index][axis] = option
        for index, run in enumerate(runs):
            if axis not in options[index]:
                raise InputError(
                    f"axis {axis}: {run.path}: no option; expected name=run_dir:option for every run", param="axes"
                )
    return options, list(explicit)


def _parse_axes(axes: Any) -> dict[str, dict[str, str]]:
    if isinstance(axes, Mapping):
        return {str(axis): {str(k): str(v) for k, v in assignments.items()} for axis, assignments in axes.items()}
    parsed: dict[str, dict[str, str]] = {}
    for spec in axes:
        name, _, rest = str(spec).partition("=")
        run_dir, _, option = rest.rpartition(":")
        if not name.strip() or not run_dir or not option.strip():
            raise InputError(f"axis {spec}: expected name=run_dir:option", param="axes")
        parsed.setdefault(name.strip(), {})
        if run_dir in parsed[name.strip()]:
            raise InputError(f"axis {name.strip()}: {run_dir}: given two options", param="axes")
        parsed[name.strip()][run_dir] = option.strip()
    return parsed


def _separate_collisions(runs: list[AssertRun], run_options: list[dict[str, str]], axis_names: list[str], *, explicit: bool, warnings: list[str]) -> None:
    """Two runs with the same options and a common target would give one system two verdicts."""
    for run in runs:
        run.targets = run_targets(run)
    seen: dict[tuple[Any, ...], AssertRun] = {}
    for run, options in zip(runs, run_options):
        for target in run.targets:
            key = (tuple(sorted(options.items())), target)
            if key in seen:
                other = seen[key]
                if explicit:
                    raise InputError(
                        f"axes: {other.path} and {run.path} have the same options and target {target!r}; "
                        "expected an axis that tells them apart", param="axes"
                    )
                axis_names.append("run")
                for each, each_options in zip(runs, run_options):
                    each_options["run"] = each.name
                warnings.append(
                    f"runs {other.name} and {run.name} make the same measurement choices for target {target!r}; "
                    "added axis 'run' to tell them apart"
                )
                return
            seen[key] = run


def _check_names(axis_names: list[str], factors: list[str], runs: list[AssertRun]) -> None:
    for name in axis_names:
        if axis_names.count(name) > 1:
            raise InputError(f"axis {name}: axis named twice (scoring is an axis when several rules are imported)", param="axes")
        if name in RESERVED_NAMES:
            raise InputError(f"axis {name}: axis name is reserved for the verdicts table; choose another", param="axes")
        if name in factors:
            raise InputError(f"axis {name}: axis name is also a design factor of the test set; choose another", param="axes")
    for name in factors:
        if name in RESERVED_NAMES:
            raise InputError(f"{runs[0].path}: dimensions.{name}: design factor name is reserved for the verdicts table")


# --------------------------------------------------------------------------- rows


def _transcripts(runs: list[AssertRun], run_options: list[dict[str, str]], warnings: list[str]) -> Any:
    """Transcript rows, criteria rows and judge-sample rows of every run."""
    transcripts: list[dict[str, Any]] = []
    criteria: list[tuple[Any, ...]] = []
    samples: list[tuple[Any, ...]] = []
    factors: dict[str, None] = {}
    inference: dict[str, Any] | None  # a rolled-out case's, or None for a score row without one
    for run, options in zip(runs, run_options):
        scores_file = run.path / "scores.jsonl"
        latest: dict[tuple[Any, ...], tuple[int, dict[str, Any]]] = {}
        for line, row in run.scores:
            key = (row["type"], row["test_case_id"], str(row.get("target") or ""), row.get("checkpoint_turn"))
            if key in latest:
                warnings.append(
                    f"{scores_file}: line {line}: {row['type']} {row['test_case_id']} judged again; "
                    "the later row is used"
                )
            latest[key] = (line, row)
        by_case: dict[tuple[str, str], list[tuple[str, dict[str, Any]]]] = {}
        for (case_type, case_no, target), inference in run.inference.items():
            by_case.setdefault((case_type, case_no), []).append((target, inference))
        judged = set()
        for line, row in latest.values():
            case_type, case_no, checkpoint = row["type"], row["test_case_id"], row.get("checkpoint_turn")
            target = str(row.get("target") or "")
            rolled_out = by_case.get((case_type, case_no), [])
            # A score row without a target takes its transcript's (or the run's only) target.
            system = target or next((t for t, _ in rolled_out if t), "") or run.targets[0]
            judged.add((case_type, case_no, system))
            inference = run.inference.get((case_type, case_no, target))
            if inference is None and len(rolled_out) == 1:
                inference = rolled_out[0][1]
            record = _transcript(run, options, case_type, case_no, system, inference, row, factors)
            if checkpoint is not None:
                record["_options"]["checkpoint_turn"] = option_name(checkpoint)
                record["_checkpoint_seen"] = True
            record["judgment_key"] = digest(
                {"transcript": record["transcript_key"], "run": run.name, "judge": run.choices,
                 "judge_config": _hash_file(run.path / ".judge_config_hash"), "checkpoint": checkpoint}
            )
            _judgment(run, scores_file, line, row, record["judgment_key"], criteria, samples)
            transcripts.append(record)
        # Transcripts that were never judged, and cases that never got a transcript.
        for (case_type, case_no, target), inference in run.inference.items():
            system = target or run.targets[0]
            if (case_type, case_no, system) in judged:
                continue
            judged.add((case_type, case_no, system))
            record = _transcript(run, options, case_type, case_no, system, inference, None, factors)
            record["judgment_key"] = digest({"transcript": record["transcript_key"], "run": run.name, "missing": True})
            samples.append((record["judgment_key"], 0, "judge_failed", "no judgment in scores.jsonl"))
            transcripts.append(record)
        if run.cases is not None and run.inference:
            for case_type, case_no in run.cases:
                for system in run.targets:
                    if (case_type, case_no, system) in judged:
                        continue
                    record = _transcript(run, options, case_type, case_no, system, None, None, factors)
                    record["judgment_key"] = ""
                    record["_status"] = ("rollout_failed", "no transcript in inference_set.jsonl (the rollout errored)")
                    transcripts.append(record)
    return transcripts, criteria, samples, list(factors)


def _hash_file(file: Path) -> str | None:
    from multiverse.tables import read_folder_bytes

    if not file.is_file():
        return None
    data = read_folder_bytes(file.parent, file.name)  # inside the run, regular, under its cap
    return None if data is None else data[:4096].decode("utf-8", "replace").strip()


def _transcript(run: AssertRun, options: dict[str, str], case_type: str, case_no: Any, system: str, inference: Any, score: Any, factors: Any) -> dict[str, Any]:
    case_id = f"{run.test_set}:{case_type}:{case_no}"
    dimensions = _dimensions(run, case_type, case_no, inference, score)
    record = {
        "_run": run.name,
        "_options": dict(options),
        "_checkpoint_seen": False,
        "system": system,
        "case_id": case_id,
        "setting": _SETTING.get(case_type, case_type),
        "_factors": dimensions,
    }
    for name in dimensions:
        factors.setdefault(name, None)
    factors.setdefault("setting", None)
    events = inference.get("events") if inference else None
    # Same case, system and conversation = same transcript, whichever run judged it.
    record["transcript_key"] = digest(
        {"source": "assert", "case_id": case_id, "system": system,
         "conversation": digest(events) if events is not None else run.name}
    )
    return record


def _dimensions(run: AssertRun, case_type: str, case_no: Any, inference: Any, score: Any) -> dict[str, str]:
    """Design-factor levels of a case: the run's test set, else its own rows."""
    sources = []
    if run.cases is not None and (case_type, case_no) in run.cases:
        sources.append(run.cases[(case_type, case_no)].get("dimensions"))
    if inference:
        sources.append(inference.get("dimensions"))
    if score:
        sources.append(score.get("dimensions"))
    for dimensions in sources:
        if isinstance(dimensions, dict):
            # Score rows may hold judge dimensions (booleans) here: keep only levels.
            levels = {str(k): str(v) for k, v in dimensions.items() if isinstance(v, (str, int)) and not isinstance(v, bool)}
            if levels:
                return levels
    return {}


def _judgment(run: AssertRun, scores_file: Any, line: int, row: Any, judgment_key: str, criteria: list[Any], samples: list[Any]) -> None:
    """Criteria rows and judge-sample rows of one score row."""
    status = row["judge_status"]
    error = str(row.get("judge_error") or "")
    if status in _SKIPPED:
        samples.append((judgment_key, 0, "excluded", f"{status}: {error}" if error else status))
        return
    if status != OK:
        reason = error or ("judge_failed" if status == "judge_failed" else f"judge_status {status}")
        samples.append((judgment_key, 0, "judge_failed", reason))
        return
    multi = row.get("multi_judge")
    if isinstance(multi, dict) and isinstance(multi.get("verdicts"), list) and multi["verdicts"]:
        verdicts = multi["verdicts"]
        failed = int(multi.get("n_failed") or 0)
    else:
        verdicts, failed = [row.get("verdict")], 0
    for sample, verdict in enumerate(verdicts):
        nodes = verdict.get("node_judgments") if isinstance(verdict, dict) else None
        if not isinstance(nodes, list):
            samples.append((judgment_key, sample, "judge_failed", "verdict without node_judgments"))
            continue
        samples.append((judgment_key, sample, OK, ""))
        for index, node in enumerate(nodes):
            criteria.append(_criterion(run, scores_file, line, judgment_key, sample, index, node))
    for extra in range(failed):
        samples.append((judgment_key, len(verdicts) + extra, "judge_failed", "judge sample failed (multi_judge.n_failed)"))


def _criterion(run: AssertRun, scores_file: Any, line: int, judgment_key: str, sample: Any, index: int, node: Any) -> tuple[Any, ...]:
    where = f"{scores_file}: line {line}: verdict.node_judgments[{index}]"
    if not isinstance(node, dict):
        raise InputError(f"{where}: expected an object")
    name = node.get("node_name")
    if not isinstance(name, str) or not name:
        raise InputError(f"{where}.node_name: expected a category name")
    permissible = run.permissible(name)
    if permissible is None:
        raise InputError(
            f"{where}.node_name: {name!r} is not a category of the run's taxonomy {run.taxonomy_file}"
        )
    violated = node.get("violated")
    relevant = node.get("relevant")
    if relevant is None:
        relevant = violated is not None
    compliant = pd.NA if (not relevant or violated is None) else not bool(violated)
    return (judgment_key, sample, name, permissible, bool(relevant), compliant, str(node.get("reasoning") or ""))


# --------------------------------------------------------------------------- tables


def _warn_test_sets(runs: list[AssertRun], transcripts: list[dict[str, Any]], warnings: list[str]) -> None:
    by_set: dict[str, list[str]] = {}
    for run in runs:
        by_set.setdefault(run.test_set, []).append(run.name)
    if len(by_set) <= 1:
        return
    cases_per_run: dict[str, set[str]] = {}
    for record in transcripts:
        cases_per_run.setdefault(record["_run"], set()).add(record["case_id"])
    common = set.intersection(*cases_per_run.values()) if cases_per_run else set()
    listed = "; ".join(f"{label}: {', '.join(names)}" for label, names in by_set.items())
    warnings.append(
        f"runs used different test sets ({listed}); cases join on test-set version, type and test_case_id, "
        f"so only runs that share a test set are paired ({len(common)} cases are common to all runs)"
    )


def _score(transcripts: list[dict[str, Any]], criteria_rows: list[Any], sample_rows: list[Any], rules: Any, axis_names: list[str], factors: Any) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(verdicts, criteria) tables: every transcript scored under every rule."""
    criteria = pd.DataFrame(
        criteria_rows,
        columns=["judgment_key", "sample", "criterion", "permissible", "applicable", "compliant", "rationale"],
    )
    criteria["compliant"] = criteria["compliant"].astype("boolean")
    criteria["sample"] = criteria["sample"].astype(np.int64)
    samples = pd.DataFrame(sample_rows, columns=["judgment_key", "sample", "status", "reason"])

    frames = []
    for rule in rules:
        scored = score_verdicts(criteria, samples, rule).set_index("judgment_key")
        rows = []
        for record in transcripts:
            options = dict(record["_options"])
            if len(rules) > 1:
                options["scoring"] = rule
            universe = {axis: options[axis] for axis in axis_names}
            row = {"universe_id": universe_id(universe), **universe}
            row["system"] = record["system"]
            row["case_id"] = record["case_id"]
            for factor in factors:
                row[factor] = record["setting"] if factor == "setting" else record["_factors"].get(factor, "")
            row["replicate"] = 0
            row["transcript_key"] = record["transcript_key"]
            row["judgment_key"] = record["judgment_key"]
            if "_status" in record:
                status, reason = record["_status"]
                row["status"], row["reason"], row["compliant"] = status, reason, pd.NA
            else:
                verdict = scored.loc[record["judgment_key"]]
                row["status"], row["reason"], row["compliant"] = verdict["status"], verdict["reason"], verdict["compliant"]
            rows.append(row)
        frames.append(pd.DataFrame(rows))
    verdicts = pd.concat(frames, ignore_index=True)
    verdicts["compliant"] = verdicts["compliant"].astype("boolean")
    verdicts["replicate"] = verdicts["replicate"].astype(np.int64)
    # Universes in the order of the runs, then systems and cases sorted.
    universe_rank = pd.factorize(verdicts["universe_id"])[0]
    order = np.lexsort((verdicts["case_id"].to_numpy(), verdicts["system"].to_numpy(), universe_rank))
    verdicts = verdicts.iloc[order].reset_index(drop=True)
    return verdicts, criteria
