"""An Inspect log's scores as Inspect itself reads them: its scorers, their graders, its epoch reducers, its metrics.

- every scorer the samples hold is an option, and every key of a scorer whose values are
  objects (``NAME:KEY``), as Inspect's metrics count them;
- a scorer's grader is the model its scoring events called (a re-graded log's header still
  names the first grader), else the header's; a scorer that calls no model has none;
- the log's epoch reducers are applied by Inspect's own reducer functions, so a reduced
  value is Inspect's; a reducer of the task's own code (a custom name) is refused;
- a sample x epoch without a value is a loss of its kind (``importers.loss_reason``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from multiverse.core import OK
from multiverse.errors import InputError
from multiverse.importers._inspect_fields import Cell, role_model, shown_value, text_cut
from multiverse.importers._losses import loss_reason

__all__ = ["REDUCERS", "cell", "check_reducers", "log_metrics", "reduce_values", "row_value", "scorer_judges",
           "scorer_options"]

#: The reducers Inspect offers that this import applies (``_K``: a whole number of epochs).
REDUCERS = ("mean", "median", "mode", "max", "majority", "at_least_K", "pass_at_K")
_WITH_K = re.compile(r"^(at_least|pass_at)_([1-9][0-9]{0,5})$")
#: Inspect's unscored reasons that blame the answer, not the grader: left out, as Inspect leaves them out.
_ANSWER_REASONS = ("invalid_response_format", "refusal", "no_response")
_LETTERS = {"C": 1.0, "I": 0.0}


def scorer_options(path: Path, log: Any, wanted: Sequence[str] | None) -> list[str]:
    """The log's scorers in order (``NAME:KEY`` per key of an object-valued one), or the ``wanted`` of them."""
    names = _scorer_keys(log)
    options = [o for name, keys in names.items() for o in ([f"{name}:{k}" for k in keys] if keys else [name])]
    if not wanted:
        if not options:
            raise InputError(f"{path}: eval.scorers: no scorer; expected a log with at least one scorer",
                             param="scorer")
        return options
    chosen: list[str] = []
    for want in wanted:
        hits = [o for o in options if o == want or o.split(":", 1)[0] == want]
        if not hits:
            raise InputError(f"{path}: eval.scorers: no scorer {want!r}; the log has: {', '.join(options) or 'none'}",
                             param="scorer")
        chosen += [h for h in hits if h not in chosen]
    return chosen


def _scorer_keys(log: Any) -> dict[str, list[str] | None]:
    """Each scorer the samples or the header name, with the keys of its values where they are objects."""
    names: dict[str, list[str] | None] = {}
    for sample in log.samples or []:
        for name, score in (sample.scores or {}).items():
            value = getattr(score, "value", None)
            if isinstance(value, Mapping):
                keys = names.get(name) or []
                names[name] = keys + [str(k) for k in value if str(k) not in keys]
            elif name not in names:
                names[name] = None
    for entry in log.eval.scorers or []:  # a failed eval may have no score at all
        names.setdefault(str(entry.name), None)
    return names


def scorer_judges(path: Path, log: Any, options: list[str], judge_role: str) -> dict[str, tuple[str | None, str]]:
    """Each scorer's grader: the models its scoring events called, else the header's; None for a rule-based one."""
    called: dict[str, set[str]] = {}
    for sample in log.samples or []:
        spans: dict[str, tuple[str, str, str | None]] = {}
        for event in getattr(sample, "events", None) or []:
            kind = type(event).__name__
            if kind == "SpanBeginEvent":
                spans[str(event.id)] = (str(event.type or ""), str(event.name), event.parent_id)
                if event.type == "scorer":
                    called.setdefault(str(event.name), set())
            elif kind == "ModelEvent":
                scorer = _scorer_span(spans, getattr(event, "span_id", None))
                if scorer is not None and isinstance(event.model, str) and event.model.strip():
                    called.setdefault(scorer, set()).add(event.model.strip())
    judges: dict[str, tuple[str | None, str]] = {}
    for option in options:
        name = option.split(":", 1)[0]
        if name in called:
            models = sorted(called[name])
            judges[option] = ("+".join(models) if models else None, f"the scoring events of {name}")
        else:
            judges[option] = _header_judge(path, log, name, judge_role)
    return judges


def _scorer_span(spans: Mapping[str, tuple[str, str, str | None]], span: Any) -> str | None:
    seen = 0
    while span is not None and str(span) in spans and seen < 64:
        kind, name, parent = spans[str(span)]
        if kind == "scorer":
            return name
        span, seen = parent, seen + 1
    return None


def _header_judge(path: Path, log: Any, scorer: str, role: str) -> tuple[str | None, str]:
    """A log without scoring events: the scorer's model option, the model its grading names, else the role's."""
    for entry in log.eval.scorers or []:
        model = (entry.options or {}).get("model") if entry.name == scorer else None
        if isinstance(model, str) and model.strip():
            return model.strip(), f"eval.scorers.{scorer}.options.model"
    graded = False
    for sample in log.samples or []:
        score = (sample.scores or {}).get(scorer)
        grading = (getattr(score, "metadata", None) or {}).get("grading") if score is not None else None
        graded = graded or isinstance(grading, list)
        for message in grading if isinstance(grading, list) else []:
            model = message.get("model") if isinstance(message, Mapping) else None
            if isinstance(model, str) and model.strip():
                return model.strip(), f"samples.scores.{scorer}.metadata.grading"
    if graded and role in (log.eval.model_roles or {}):
        return role_model(path, log.eval, role, "judge"), f"eval.model_roles.{role}"
    return None, "no model call recorded for the scorer"  # a rule (a match, an exact answer) is no judge


