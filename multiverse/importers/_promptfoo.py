"""Import promptfoo result files (``promptfoo eval -o results.json``) as an import directory.

================================================ ==========================================================
promptfoo                                        multiverse
================================================ ==========================================================
provider (label, else id) x prompt (label)       ``verdicts.system`` (the prompt named only when there are several)
the test (``description``, else ``test N``)      ``case_id``
``success`` of the result                        ``compliant`` (the result passes when every assertion does)
each assertion of ``gradingResult.componentResults`` a criteria row: ``pass`` the label, ``score`` the score,
                                                 ``reason`` the rationale (criterion: ``metric``, else type and value)
the grader of model-graded assertions: the       the ``judge`` axis (when the files' graders differ)
assertion's ``provider``, the test's
``options.provider``, or the config's
``defaultTest.options.provider``
``response.output`` (and the prompt)             ``transcripts.jsonl`` (the explorer shows it)
``vars[NAME]``                                   a design factor with ``factors=[NAME]``
an error (``failureReason`` 2)                   ``status`` rollout_failed (the provider) or judge_failed (the
                                                 grader), counted, never a label
================================================ ==========================================================

The rate of a file's rows is promptfoo's own pass rate, ``stats.successes / (successes +
failures)``: errors are left out of both. A result file's own counts are kept in the
manifest, and a file whose rows do not add up to its stats is said in a warning.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from multiverse.core import CRITERIA_COLUMNS, OK, RESERVED_NAMES, universe_id
from multiverse.errors import InputError
from multiverse.importers._columns import import_rates, row_keys, write_judged_import
from multiverse.importers._directory import check_ci
from multiverse.importers._guard import checked_names, import_budget
from multiverse.importers._promptfoo_file import PromptfooFile, read_promptfoo_file
from multiverse.results import Results

__all__ = ["import_promptfoo"]


def import_promptfoo(
    results_files: str | os.PathLike | Sequence[str | os.PathLike],
    out_dir: str | os.PathLike,
    *,
    factors: Sequence[str] = (),
    primary: Mapping[str, str] | None = None,
    ci: str = "wilson",
    force: bool = False,
    max_bytes: int | None = None,
    max_rows: int | None = None,
    max_transcript_bytes: int | None = None,
    merge_look_alikes: bool = False,
) -> Results:
    """Import promptfoo result files into ``out_dir``; see the module docstring.

    ``factors`` names test variables kept as design factors. Bad input raises
    InputError naming the file and field, and writes nothing. Bounds
    (:class:`multiverse.core.ImportBudget`): ``max_bytes`` of result files,
    ``max_rows`` results, ``max_transcript_bytes`` per prompt and output.
    Systems, graders or levels that look alike are refused unless
    ``merge_look_alikes`` reads them as one.
    """
    from multiverse.tables import check_output_dir

    paths = [Path(p) for p in ([results_files] if isinstance(results_files, (str, os.PathLike)) else results_files)]
    if not paths:
        raise InputError("results_files: expected at least one promptfoo result file", param="results_files")
    check_ci(ci)
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
    rates = import_rates(verdicts, axes=axes, factors=factors, ci=ci, scale={"type": "binary"}, source=str(paths[0]))
    return write_judged_import("promptfoo", out_dir, verdicts=verdicts, criteria=criteria, rates=rates,
                               transcripts=transcripts, axes=axes, factors=factors, primary=primary, warnings=warnings,
                               input={"files": [{"file": str(f.path), "version": f.version, "successes": f.successes,
                                                 "failures": f.failures, "errors": f.errors} for f in read]},
                               ci=ci, estimator="pooled", budget=budget)


def _one_name_each(read: list[PromptfooFile], factors: list[str], merge: bool) -> None:
    """Systems, graders and factor levels: nothing unshowable, no two alike (or merged when asked)."""
    rows = [row for file in read for row in file.rows]
    systems = checked_names([row.system for row in rows], "results.results.provider (the systems)", merge=merge)
    judges = checked_names([row.judge for row in rows], "the graders", merge=merge)
    levels = {factor: checked_names([row.factors[factor] for row in rows], f"results.results.vars.{factor}",
                                    merge=merge, param="factors") for factor in factors}
    for row in rows:
        row.system, row.judge = systems[row.system], judges[row.judge]
        row.factors = {factor: levels[factor][level] for factor, level in row.factors.items()}


def _verdicts(read: list[PromptfooFile], axes: list[str], factors: list[str]
              ) -> tuple[pd.DataFrame, dict[str, dict[str, Any]]]:
    records: list[dict[str, Any]] = []
    for number, file in enumerate(read):
        for row in file.rows:
            records.append({"universe_id": universe_id({"judge": row.judge} if axes else {}), "judge": row.judge,
                            **row.factors, "system": row.system, "case_id": row.case_id, "replicate": row.replicate,
                            "status": row.status, "reason": row.reason, "compliant": row.compliant,
                            "_output": row.output, "_prompt": row.prompt, "_file": number})
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
    frame["score"] = np.nan  # the result's pass is the label; assertion scores sit in the criteria
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
                             "grader": assertion["grader"]})
            position += 1
    frame = pd.DataFrame.from_records(rows, columns=[*CRITERIA_COLUMNS, "score", "grader"])
    for column in ("permissible", "applicable", "compliant"):
        frame[column] = frame[column].astype("boolean")
    frame["sample"] = frame["sample"].astype("int64")
    frame["score"] = frame["score"].astype("float64")
    return frame


def _count_notes(read: list[PromptfooFile]) -> list[str]:
    notes = []
    for file in read:
        passed = sum(row.compliant is True for row in file.rows)
        failed = sum(row.compliant is False for row in file.rows)
        errors = sum(row.status != OK for row in file.rows)
        if (passed, failed) != (file.successes, file.failures):
            notes.append(f"{file.path}: the results hold {passed} passes and {failed} failures, its stats say "
                         f"{file.successes} and {file.failures}")
        if errors:
            notes.append(f"{file.path}: {errors} results ended in an error and are counted as failures of the "
                         "provider or grader, not as labels")
    return notes
