"""One promptfoo result file (``promptfoo eval -o results.json`` or ``.jsonl``) as rows: every field checked.

A result file is untrusted input: it is read with a size bound, parsed as JSON, and each
field the import uses is checked here; a field of the wrong kind is one line naming the
file, the field (``results.results[3].gradingResult``) and what was expected. A ``.jsonl``
file is one result a line (``results.results[i]`` of a ``.json``), without the config or
the stats: each result's own ``testCase`` names its grader.

Repeats (``--repeat N``): promptfoo writes each repeat of a test as a result of its own
(``testIdx`` counts on), with nothing naming the repeat; results of one system whose
test (description, vars and assertions) is the same are its repeats, numbered by
``testIdx``. A result promptfoo could not grade is never a label: a grader reply it
could not read (``Could not extract JSON``, ``metadata.graderError``) makes the row a
judge failure (no grade), a grader's error a judge failure, the system's provider error
a system failure.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from multiverse.core import OK, ImportBudget, escaped, whole_number_problem
from multiverse.errors import InputError
from multiverse.importers._guard import MAX_REPLICATE, import_budget, text_only
from multiverse.importers._losses import loss_reason

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
#: How promptfoo says a grader answered without a grade it could read (graders.ts' parseJsonGradingResponse);
#: 0.121 also marks such a result ``metadata.graderError``, which a grader's own error carries too.
_NO_GRADE = ("Could not extract JSON", "produced malformed response")
#: The promptfoo figures of each prompt x provider (``results.prompts[].metrics``) a test compares with.
_METRICS = ("score", "testPassCount", "testFailCount", "testErrorCount", "assertPassCount", "assertFailCount")


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
    #: promptfoo's own score of the result: its assertions' scores weighted by their ``weight``.
    score: float = math.nan
    #: The test's ``threshold`` on that score (None: every assertion must pass).
    threshold: float | None = None
    #: Whether the test weighs its assertions or sets a threshold (the score then decides the pass).
    weighted: bool = False
    #: How promptfoo counted the result in its stats: pass, fail or error.
    counted: str = "fail"
    test_index: int = 0
    #: What makes two results the same test (its repeats): description, vars and assertions.
    test_key: str = ""
    described: bool = True
    graders: set[str] = field(default_factory=set)


@dataclass
class PromptfooFile:
    """What the import needs of one result file."""

    path: Path
    version: str
    successes: int | None
    failures: int | None
    errors: int | None
    rows: list[PromptfooRow] = field(default_factory=list)
    #: promptfoo's own figures per prompt x provider (``results.prompts[].metrics``; a .json's only).
    metrics: list[dict[str, Any]] = field(default_factory=list)
    #: ``--repeat`` as promptfoo records it (runtimeOptions; None in a .jsonl).
    repeat: int | None = None
    #: Recorded per result but not imported: (field, results holding it).
    unread: dict[str, int] = field(default_factory=dict)


def read_promptfoo_file(path: Path, factors: Sequence[str], budget: ImportBudget | None = None) -> PromptfooFile:
    """Read and check one result file within ``budget``; see the module docstring."""
    budget = budget or import_budget()
    document = _document(path, budget)
    results = _field(path, "results", document.get("results"), Mapping, "an object (promptfoo's results)")
    version = results.get("version")
    jsonl = path.suffix.lower() == ".jsonl"
    if not jsonl and (isinstance(version, bool) or version not in RESULT_VERSIONS):
        raise InputError(f"{path}: results.version: {_shown(version)}; expected a promptfoo result format version "
                         f"this import knows ({', '.join(map(str, RESULT_VERSIONS))})")
    rows_in = _field(path, "results.results", results.get("results"), list, "a list of results")
    budget.take_rows(len(rows_in), str(path))
    counts = _stats(path, results, jsonl)
    if not rows_in:
        raise InputError(f"{path}: results.results: expected at least one result, the list is empty")
    config: Mapping[str, Any] = document["config"] if isinstance(document.get("config"), Mapping) else {}
    default: Mapping[str, Any] = config["defaultTest"] if isinstance(config.get("defaultTest"), Mapping) else {}
    prompts = {str(p.get("label") or p.get("raw")) for p in rows_in if isinstance(p, Mapping)
               for p in [p.get("prompt") or {}] if isinstance(p, Mapping)}
    rows, unread = [], dict.fromkeys(("response.tokenUsage, cost and latencyMs", "namedScores"), 0)
    for i in range(len(rows_in)):
        rows.append(_row(path, i, rows_in[i], default, factors, several_prompts=len(prompts) > 1))
        _count_unread(rows_in[i], unread)
        rows_in[i] = None  # each result parsed is let go once it is a row: the file and its rows are never both held
    _repeats_and_judge(rows)
    runtime: Mapping[str, Any] = document["runtimeOptions"] if isinstance(document.get("runtimeOptions"), Mapping) else {}
    repeat = runtime.get("repeat")
    return PromptfooFile(path=path, version=str(document.get("version") or results.get("version") or ""),
                         successes=counts[0], failures=counts[1], errors=counts[2], rows=rows,
                         metrics=_metrics(results.get("prompts")), unread={k: n for k, n in unread.items() if n},
                         repeat=repeat if isinstance(repeat, int) and not isinstance(repeat, bool) else None)


def _stats(path: Path, results: Mapping[str, Any], jsonl: bool) -> list[int | None]:
    """promptfoo's successes, failures and errors (a .jsonl records none)."""
    if jsonl:
        return [None, None, None]
    stats = _field(path, "results.stats", results.get("stats"), Mapping, "an object with successes and failures")
    return [_count(path, f"results.stats.{k}", stats.get(k, 0 if k == "errors" else None))
            for k in ("successes", "failures", "errors")]


