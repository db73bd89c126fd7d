"""One Inspect AI log as verdict rows: read with Inspect's own log API, every field checked.

A log is untrusted input: it is read with ``inspect_ai.log.read_eval_log`` (so every
version Inspect reads is read alike), and whatever it holds is then checked here; a
field of the wrong kind is one line naming the log, the field and what was expected.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from multiverse.core import OK, ImportBudget, regular_file_problem, whole_number_problem
from multiverse.errors import InputError
from multiverse.importers._guard import MAX_REPLICATE, import_budget

__all__ = ["LOG_VERSIONS", "InspectLog", "LogRow", "read_inspect_log"]

#: The log format versions (``version`` of the header) this importer knows: Inspect writes 2 and
#: reads 1 alike; a later one may move the fields read here.
LOG_VERSIONS = (1, 2)
#: Sample ids and names longer than this are not ids a reader is shown.
_MAX_ID = 1_000
#: Inspect's value letters: correct, incorrect, partial, no answer.
_LETTERS = {"C": 1.0, "I": 0.0}
_SCALAR = (str, int, float, bool)


@dataclass
class LogRow:
    """One sample x epoch of a log: the score it got and what it was given."""

    case_id: str
    replicate: int
    status: str  # ok, excluded, rollout_failed, judge_failed
    reason: str
    compliant: bool | None
    score: float  # NaN where there is none
    rationale: str
    output_digest: str
    factors: dict[str, str]
    turns: list[dict[str, Any]]


@dataclass
class InspectLog:
    """What the import needs of one log."""

    path: Path
    task: str
    system: str
    judge: str
    judge_from: str
    scorer: str
    version: str
    accuracy: float | None
    reduced: dict[str, float]
    rows: list[LogRow] = field(default_factory=list)


def read_inspect_log(path: Path, *, scorer: str | None, key: str | None, system_role: str | None,
                     judge_role: str, partial: float, factors: Sequence[str],
                     budget: ImportBudget | None = None) -> InspectLog:
    """Read ``path`` (.eval or .json) with Inspect's API and turn its samples into rows, within ``budget``."""
    budget = budget or import_budget()
    log = _read(path, budget)
    spec = log.eval
    system = _role_model(path, spec, system_role, "system") if system_role else _text(path, "eval.model", spec.model)
    chosen = _scorer(path, log, scorer)
    judge, judge_from = _judge(path, log, judge_role, chosen)
    if not log.samples:
        raise InputError(f"{path}: samples: expected at least one sample (a log written with samples, not a header only)")
    budget.take_rows(len(log.samples), str(path))
    accuracy, reduced = _inspect_accuracy(log, chosen)
    rows = []
    for i in range(len(log.samples)):
        rows.append(_row(path, i, log.samples[i], chosen, key, partial, factors, budget))
        log.samples[i] = None  # each sample is let go once it is a row: the log and its rows are never both held
    return InspectLog(path=path, task=str(spec.task), system=system, judge=judge, judge_from=judge_from,
                      scorer=chosen, version=str((spec.packages or {}).get("inspect_ai", "")), accuracy=accuracy,
                      reduced=reduced, rows=rows)


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


