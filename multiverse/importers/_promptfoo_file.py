"""One promptfoo result file (``promptfoo eval -o results.json``) as rows: every field checked.

A result file is untrusted input: it is read with a size bound, parsed as JSON, and each
field the import uses is checked here; a field of the wrong kind is one line naming the
file, the field (``results.results[3].gradingResult``) and what was expected.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from multiverse.core import OK, ImportBudget, escaped, whole_number_problem
from multiverse.errors import InputError
from multiverse.importers._guard import MAX_REPLICATE, import_budget, text_only

__all__ = ["RESULT_VERSIONS", "PromptfooFile", "PromptfooRow", "read_promptfoo_file"]

#: The result-file format versions (``results.version``) this importer knows: promptfoo's
#: EvaluateSummaryV3, which ``promptfoo eval -o`` writes since 0.x; a later one may move the fields.
RESULT_VERSIONS = (3,)
#: testIdx and promptIdx: positions in a list, so far below this.
_MAX_INDEX = 2**31 - 1
#: promptfoo's failure reasons: 1 an assertion failed, 2 an error (the provider's or the grader's).
_ERROR = 2
_SCALAR = (str, int, float, bool)
#: Assertions judged by a model: their grader is a judge.
_MODEL_GRADED = ("llm-rubric", "model-graded", "factuality", "answer-relevance", "context-", "g-eval",
                 "select-best", "conversation-relevance", "moderation", "classifier", "similar")


@dataclass
class PromptfooRow:
    """One result (prompt x provider x test) and its assertions."""

    system: str
    case_id: str
    replicate: int
    status: str
    reason: str
    compliant: bool | None
    output: str
    prompt: str
    judge: str
    factors: dict[str, str]
    assertions: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class PromptfooFile:
    """What the import needs of one result file."""

    path: Path
    version: str
    successes: int
    failures: int
    errors: int
    rows: list[PromptfooRow] = field(default_factory=list)


def read_promptfoo_file(path: Path, factors: Sequence[str], budget: ImportBudget | None = None) -> PromptfooFile:
    """Read and check one result file within ``budget``; see the module docstring."""
    budget = budget or import_budget()
    document = _document(path, budget)
    results = _field(path, "results", document.get("results"), Mapping, "an object (promptfoo's results)")
    version = results.get("version")
    if isinstance(version, bool) or version not in RESULT_VERSIONS:
        raise InputError(f"{path}: results.version: {_shown(version)}; expected a promptfoo result format version "
                         f"this import knows ({', '.join(map(str, RESULT_VERSIONS))})")
    rows_in = _field(path, "results.results", results.get("results"), list, "a list of results")
    budget.take_rows(len(rows_in), str(path))
    stats = _field(path, "results.stats", results.get("stats"), Mapping, "an object with successes and failures")
    counts = [_count(path, f"results.stats.{k}", stats.get(k, 0 if k == "errors" else None))
              for k in ("successes", "failures", "errors")]
    if not rows_in:
        raise InputError(f"{path}: results.results: expected at least one result, the list is empty")
    config: Mapping[str, Any] = document["config"] if isinstance(document.get("config"), Mapping) else {}
    default: Mapping[str, Any] = config["defaultTest"] if isinstance(config.get("defaultTest"), Mapping) else {}
    prompts = {str(p.get("label") or p.get("raw")) for p in rows_in if isinstance(p, Mapping)
               for p in [p.get("prompt") or {}] if isinstance(p, Mapping)}
    rows = []
    for i in range(len(rows_in)):
        rows.append(_row(path, i, rows_in[i], default, factors, several_prompts=len(prompts) > 1))
        rows_in[i] = None  # each result parsed is let go once it is a row: the file and its rows are never both held
    return PromptfooFile(path=path, version=str(document.get("version") or results.get("version") or ""),
                         successes=counts[0], failures=counts[1], errors=counts[2], rows=rows)


def _document(path: Path, budget: ImportBudget) -> Mapping[str, Any]:
    if path.suffix.lower() != ".json":
        raise InputError(f"{path}: expected a promptfoo result file (.json, from promptfoo eval -o)")
    data = budget.read_file(path, lambda problem: InputError(f"{path}: {problem}", param="max_bytes"),
                            what="promptfoo result file")
    try:
        text = data.decode("utf-8")
        document = text_only(json.loads(text), text)
    except (ValueError, RecursionError) as exc:
        detail = " ".join(str(exc).split())[:200]
        raise InputError(f"{path}: cannot read as JSON: {detail}") from None
    return _field(path, "(the file)", document, Mapping, "a JSON object (promptfoo's result file)")


def _field(path: Path, name: str, value: Any, kind: type | tuple, expected: str) -> Any:
    if not isinstance(value, kind):
        raise InputError(f"{path}: {name}: {_shown(value)}; expected {expected}")
    return value


def _count(path: Path, name: str, value: Any, most: int = 2**63 - 1) -> int:
    problem = whole_number_problem(value, 0, most)
    if problem:
        raise InputError(f"{path}: {name}: {problem}")
    return value


def _row(path: Path, index: int, result: Any, default: Mapping[str, Any], factors: Sequence[str], *,
         several_prompts: bool) -> PromptfooRow:
    where = f"results.results[{index}]"
    result = _field(path, where, result, Mapping, "an object (one result)")
    prompt = _field(path, f"{where}.prompt", result.get("prompt") or {}, Mapping, "an object (the prompt)")
    test = result.get("testCase") if isinstance(result.get("testCase"), Mapping) else {}
    test_index = _count(path, f"{where}.testIdx", result.get("testIdx"), _MAX_INDEX)
    repeat = result.get("repeatIndex")
    problem = whole_number_problem(repeat, 0, MAX_REPLICATE) if repeat is not None else None
    if problem:
        raise InputError(f"{path}: {where}.repeatIndex: {problem}")
    response = result.get("response") if isinstance(result.get("response"), Mapping) else {}
    output = response.get("output", "")
    # A test's description is free text: what no output may carry raw is shown escaped.
    row = PromptfooRow(system=_system(path, where, result, prompt, several_prompts),
                       case_id=escaped(_cut(str(test.get("description") or f"test {test_index}"), 1_000)),
                       replicate=int(repeat or 0), status=OK, reason="", compliant=None,
                       output=output if isinstance(output, str) else json.dumps(output),
                       prompt=str(prompt.get("raw") or ""), judge="", factors=_factors(path, where, result, factors))
    _outcome(path, where, result, response, row)
    grading = result.get("gradingResult")
    if grading is not None:
        grading = _field(path, f"{where}.gradingResult", grading, Mapping, "an object (the assertions' results)")
        components = _field(path, f"{where}.gradingResult.componentResults", grading.get("componentResults") or [],
                            list, "a list of assertion results")
        row.assertions = [_assertion(path, f"{where}.gradingResult.componentResults[{k}]", c, test, default)
                          for k, c in enumerate(components)]
    graders = sorted({a["grader"] for a in row.assertions if a["grader"]})
    row.judge = " + ".join(graders) if graders else "assertions only"
    return row


def _system(path: Path, where: str, result: Mapping[str, Any], prompt: Mapping[str, Any], several_prompts: bool
            ) -> str:
    """The provider (label, else id), and the prompt when the file has several: prompts x providers."""
    provider = _field(path, f"{where}.provider", result.get("provider"), (Mapping, str), "the provider (an object)")
    name = _name(path, f"{where}.provider.id", provider if isinstance(provider, str)
                 else (provider.get("label") or provider.get("id")))
    prompt_name = str(prompt.get("label") or prompt.get("raw") or f"prompt {result.get('promptIdx', 0)}")
    return f"{name} / {_cut(prompt_name, 80)}" if several_prompts else name


def _outcome(path: Path, where: str, result: Mapping[str, Any], response: Mapping[str, Any], row: PromptfooRow) -> None:
    """The result's label, or the error that left it without one (counted, never a label)."""
    success = result.get("success")
    if result.get("failureReason") == _ERROR or (result.get("error") and not isinstance(success, bool)):
        # The provider failed when it gave no output; else the grader did.
        row.status = "judge_failed" if response.get("output") is not None and not response.get("error") else "rollout_failed"
        row.reason = "error: " + _cut(str(result.get("error") or response.get("error") or "unknown"), 300)
        return
    row.compliant = bool(_field(path, f"{where}.success", success, bool, "true or false"))