def _count_unread(result: Any, unread: dict[str, int]) -> None:
    """Count what a result records that the import does not carry over."""
    if isinstance(result, Mapping):
        unread["response.tokenUsage, cost and latencyMs"] += any(k in result for k in ("tokenUsage", "cost",
                                                                                       "latencyMs"))
        unread["namedScores"] += bool(result.get("namedScores"))


def _repeats_and_judge(rows: list[PromptfooRow]) -> None:
    """Number each test's repeats (by testIdx) and name the file's grader on every row.

    The grader is the file's: every grader its tests name (the assertion's provider, the
    test's, the default), whether or not a result got as far as grading, so a provider
    error is the same judge's row as any other, never a judge of its own.
    """
    groups: dict[tuple[str, str], list[PromptfooRow]] = defaultdict(list)
    for row in rows:
        groups[(row.system, row.test_key)].append(row)
    for group in groups.values():
        group.sort(key=lambda row: row.test_index)
        for number, row in enumerate(group):
            row.replicate = number
            if not row.described:
                row.case_id = f"test {group[0].test_index}"
    graders = sorted({grader for row in rows for grader in row.graders})
    judge = " + ".join(graders) if graders else "assertions only"
    for row in rows:
        row.judge = judge


def _metrics(prompts: Any) -> list[dict[str, Any]]:
    """promptfoo's own figures per prompt x provider, as recorded (only numbers are kept)."""
    out = []
    for prompt in prompts if isinstance(prompts, list) else []:
        metrics = prompt.get("metrics") if isinstance(prompt, Mapping) else None
        if isinstance(prompt, Mapping) and isinstance(metrics, Mapping):
            out.append({"provider": str(prompt.get("provider") or ""), "prompt": str(prompt.get("label") or ""),
                        **{k: metrics[k] for k in _METRICS if isinstance(metrics.get(k), (int, float))
                           and not isinstance(metrics.get(k), bool)}})
    return out


def _document(path: Path, budget: ImportBudget) -> Mapping[str, Any]:
    if path.suffix.lower() not in (".json", ".jsonl"):
        raise InputError(f"{path}: expected a promptfoo result file (.json or .jsonl, from promptfoo eval -o)")
    data = budget.read_file(path, lambda problem: InputError(f"{path}: {problem}", param="max_bytes"),
                            what="promptfoo result file")
    if path.suffix.lower() == ".jsonl":
        return {"results": {"results": [_line(path, number, line) for number, line in
                                        enumerate(data.split(b"\n"), start=1) if line.strip()]}}
    try:
        text = data.decode("utf-8")
        document = text_only(json.loads(text), text)
    except (ValueError, RecursionError) as exc:
        detail = " ".join(str(exc).split())[:200]
        raise InputError(f"{path}: cannot read as JSON: {detail}") from None
    return cast("Mapping[str, Any]", _field(path, "(the file)", document, Mapping, "a JSON object (promptfoo's result file)"))


def _line(path: Path, number: int, line: bytes) -> Any:
    """One result of a .jsonl file (one JSON object a line)."""
    try:
        text = line.decode("utf-8")
        return text_only(json.loads(text), text)
    except (ValueError, RecursionError) as exc:
        detail = " ".join(str(exc).split())[:200]
        raise InputError(f"{path}: line {number}: cannot read as JSON: {detail}") from None


def _field(path: Path, name: str, value: Any, kind: type | tuple[Any, ...], expected: str) -> Any:
    if not isinstance(value, kind):
        raise InputError(f"{path}: {name}: {_shown(value)}; expected {expected}")
    return value


