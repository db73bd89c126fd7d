"""One Inspect AI log as verdict rows: read with Inspect's own log API, every field checked.

A log is untrusted input: it is read with ``inspect_ai.log.read_eval_log`` (so every
version Inspect reads is read alike), and whatever it holds is then checked here; a
field of the wrong kind is one line naming the log, the field and what was expected.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from multiverse.core import ImportBudget, regular_file_problem, whole_number_problem
from multiverse.errors import InputError
from multiverse.importers._guard import MAX_REPLICATE, import_budget
from multiverse.importers._inspect_fields import Cell
from multiverse.importers._inspect_fields import field_text as _text
from multiverse.importers._inspect_fields import role_model as _role_model
from multiverse.importers._inspect_fields import shown_value as _shown
from multiverse.importers._inspect_fields import text_cut as _cut
from multiverse.importers._losses import loss_reason

__all__ = ["LOG_VERSIONS", "Cell", "InspectLog", "LogRow", "read_inspect_log"]

#: The log format versions (``version`` of the header) this importer knows: Inspect writes 2 and
#: reads 1 alike; a later one may move the fields read here.
LOG_VERSIONS = (1, 2)
#: Sample ids and names longer than this are not ids a reader is shown.
_MAX_ID = 1_000
_SCALAR = (str, int, float, bool)


@dataclass
class LogRow:
    """One sample x epoch of a log: each scorer's cell and what the system was given."""

    case_id: str
    replicate: int
    output_digest: str
    factors: dict[str, str]
    turns: list[dict[str, Any]]
    cells: dict[str, Cell] = field(default_factory=dict)


@dataclass
class InspectLog:
    """What the import needs of one log."""

    path: Path
    task: str
    system: str
    version: str
    status: str
    scorers: list[str]  # NAME, or NAME:KEY for each key of a scorer whose values are objects
    judges: dict[str, tuple[str | None, str]]  # scorer -> (its grader's model, None: it calls none; where found)
    reducers: list[str]
    metrics: dict[tuple[str, str], dict[str, float]]  # (scorer, reducer) -> Inspect's own metrics
    rows: list[LogRow] = field(default_factory=list)
    dropped: dict[str, tuple[int, str]] = field(default_factory=dict)  # what the log holds, not imported: (n, why)


def read_inspect_log(path: Path, *, scorers: Sequence[str] | None, system_role: str | None, judge_role: str,
                     factors: Sequence[str], budget: ImportBudget | None = None) -> InspectLog:
    """Read ``path`` (.eval or .json) with Inspect's API and turn its samples into rows, within ``budget``."""
    from multiverse.importers._inspect_scores import check_reducers, log_metrics, scorer_judges, scorer_options

    budget = budget or import_budget()
    log = _read(path, budget)
    spec = log.eval
    system = _role_model(path, spec, system_role, "system") if system_role else _text(path, "eval.model", spec.model)
    options = scorer_options(path, log, scorers)
    judges = scorer_judges(path, log, options, judge_role)
    reducers = check_reducers(path, log)
    if not log.samples:
        raise InputError(f"{path}: samples: expected at least one sample (a log written with samples, not a header only)")
    budget.take_rows(len(log.samples), str(path))
    rows = []
    dropped: dict[str, list[Any]] = {}
    for i in range(len(log.samples)):
        rows.append(_row(path, i, log.samples[i], options, factors, budget))
        _count_dropped(log.samples[i], options, factors, dropped)
        log.samples[i] = None  # each sample is let go once it is a row: the log and its rows are never both held
    rows += _never_run(log, rows, options, factors)
    return InspectLog(path=path, task=str(spec.task), system=system, version=str((spec.packages or {}).get(
        "inspect_ai", "")), status=str(log.status), scorers=options, judges=judges, reducers=reducers,
        metrics=log_metrics(log, options), rows=rows, dropped={k: (n, why) for k, (n, why) in dropped.items()})