def _text(path: Path, name: str, value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise InputError(f"{path}: {name}: {_shown(value)}; expected a non-empty name")
    return value.strip()


def _role_model(path: Path, spec: Any, role: str, what: str) -> str:
    roles = spec.model_roles or {}
    if role not in roles:
        raise InputError(f"{path}: eval.model_roles: no role {role!r} for the {what}; the log has: "
                         f"{', '.join(roles) or 'no roles'}", param="system_role" if what == "system" else "judge_role")
    config = roles[role]
    config = config[0] if isinstance(config, list) and len(config) == 1 else config
    if isinstance(config, list):
        raise InputError(f"{path}: eval.model_roles.{role}: a list of {len(config)} models; expected one model")
    return _text(path, f"eval.model_roles.{role}.model", getattr(config, "model", None))


def _scorer(path: Path, log: Any, wanted: str | None) -> str:
    names = [s.name for s in (log.eval.scorers or [])]
    if not names and log.results is not None:
        names = [s.name for s in log.results.scores]
    names = list(dict.fromkeys(names))
    if wanted is not None:
        if wanted not in names:
            raise InputError(f"{path}: eval.scorers: no scorer {wanted!r}; the log has: {', '.join(names) or 'none'}",
                             param="scorer")
        return wanted
    if len(names) != 1:
        raise InputError(f"{path}: eval.scorers: {len(names)} scorers ({', '.join(names) or 'none'}); expected one, "
                         "or the `scorer` to import", param="scorer")
    return names[0]


def _judge(path: Path, log: Any, role: str, scorer: str) -> tuple[str, str]:
    """The judge's model: the grader role, else the scorer's model option, else the model its grading names."""
    if role in (log.eval.model_roles or {}):
        return _role_model(path, log.eval, role, "judge"), f"eval.model_roles.{role}"
    for entry in log.eval.scorers or []:
        model = (entry.options or {}).get("model") if entry.name == scorer else None
        if isinstance(model, str) and model.strip():
            return model.strip(), f"eval.scorers.{scorer}.options.model"
    for sample in log.samples or []:
        score = (sample.scores or {}).get(scorer)
        grading = (getattr(score, "metadata", None) or {}).get("grading") if score is not None else None
        for message in grading if isinstance(grading, list) else []:
            model = message.get("model") if isinstance(message, Mapping) else None
            if isinstance(model, str) and model.strip():
                return model.strip(), f"samples.scores.{scorer}.metadata.grading"
    # A scorer that calls no model (a match, an exact answer) is its own judge.
    return scorer, "scorer"


def _row(path: Path, index: int, sample: Any, scorer: str, key: str | None, partial: float,
         factors: Sequence[str], budget: ImportBudget) -> LogRow:
    where = f"samples[{index}]"
    if isinstance(sample.id, int) and not isinstance(sample.id, bool):
        problem = whole_number_problem(sample.id, -(2**63), 2**63 - 1)
        if problem:
            raise InputError(f"{path}: {where}.id: {problem}")
    if not isinstance(sample.id, (str, int)) or str(sample.id).strip() == "" or len(str(sample.id)) > _MAX_ID:
        raise InputError(f"{path}: {where}.id: {_shown(sample.id)}; expected a sample id (text or a number, "
                         f"at most {_MAX_ID:,} characters)")
    case_id = str(sample.id).strip()
    epoch = sample.epoch
    problem = whole_number_problem(epoch, 0, MAX_REPLICATE)
    if problem:
        raise InputError(f"{path}: {where}.epoch: {problem}")
    turns = _turns(path, where, sample.messages or [], budget)
    completion = sample.output.completion if sample.output is not None else ""
    digest = hashlib.sha256(str(completion).encode("utf-8", "surrogatepass")).hexdigest()[:16]
    row = LogRow(case_id=case_id, replicate=epoch, status=OK, reason="", compliant=None, score=math.nan,
                 rationale="", output_digest=digest, factors=_factors(path, where, sample.metadata, factors),
                 turns=turns)
    if sample.error is not None:
        row.status, row.reason = "rollout_failed", "sample error: " + _cut(getattr(sample.error, "message", ""))
        return row
    score = (sample.scores or {}).get(scorer)
    if score is None:
        row.status, row.reason = "judge_failed", f"no {scorer} score"
        return row
    row.rationale = _cut(score.explanation or "", 20_000)
    _value(path, f"{where}.scores.{scorer}.value", score.value, key, partial, row)
    return row


def _value(path: Path, name: str, value: Any, key: str | None, partial: float, row: LogRow) -> None:
    """C/I a label; P partial credit; N excluded; a number or true/false a score; an object by its ``key``."""
    if isinstance(value, Mapping):
        if key is None or key not in value:
            raise InputError(f"{path}: {name}: an object with keys {', '.join(map(str, list(value)[:8]))}; expected "
                             "a single value, or the key to import given with the scorer (NAME:KEY)", param="scorer")
        name, value = f"{name}.{key}", value[key]
    if isinstance(value, bool):
        row.compliant, row.score = value, float(value)
    elif isinstance(value, str) and value in _LETTERS:
        row.compliant, row.score = value == "C", _LETTERS[value]
    elif value == "P":
        row.score = partial
    elif value == "N":
        row.status, row.reason = "excluded", "no answer (N)"
    elif isinstance(value, (int, float)) and math.isfinite(value) and 0 <= value <= 1:
        row.score = float(value)
    else:
        raise InputError(f"{path}: {name}: {_shown(value)}; expected C, I, P, N, true/false or a number from 0 to 1")


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


def _inspect_accuracy(log: Any, scorer: str) -> tuple[float | None, dict[str, float]]:
    """Inspect's own ``accuracy`` of the scorer and its per-sample reduced values, where the log has them."""
    accuracy = None
    for score in (log.results.scores if log.results is not None else []):
        metric = score.metrics.get("accuracy") if score.name == scorer else None
        if metric is not None and isinstance(metric.value, (int, float)):
            accuracy = float(metric.value)
    reduced = {}
    for reduction in log.reductions or []:
        if reduction.scorer == scorer:
            reduced = {str(s.sample_id): float(s.value) for s in reduction.samples
                       if isinstance(s.value, (int, float)) and not isinstance(s.value, bool)}
    return accuracy, reduced


def _cut(text: Any, limit: int = 2_000) -> str:
    text = str(text or "")
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _shown(value: Any) -> str:
    shown = repr(value)
    return shown if len(shown) <= 40 else shown[:37] + "..."