def _count(path: Path, name: str, value: Any, most: int = 2**63 - 1) -> int:
    problem = whole_number_problem(value, 0, most)
    if problem:
        raise InputError(f"{path}: {name}: {problem}")
    return cast("int", value)


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
                       prompt=str(prompt.get("raw") or ""), judge="", factors=_factors(path, where, result, factors),
                       test_index=test_index, described=bool(test.get("description")))
    declared: list[Any] = test["assert"] if isinstance(test.get("assert"), list) else []
    # Repeats of one test share its description, vars and assertions (promptfoo numbers them on in testIdx).
    row.test_key = json.dumps([test.get("description"), test.get("vars"), declared], sort_keys=True, default=str)
    row.score, row.threshold, row.weighted = _score(path, where, result, test, declared)
    grading = result.get("gradingResult")
    components: list[Any] = []
    if grading is not None:
        grading = _field(path, f"{where}.gradingResult", grading, Mapping, "an object (the assertions' results)")
        components = _field(path, f"{where}.gradingResult.componentResults", grading.get("componentResults") or [],
                            list, "a list of assertion results")
        row.assertions = [_assertion(path, f"{where}.gradingResult.componentResults[{k}]", c, test, default)
                          for k, c in enumerate(components)]
    row.graders = {a["grader"] for a in row.assertions if a["grader"]}
    row.graders |= {_grader(a, test, default) for a in declared if isinstance(a, Mapping) and _graded(a)}
    _outcome(path, where, result, response, row, components)
    return row


def _score(path: Path, where: str, result: Mapping[str, Any], test: Mapping[str, Any], declared: list[Any]
           ) -> tuple[float, float | None, bool]:
    """promptfoo's weighted score of the result, the test's threshold, and whether either was declared."""
    score = result.get("score")
    if score is not None and not (isinstance(score, (int, float)) and not isinstance(score, bool)
                                  and math.isfinite(score)):
        raise InputError(f"{path}: {where}.score: {_shown(score)}; expected a number (promptfoo's weighted score)")
    threshold = test.get("threshold")
    if threshold is not None and not (isinstance(threshold, (int, float)) and not isinstance(threshold, bool)
                                      and math.isfinite(threshold)):
        raise InputError(f"{path}: {where}.testCase.threshold: {_shown(threshold)}; expected a number")
    weighted = threshold is not None or any(isinstance(a, Mapping) and a.get("weight") not in (None, 1)
                                            for a in declared)
    return (math.nan if score is None else float(score)), threshold, weighted


def _system(path: Path, where: str, result: Mapping[str, Any], prompt: Mapping[str, Any], several_prompts: bool
            ) -> str:
    """The provider (label, else id), and the prompt when the file has several: prompts x providers."""
    provider = _field(path, f"{where}.provider", result.get("provider"), (Mapping, str), "the provider (an object)")
    name = _name(path, f"{where}.provider.id", provider if isinstance(provider, str)
                 else (provider.get("label") or provider.get("id")))
    prompt_name = str(prompt.get("label") or prompt.get("raw") or f"prompt {result.get('promptIdx', 0)}")
    return f"{name} / {_cut(prompt_name, 80)}" if several_prompts else name


def _outcome(path: Path, where: str, result: Mapping[str, Any], response: Mapping[str, Any], row: PromptfooRow,
             components: list[Any]) -> None:
    """The result's label, or the loss that left it without one (counted, never a label)."""
    success = result.get("success")
    row.counted = "error" if result.get("failureReason") == _ERROR else "pass" if success is True else "fail"
    kind = ""
    detail = str(result.get("error") or response.get("error") or "unknown")
    if result.get("failureReason") == _ERROR or (result.get("error") and not isinstance(success, bool)):
        # The provider failed when it gave no output; else the grader did. Either way promptfoo counts an error.
        kind = "grader_error" if response.get("output") is not None and not response.get("error") else "system_error"
        row.counted = "error"
    else:
        for component in components:
            if not isinstance(component, Mapping):
                continue
            metadata: Mapping[str, Any] = component["metadata"] if isinstance(component.get("metadata"), Mapping) else {}
            said = str(component.get("reason") or "")
            if any(words in said for words in _NO_GRADE):
                kind, detail = "no_grade", said
                break
            if metadata.get("graderError") is True:
                kind, detail = "grader_error", said
                break
    if kind:
        # promptfoo counts an unreadable grader reply as a failed test: the import does not take it as a label.
        row.status, reason = loss_reason(kind, detail)
        row.reason = _cut(reason, 300)
        row.score = math.nan
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
    weight = assertion.get("weight", 1)
    if not (isinstance(weight, (int, float)) and not isinstance(weight, bool) and math.isfinite(weight)):
        raise InputError(f"{path}: {where}.assertion.weight: {_shown(weight)}; expected a number")
    return {"criterion": name, "pass": passed, "score": math.nan if score is None else float(score),
            "reason": _cut(str(component.get("reason") or ""), 20_000), "weight": float(weight),
            "grader": _grader(assertion, test, default) if _graded(assertion) else ""}


def _graded(assertion: Mapping[str, Any]) -> bool:
    """Whether an assertion is judged by a model (its grader is a judge)."""
    kind = str(assertion.get("type") or "")
    return kind.startswith(_MODEL_GRADED) or (kind.startswith("not-") and kind[4:].startswith(_MODEL_GRADED))


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
                return cast("str", text["id"].strip())
            # A grader given on the command line (--grader) is written as the provider object without its id.
            model = provider.get("modelName")
            if isinstance(model, str) and model.strip():
                return model.strip()
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