def _count_dropped(sample: Any, options: list[str], factors: Sequence[str], dropped: dict[str, list[Any]]) -> None:
    """Count what the sample holds that no column carries: its other metadata, scorers, score notes and edits."""
    def count(what: str, why: str) -> None:
        dropped.setdefault(what, [0, why])[0] += 1

    for key in (sample.metadata or {}) if isinstance(sample.metadata, Mapping) else ():
        if key not in factors:
            count(f"samples.metadata.{key}", "not a --factor")
    kept = {o.split(":", 1)[0] for o in options}
    for name, score in (sample.scores or {}).items():
        if name not in kept:
            count(f"samples.scores.{name}", "not among the --scorer asked for")
            continue
        for key in (getattr(score, "metadata", None) or {}):
            if key != "grading":  # the grading names the judge, which is kept
                count(f"samples.scores.{name}.metadata.{key}", "a scorer's notes, no measurement column")
        if getattr(score, "history", None):
            count(f"samples.scores.{name}.history", "the score was edited: the current value is imported, not its "
                  "earlier ones")


def _never_run(log: Any, rows: list[LogRow], options: list[str], factors: Sequence[str]) -> list[LogRow]:
    """A failed or cancelled eval's samples x epochs that never started: rows ``not_run``, never a label."""
    if log.status == "success" or log.eval.dataset is None or not log.eval.dataset.sample_ids:
        return []
    epochs = int(log.eval.config.epochs or 1)
    seen = {(row.case_id, row.replicate) for row in rows}
    levels = {row.case_id: row.factors for row in rows}
    status, reason = loss_reason("not_run", f"the eval ended ({log.status}) before it started")
    missing = []
    for sample_id in log.eval.dataset.sample_ids:
        for epoch in range(1, epochs + 1):
            if (str(sample_id).strip(), epoch) not in seen:
                cells = {name: Cell(status, reason, None, "") for name in options}
                case_id = str(sample_id).strip()
                known = levels.get(case_id) or {f: "(not run)" for f in factors}  # its metadata was never logged
                missing.append(LogRow(case_id, epoch, "", dict(known), [], cells))
    return missing


def _read(path: Path, budget: ImportBudget) -> Any:
    try:
        from inspect_ai.log import read_eval_log
    except ImportError as exc:
        raise InputError(f"{path}: reading Inspect logs needs Inspect AI (install multiverse[inspect])") from exc
    if path.suffix.lower() not in (".eval", ".json"):
        raise InputError(f"{path}: expected an Inspect log (.eval or .json)")
    problem = regular_file_problem(path)
    if problem:
        raise InputError(f"{path}: {problem}")

    def fail(message: str) -> InputError:
        return InputError(f"{path}: {message}")

    # The bytes Inspect will parse are counted before it parses them: a .json log's own size, a .eval's
    # members inflated (declared, then counted as they inflate), against the import's `max_bytes`.
    size = path.stat().st_size
    if size > budget.bytes_left:
        budget.take_bytes(size, str(path))
    if path.suffix.lower() == ".eval":
        budget.check_zip(path, lambda message: fail(f"cannot read as an Inspect log: {message}"))
    else:
        budget.take_bytes(size, str(path))
    _check_version(path, _declared_version(path))
    try:
        log = read_eval_log(str(path), resolve_attachments=True)
    except Exception as exc:  # a truncated zip, bad JSON, a field of the wrong type: Inspect's own reader says which
        detail = " ".join(str(exc).split())[:240]
        raise InputError(f"{path}: cannot read as an Inspect log: {type(exc).__name__}: {detail}") from None
    _check_version(path, log.version)
    return log


