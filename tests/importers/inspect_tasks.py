"""Genuine Inspect AI logs made here, offline, by the installed Inspect against the fake server (issue 43).

One task with four scorers (``match()``, ``model_graded_qa()``, a 1-5 ``rating`` and a dict
scorer ``two`` with keys ``a`` and ``b``), run with 2, 3 and 4 epochs under every reducer
Inspect offers; a task whose scorer raises on one sample-epoch and whose system fails on
another; a failed eval whose other samples are cancelled; a log re-graded with
``inspect_ai.score(..., action="append")`` by a second grader; and an eval-set folder.
The grader answers ``GRADE: C``, ``GRADE: I`` or no grade at all (Inspect records the sample
unscored), deterministically from the prompt and how often it was seen.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from inspect_server import serve as _server

__all__ = ["REDUCERS", "make_logs"]

REDUCERS = ["mean", "median", "mode", "max", "at_least_2", "pass_at_2"]


class _Answers:
    """The system answers a digit; the grader grades, or (one time in five) answers with no grade."""

    def __init__(self, broken: str = "", no_grade_every: int = 5):
        self.seen: dict[str, int] = {}
        self.broken = broken
        self.no_grade_every = no_grade_every

    def __call__(self, body: dict) -> str | bytes:
        text = "\n".join(m["content"] for m in body["messages"] if isinstance(m.get("content"), str))
        self.seen[text] = self.seen.get(text, 0) + 1
        key = sum(map(ord, text + str(body.get("model")))) + self.seen[text]
        if "GRADE" in text:
            if self.no_grade_every and key % self.no_grade_every == 0:
                return "I cannot decide."
            return "GRADE: C" if key % 3 else "GRADE: I"
        if self.broken and self.broken in text:
            return b"\x00"  # a reply the client cannot parse: the sample errors before scoring
        return str(key % 3)


def _scorers():
    from inspect_ai.scorer import Score, mean, model_graded_qa, scorer, stderr
    from inspect_ai.scorer import match as match_scorer

    @scorer(metrics=[mean(), stderr()])
    def rating():
        async def score(state, target):
            return Score(value=float(1 + sum(map(ord, state.output.completion + str(state.epoch))) % 5),
                         explanation="a rating from 1 to 5")
        return score

    @scorer(metrics={"a": [mean(), stderr()], "b": [mean()]})
    def two():
        async def score(state, target):
            completion = state.output.completion.strip()
            return Score(value={"a": float(completion == target.text), "b": 0.25 * (len(completion) % 5)})
        return score

    return [match_scorer(), model_graded_qa(), rating(), two()]


def _dataset(n: int = 6):
    from inspect_ai.dataset import Sample

    return [Sample(id=f"q{i}", input=f"question {i}", target=str(i % 3), metadata={"topic": "odd" if i % 2 else "even"})
            for i in range(n)]


def make_logs(folder: Path) -> dict[str, list[Path] | Path]:
    """Every log the tests read, made once (a few seconds each)."""
    from inspect_ai import Epochs, Task, eval_set, score
    from inspect_ai import eval as inspect_eval
    from inspect_ai.log import write_eval_log
    from inspect_ai.scorer import Score, accuracy, model_graded_qa, scorer
    from inspect_ai.solver import generate

    grader = {"grader": "openai-api/local/grader-a"}
    out: dict[str, list[Path] | Path] = {"reduced": []}
    _server(_Answers())
    for epochs, reducers in ((2, REDUCERS[:4] + ["at_least_2", "pass_at_2"]), (3, REDUCERS), (4, ["mode", "max"])):
        task = Task(dataset=_dataset(), solver=generate(), scorer=_scorers(), epochs=Epochs(epochs, reducers),
                    name=f"epochs{epochs}")
        log = inspect_eval(task, model="openai-api/local/system-x", model_roles=grader, max_retries=0,
                           log_dir=str(folder / "reduced"), display="none")[0]
        assert log.status == "success", log.error
        out["reduced"].append(Path(log.location))  # type: ignore[union-attr]

    @scorer(metrics=[accuracy()])
    def fragile():
        async def score(state, target):
            if state.sample_id == "q1" and state.epoch == 2:
                raise RuntimeError("the scorer broke on q1")
            return Score(value="C" if state.output.completion.strip() == target.text else "I")
        return score

    _server(_Answers(broken="question 4"))
    task = Task(dataset=_dataset(), solver=generate(), scorer=[fragile(), model_graded_qa()], epochs=2, name="errors")
    log = inspect_eval(task, model="openai-api/local/system-x", model_roles=grader, max_retries=0,
                       log_dir=str(folder / "errors"), display="none", fail_on_error=False)[0]
    out["errors"] = Path(log.location)

    _server(_Answers(broken="question 2", no_grade_every=0))
    task = Task(dataset=_dataset(8), solver=generate(), scorer=fragile(), epochs=2, name="cancelled")
    log = inspect_eval(task, model="openai-api/local/system-x", max_retries=0, log_dir=str(folder / "cancelled"),
                       display="none", max_samples=1)[0]
    assert log.status == "error"
    out["cancelled"] = Path(log.location)

    _server(_Answers())
    first = inspect_eval(Task(dataset=_dataset(), solver=generate(), scorer=model_graded_qa(), epochs=2,
                              name="regraded"), model="openai-api/local/system-x", model_roles=grader, max_retries=0,
                         log_dir=str(folder / "regraded"), display="none")[0]
    out["original"] = Path(first.location)
    appended = score(first, model_graded_qa(model="openai-api/local/grader-b"), action="append", display="none")
    write_eval_log(appended, str(folder / "regraded" / "appended.eval"))
    out["appended"] = folder / "regraded" / "appended.eval"
    overwritten = score(first, model_graded_qa(model="openai-api/local/grader-b"), action="overwrite",
                        display="none")
    write_eval_log(overwritten, str(folder / "regraded" / "overwritten.eval"))
    out["overwritten"] = folder / "regraded" / "overwritten.eval"

    _server(_Answers(no_grade_every=0))
    tasks = [Task(dataset=_dataset(4), solver=generate(), scorer=_scorers()[0], name=f"set{i}") for i in range(2)]
    done, _ = eval_set(tasks, model="openai-api/local/system-x", log_dir=str(folder / "set"), display="none",
                       max_retries=0, retry_attempts=1)
    assert done
    out["set"] = folder / "set"
    return out