def check_reducers(path: Path, log: Any) -> list[str]:
    """The log's epoch reducers (``mean`` when it names none), each one this import applies as Inspect does."""
    names = log.eval.config.epochs_reducer or ["mean"]
    for name in names:
        if name not in REDUCERS[:5] and not _WITH_K.match(str(name)):
            raise InputError(f"{path}: eval.config.epochs_reducer: {shown_value(name)}: not a reducer this import "
                             f"applies as Inspect does; expected one of {', '.join(REDUCERS)}")
    return [str(n) for n in names]


def _reducer(name: str) -> Any:
    from inspect_ai.scorer import at_least, majority_score, max_score, mean_score, median_score, mode_score, pass_at

    fixed = {"mean": mean_score, "median": median_score, "mode": mode_score, "max": max_score,
             "majority": majority_score}
    if name in fixed:
        return fixed[name]()
    found = _WITH_K.match(name)
    assert found is not None  # check_reducers let no other name through
    return (at_least if found.group(1) == "at_least" else pass_at)(int(found.group(2)))


def reduce_values(values: list[Any], reducer: str) -> Any:
    """The value Inspect's ``reducer`` gives a sample whose epochs scored ``values`` (NaN: none to reduce)."""
    from inspect_ai.scorer import Score

    return _reducer(reducer)([Score(value=v) for v in values]).value


def log_metrics(log: Any, options: list[str]) -> dict[tuple[str, str], dict[str, float]]:
    """Inspect's own metrics per (scorer option, reducer), as ``log.results`` holds them."""
    out: dict[tuple[str, str], dict[str, float]] = {}
    for score in (log.results.scores if log.results is not None else []):
        name = score.name if score.name in options else f"{score.scorer}:{score.name}"
        if name not in options:
            continue
        out[(name, score.reducer or "mean")] = {k: float(m.value) for k, m in score.metrics.items()
                                                if isinstance(m.value, (int, float)) and not isinstance(m.value, bool)}
    return out


def cell(path: Path, where: str, sample: Any, option: str) -> Cell:
    """One sample x epoch of one scorer option: Inspect's value, or the kind of loss it is."""
    name, _, key = option.partition(":")
    score = (sample.scores or {}).get(name)
    if score is None:
        return _lost(sample, name)
    value, rationale = score.value, text_cut(score.explanation or "", 20_000)
    if key and isinstance(value, Mapping):
        if key not in value:
            status, reason = loss_reason("grader_error", f"no {key} in the {name} score")
            return Cell(status, reason, None, rationale)
        value = value[key]
    if isinstance(value, float) and math.isnan(value):
        why = str(score.reason or "")
        detail = f"{why}: {score.explanation}" if why and score.explanation else why or str(score.explanation or "")
        if why in _ANSWER_REASONS:
            return Cell("excluded", text_cut(f"unscored: {detail}", 500), None, rationale)
        status, reason = loss_reason("grader_error" if why == "scoring_failed" else "no_grade", detail)
        return Cell(status, text_cut(reason, 500), None, rationale)
    field = f"{where}.scores.{name}.value" + (f".{key}" if key else "")
    if isinstance(value, Mapping) or not (isinstance(value, (bool, int, float)) or value in ("C", "I", "P", "N")):
        raise InputError(f"{path}: {field}: {shown_value(value)}; expected C, I, P, N, true/false or a number"
                         + ("" if not isinstance(value, Mapping) else " (an object's key: NAME:KEY)"), param="scorer")
    if isinstance(value, float) and not math.isfinite(value):
        raise InputError(f"{path}: {field}: {shown_value(value)}; expected a finite number")
    return Cell(OK, "", value, rationale)


def _lost(sample: Any, scorer: str) -> Cell:
    error = sample.error
    if error is None:
        status, reason = loss_reason("grader_error", f"no {scorer} score recorded")
        return Cell(status, reason, None, "")
    message = text_cut(getattr(error, "message", "") or "", 500)
    if message.startswith("CancelledError"):
        kind = "not_run"
    else:
        scoring = any(type(e).__name__ == "SpanBeginEvent" and e.type in ("scorers", "scorer")
                      for e in getattr(sample, "events", None) or [])
        kind = "grader_error" if scoring else "system_error"  # the error came after scoring began, or before
    status, reason = loss_reason(kind, message)
    return Cell(status, reason, None, "")


def row_value(path: Path, field: str, value: Any, partial: float, scale: tuple[float, float]
              ) -> tuple[str, str, bool | None, float]:
    """(status, reason, compliant, score) of a value: C/I and true/false labels, P partial, N excluded, numbers."""
    if isinstance(value, bool):
        return OK, "", value, float(value)
    if isinstance(value, str) and value in _LETTERS:
        return OK, "", value == "C", _LETTERS[value]
    if value == "P":
        return OK, "", None, partial
    if value == "N":
        return "excluded", "no answer (N)", None, math.nan
    low, high = scale
    if isinstance(value, (int, float)) and math.isfinite(value) and low <= value <= high:
        return OK, "", None, float(value)
    if isinstance(value, float) and math.isnan(value):
        return "judge_failed", "no grade: no epoch to reduce", None, math.nan
    raise InputError(f"{path}: {field}: {shown_value(value)}; expected C, I, P, N, true/false or a number from "
                     f"{low:g} to {high:g} (--scale gives the scorer's range)", param="scale")