def _declared_version(path: Path) -> Any:
    """The ``version`` a log declares, read before Inspect reads (and upgrades) it; None when not found."""
    import re
    import zipfile

    try:
        if path.suffix.lower() == ".eval":
            with zipfile.ZipFile(path) as archive:
                names = set(archive.namelist())
                name = "header.json" if "header.json" in names else "_journal/start.json"
                if name not in names or archive.getinfo(name).file_size > 64 * 2**20:
                    return None
                return json.loads(archive.read(name)).get("version")
        with path.open("rb") as handle:  # Inspect writes the version first
            found = re.match(rb'\s*\{\s*"version"\s*:\s*(-?[0-9]{1,12})\s*[,}]', handle.read(4096))
        return int(found.group(1)) if found else None
    except (OSError, ValueError, AttributeError, zipfile.BadZipFile, RecursionError):
        return None  # Inspect's own reader then says what is wrong with the file


def _check_version(path: Path, version: Any) -> None:
    if version is not None and (isinstance(version, bool) or version not in LOG_VERSIONS):
        raise InputError(f"{path}: version: {_shown(version)}; expected an Inspect log format version this import "
                         f"knows ({', '.join(map(str, LOG_VERSIONS))})")


def _row(path: Path, index: int, sample: Any, options: list[str], factors: Sequence[str],
         budget: ImportBudget) -> LogRow:
    from multiverse.importers._inspect_scores import cell

    where = f"samples[{index}]"
    if isinstance(sample.id, int) and not isinstance(sample.id, bool):
        problem = whole_number_problem(sample.id, -(2**63), 2**63 - 1)
        if problem:
            raise InputError(f"{path}: {where}.id: {problem}")
    if not isinstance(sample.id, (str, int)) or str(sample.id).strip() == "" or len(str(sample.id)) > _MAX_ID:
        raise InputError(f"{path}: {where}.id: {_shown(sample.id)}; expected a sample id (text or a number, "
                         f"at most {_MAX_ID:,} characters)")
    epoch = sample.epoch
    problem = whole_number_problem(epoch, 0, MAX_REPLICATE)
    if problem:
        raise InputError(f"{path}: {where}.epoch: {problem}")
    turns = _turns(path, where, sample.messages or [], budget)
    completion = sample.output.completion if sample.output is not None else ""
    digest = hashlib.sha256(str(completion).encode("utf-8", "surrogatepass")).hexdigest()[:16]
    row = LogRow(case_id=str(sample.id).strip(), replicate=epoch, output_digest=digest,
                 factors=_factors(path, where, sample.metadata, factors), turns=turns)
    for name in options:
        row.cells[name] = cell(path, where, sample, name)
    return row


def _factors(path: Path, where: str, metadata: Any, factors: Sequence[str]) -> dict[str, str]:
    levels = {}
    for factor in factors:
        value = (metadata or {}).get(factor) if isinstance(metadata, Mapping) else None
        if value is None or not isinstance(value, _SCALAR) or str(value).strip() == "":
            raise InputError(f"{path}: {where}.metadata.{factor}: {_shown(value)}; expected a level (text or a number) "
                             "in every sample's metadata", param="factors")
        levels[factor] = str(value).strip()
    return levels


def _turns(path: Path, where: str, messages: Sequence[Any], budget: ImportBudget) -> list[dict[str, Any]]:
    """The sample's messages as turns, their size counted as they are built.

    An attachment is resolved into every message that refers to it, so a
    small log can stand for a huge transcript: the sample's turns are refused
    past ``max_transcript_bytes`` before the next one is built, and all
    samples' past ``max_bytes``.
    """
    turns, size = [], 0
    for message in messages:
        turn = _turn(message)
        size += sum(len(str(value)) for value in turn.values()) + 64
        budget.check_transcript(size, f"{path}: {where}.messages")
        turns.append(turn)
    budget.take_transcript(size, f"{path}: {where}.messages")
    return turns


def _turn(message: Any) -> dict[str, Any]:
    turn: dict[str, Any] = {"role": str(getattr(message, "role", "?")), "content": _cut(message.text, 200_000)}
    calls = getattr(message, "tool_calls", None) or []
    if calls:
        turn["tool_calls"] = [{"name": str(c.function), "arguments": json.dumps(c.arguments, default=str)[:20_000]}
                              for c in calls]
    return turn