def _assertion(path: Path, where: str, component: Any, test: Mapping[str, Any], default: Mapping[str, Any]
               ) -> dict[str, Any]:
    component = _field(path, where, component, Mapping, "an object (one assertion's result)")
    assertion = component.get("assertion") if isinstance(component.get("assertion"), Mapping) else {}
    kind = str(assertion.get("type") or "assertion")
    value = assertion.get("value")
    # An assertion's value is free text (a regex, an expected answer): its name shows what no output may carry raw escaped.
    name = escaped(_cut(str(assertion.get("metric") or (f"{kind}: {_cut(str(value), 80)}" if value is not None
                                                        else kind)), 200))
    score = component.get("score")
    if score is not None and not (isinstance(score, (int, float)) and not isinstance(score, bool) and math.isfinite(score)):
        raise InputError(f"{path}: {where}.score: {_shown(score)}; expected a number")
    passed = _field(path, f"{where}.pass", component.get("pass"), bool, "true or false")
    graded = kind.startswith(_MODEL_GRADED) or (kind.startswith("not-") and kind[4:].startswith(_MODEL_GRADED))
    return {"criterion": name, "pass": passed, "score": math.nan if score is None else float(score),
            "reason": _cut(str(component.get("reason") or ""), 20_000),
            "grader": _grader(assertion, test, default) if graded else ""}


def _grader(assertion: Mapping[str, Any], test: Mapping[str, Any], default: Mapping[str, Any]) -> str:
    """The assertion's provider, else the test's options.provider, else defaultTest.options.provider."""
    for holder in (assertion, (test.get("options") or {}), (default.get("options") or {})):
        provider = holder.get("provider") if isinstance(holder, Mapping) else None
        if isinstance(provider, str) and provider.strip():
            return provider.strip()
        if isinstance(provider, Mapping):
            named = provider.get("label") or provider.get("id")
            if isinstance(named, str) and named.strip():
                return named.strip()
            text = provider.get("text") if isinstance(provider.get("text"), (str, Mapping)) else None
            if isinstance(text, str):
                return text.strip()
            if isinstance(text, Mapping) and isinstance(text.get("id"), str):
                return text["id"].strip()
    return "promptfoo's default grader"


def _factors(path: Path, where: str, result: Mapping[str, Any], factors: Sequence[str]) -> dict[str, str]:
    variables: Mapping[str, Any] = result["vars"] if isinstance(result.get("vars"), Mapping) else {}
    levels = {}
    for factor in factors:
        value = variables.get(factor)
        if value is None or not isinstance(value, _SCALAR) or str(value).strip() == "":
            raise InputError(f"{path}: {where}.vars.{factor}: {_shown(value)}; expected a level (text or a number) "
                             "in every result's vars", param="factors")
        levels[factor] = str(value).strip()
    return levels


def _name(path: Path, name: str, value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise InputError(f"{path}: {name}: {_shown(value)}; expected a non-empty name")
    return value.strip()


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _shown(value: Any) -> str:
    shown = repr(value)
    return shown if len(shown) <= 40 else shown[:37] + "..."
