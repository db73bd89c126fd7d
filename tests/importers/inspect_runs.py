"""Genuine Inspect AI logs for the importer's tests: a small task run offline against the fake server.

The solver and both graders are ``openai-api/local/...`` models served by
``tests/fakeserver.py`` on loopback. The graders answer in Inspect's own grade
format (``GRADE: C``), deterministically from the prompt, the grader's name and how
often that grader saw the prompt, so two epochs of one sample can get different grades
and two graders disagree on some samples. ``regenerate`` makes the solver's answers
differ from one eval to the next (a rerun of the system, not only of the grader).
"""

from __future__ import annotations

import re
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from inspect_server import serve

__all__ = ["QUESTIONS", "run_inspect"]


QUESTIONS = [(f"q{i}", f"What is {i} plus {i}?", str(2 * i), "arithmetic" if i % 2 else "words") for i in range(5)]


class _Responder:
    def __init__(self, regenerate: bool, partial: bool):
        self.seen: Counter[tuple[str, str]] = Counter()
        self.run = 0
        self.regenerate = regenerate
        self.partial = partial

    def __call__(self, body: dict) -> str:
        text = "\n".join(m["content"] for m in body["messages"] if isinstance(m.get("content"), str))
        model = str(body.get("model"))
        if "GRADE" not in text:
            question = text.strip().splitlines()[-1]
            suffix = f" (run {self.run})" if self.regenerate else ""
            return f"I think the answer to '{question}' is {sum(map(ord, question)) % 7}{suffix}."
        self.seen[(model, text)] += 1
        task = re.search(r"\[Task\]: (.*)", text)
        key = sum(map(ord, (task.group(1) if task else text) + model)) + self.seen[(model, text)]
        letters = "CIP" if self.partial else "CI"
        grade = letters[key % len(letters)] if key % 5 else "C"
        return f"Step by step: the submission for {task.group(1) if task else '?'} looks {grade}.\nGRADE: {grade}"


def run_inspect(log_dir: Path, graders=("grader-a", "grader-b"), *, epochs: int = 2, regenerate: bool = False,
                partial: bool = False, log_format: str = "eval") -> list[Path]:
    """Run the task once per grader (the grader role bound to that model); the logs' paths."""
    from inspect_ai import Task
    from inspect_ai import eval as inspect_eval
    from inspect_ai.dataset import Sample
    from inspect_ai.scorer import model_graded_qa
    from inspect_ai.solver import generate

    task = Task(dataset=[Sample(id=sid, input=q, target=t, metadata={"topic": topic}) for sid, q, t, topic in QUESTIONS],
                solver=generate(), scorer=model_graded_qa(partial_credit=partial), epochs=epochs, name="addition")
    responder = _Responder(regenerate, partial)
    serve(responder)  # the process's one server for Inspect (inspect_server.py says why)
    paths = []
    for grader in graders:
        responder.run += 1
        logs = inspect_eval(task, model="openai-api/local/system-x", model_roles={"grader": f"openai-api/local/{grader}"},
                            max_retries=0, log_dir=str(log_dir), display="none", log_format=log_format)
        assert logs[0].status == "success", str(logs[0].error)[:300]
        paths.append(Path(logs[0].location))
    return paths
