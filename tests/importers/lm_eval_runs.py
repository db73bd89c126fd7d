"""Genuine lm-evaluation-harness output for the importer's tests: small tasks run against the fake server.

lm-eval installs from PyPI in a minute without torch, but three of its dependencies (rouge-score,
sqlitedict, word2number) are source distributions only, which CI's wheels-only install refuses: so the
``test`` extra does not carry it, ``lm_eval_results/`` keeps one run it wrote, recorded by this module
run as a script (``pip install 'lm-eval[api]==0.4.13'``, then ``python tests/importers/lm_eval_runs.py``),
and a slow test runs it live wherever it is installed.

Two custom tasks read local JSON Lines (``dataset_path: json``, no hub), through lm-eval's
``local-chat-completions`` model talking to the fake OpenAI-compatible server on loopback:

- ``mv_arith``: eight sums (topic ``sum``), ``repeats: 3``, two filters over the repeats (the first number of the
  first answer, and the majority vote of the three), ``exact_match``;
- ``mv_words``: six words to spell backwards, ``exact_match`` and ``bleu`` (a corpus-level metric,
  which the import cannot read per sample and lists as dropped); each document has a ``topic``.

The server's answers change with each attempt at a question (so the repeats differ and the majority
vote decides something); one request at a time keeps that reproducible. The hub, telemetry and every
cache are off, and lm-eval's home is the run's folder.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fakeserver import FakeServer

__all__ = ["LM_EVAL_VERSION", "MODEL", "RECORDED", "REPEATS", "TASKS", "lm_eval_installed", "recorded", "run_lm_eval"]

LM_EVAL_VERSION = "0.4.13"
REPO = Path(__file__).resolve().parents[2]
RECORDED = Path(__file__).resolve().parent / "lm_eval_results"
MODEL = "fake-system"
TASKS = ("mv_arith", "mv_words")
REPEATS = 3
_WORDS = [("cat", "animal"), ("dog", "animal"), ("red", "colour"), ("blue", "colour"), ("tree", "plant"),
          ("rose", "plant")]


def lm_eval_installed() -> bool:
    """Whether the pinned lm-eval (with its API models) is importable here."""
    try:
        from importlib.metadata import PackageNotFoundError, version

        return version("lm_eval") == LM_EVAL_VERSION and shutil.which("lm_eval", path=str(Path(sys.executable).parent)) \
            is not None
    except PackageNotFoundError:
        return False


def recorded() -> Path:
    """The folder of the recorded run (lm-eval's --output_path)."""
    return RECORDED


class _Attempts:
    """Answers that change with each attempt at one prompt: sometimes off by one, sometimes misspelt."""

    def __init__(self) -> None:
        self.seen: dict[str, int] = {}

    def __call__(self, body: dict) -> str:
        text = "\n".join(m["content"] for m in body["messages"] if isinstance(m.get("content"), str))
        attempt = self.seen[text] = self.seen.get(text, 0) + 1
        sums = re.findall(r"What is (\d+) plus (\d+)", text)
        if sums:
            a, b = map(int, sums[-1])
            return f"The answer is {a + b + (1 if (a + attempt) % 3 == 0 else 0)}."
        word = re.findall(r"Spell '(\w+)' backwards", text)[-1]
        backwards = word[::-1]
        return backwards if (len(word) + attempt) % 4 else backwards[:-1]


def _tasks(folder: Path) -> Path:
    """Write both tasks' data and YAML into ``folder/tasks``; the folder (lm-eval's --include_path)."""
    tasks = folder / "tasks"
    tasks.mkdir(parents=True, exist_ok=True)
    arith = [{"question": f"What is {i} plus {i + 2}?", "answer": str(2 * i + 2), "topic": "sum"} for i in range(8)]
    words = [{"word": w, "reversed": w[::-1], "topic": topic} for w, topic in _WORDS]
    for name, rows in (("arith", arith), ("words", words)):
        (tasks / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    number = [{"function": "regex", "regex_pattern": r"(-?\d+)"}]
    common = {"dataset_path": "json", "test_split": "test", "output_type": "generate_until",
              "generation_kwargs": {"until": ["\n\n"], "max_gen_toks": 32, "do_sample": False},
              "metadata": {"version": 1.0}}
    configs = {
        "mv_arith": {"task": "mv_arith", **common,
                     "dataset_kwargs": {"data_files": {"test": str(tasks / "arith.jsonl")}},
                     "doc_to_text": "Question: {{question}}\nAnswer:", "doc_to_target": "{{answer}}",
                     "repeats": REPEATS,
                     "filter_list": [{"name": "first-number", "filter": [*number, {"function": "take_first"}]},
                                     {"name": "majority", "filter": [*number, {"function": "majority_vote"},
                                                                     {"function": "take_first"}]}],
                     "metric_list": [{"metric": "exact_match", "aggregation": "mean", "higher_is_better": True}]},
        "mv_words": {"task": "mv_words", **common,
                     "dataset_kwargs": {"data_files": {"test": str(tasks / "words.jsonl")}},
                     "doc_to_text": "Spell '{{word}}' backwards.", "doc_to_target": "{{reversed}}",
                     "metric_list": [{"metric": "exact_match", "aggregation": "mean", "higher_is_better": True},
                                     {"metric": "bleu", "higher_is_better": True}]},
    }
    for name, config in configs.items():
        (tasks / f"{name}.yaml").write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    return tasks


def run_lm_eval(folder: Path) -> Path:
    """Run both tasks with lm-eval against a fresh fake server; the output folder (--output_path)."""
    folder.mkdir(parents=True, exist_ok=True)
    tasks = _tasks(folder)
    out = folder / "out"
    home = folder / "home"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI", "HF_", "LMEVAL"))}
    env.update(HOME=str(home), HF_HOME=str(home / "hf"), HF_DATASETS_OFFLINE="1", HF_HUB_OFFLINE="1",
               HF_HUB_DISABLE_TELEMETRY="1", TOKENIZERS_PARALLELISM="false", OPENAI_API_KEY="sk-local",
               NO_COLOR="1")
    lm_eval = Path(sys.executable).parent / "lm_eval"
    with FakeServer(responder=_Attempts()) as server:
        model_args = (f"base_url={server.url}/chat/completions,model={MODEL},tokenized_requests=False,"
                      "num_concurrent=1,max_retries=1")
        done = subprocess.run([str(lm_eval), "run", "--model", "local-chat-completions", "--model_args", model_args,
                               "--tasks", ",".join(TASKS), "--include_path", str(tasks), "--apply_chat_template",
                               "--log_samples", "--output_path", str(out)], cwd=folder, env=env,
                              capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0 and any(out.rglob("results_*.json")), (done.returncode, done.stdout[-2000:],
                                                                        done.stderr[-3000:])
    shutil.rmtree(home, ignore_errors=True)
    return out


def main() -> int:
    """Run the tasks with the pinned lm-eval and record its output folder in place."""
    if not lm_eval_installed():
        print(f"lm-eval {LM_EVAL_VERSION} is not installed here: pip install 'lm-eval[api]=={LM_EVAL_VERSION}'",
              file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as scratch:
        out = run_lm_eval(Path(scratch))
        shutil.rmtree(RECORDED, ignore_errors=True)
        for source in sorted(out.rglob("*")):
            if source.is_file():
                # One folder: the timestamped names stay as lm-eval wrote them; the folder per model is dropped.
                target = RECORDED / source.name
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(source, target)
                print(f"{target.relative_to(REPO)} ({target.stat().st_size:,} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
