"""Genuine promptfoo results for the importer's tests: small evals run against the fake server, recorded.

promptfoo's npm install compiles a native SQLite module from source (15 minutes on a loaded 2-core
machine), so CI does not install it: the tests read what the pinned version wrote, recorded under
``promptfoo_results/`` by this module run as a script::

    npm install --prefix .ci/node promptfoo@0.121.20    # once; PROMPTFOO names another binary
    python tests/importers/promptfoo_runs.py             # records every eval below, in place

Each placement of the grader (``defaultTest``, the ``test``'s options, the ``assertion``'s provider)
is one pair of evals, graded by grader-a and then grader-b: ``promptfoo_results/grader-*.json`` for
``defaultTest``, ``promptfoo_results/<placement>/grader-*.json`` for the others. The files are kept
as promptfoo wrote them (ids, timestamps and the fake server's loopback port change between
recordings, nothing the importer reads does).

Both the system and the graders are ``openai:chat:...`` providers whose ``apiBaseUrl`` is the fake
server on loopback; the graders answer ``llm-rubric`` in promptfoo's JSON (``pass``, ``score``,
``reason``), deterministically from the grader's name and the answer, so two graders disagree on
some. Telemetry, update checks and the cache are off, and promptfoo's home is the eval's folder.

Two more pairs of evals record what goes past the plain case (issue 43):

- ``features/grader-*.json`` and ``.jsonl`` (one eval written as both): ``--repeat 3``, assertion
  ``weight``s, a test ``threshold`` (so promptfoo's weighted score decides the pass), a provider error in
  one test (the fake server answers its question with a 400), and grader-b replying prose to one test's
  rubric (promptfoo: "Could not extract JSON from llm-rubric response"). The system's answers change
  with each attempt (``attempt N``), so repeats differ; one request at a time keeps that reproducible.
- ``cli_grader/grader-*.json``: the plain eval with no grader in its config, graded by
  ``--grader openai:chat:grader-a`` (then b) on the command line; promptfoo then writes the grader as a
  provider object without an id (its ``modelName`` only).

promptfoo 0.121 says Node.js 20 is past its support (22.22+ is), but runs on 20.20.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fakeserver import FakeServer

__all__ = ["FEATURE_TESTS", "GRADERS", "PLACES", "PROMPTFOO_VERSION", "RECORDED", "REPEAT", "promptfoo_binary",
           "recorded", "recorded_cli_grader", "recorded_features", "run_cli_grader", "run_features", "run_promptfoo"]

PROMPTFOO_VERSION = "0.121.20"
REPO = Path(__file__).resolve().parents[2]
RECORDED = Path(__file__).resolve().parent / "promptfoo_results"
#: Where an eval names its grader: promptfoo takes the assertion's provider, else the test's, else defaultTest's.
PLACES = ("defaultTest", "test", "assertion")
GRADERS = ("grader-a", "grader-b")
TESTS = [("What is 2 plus 2?", "arithmetic"), ("Name a colour.", "words"), ("What is 3 plus 3?", "arithmetic"),
         ("Name an animal.", "words"), ("Spell 'cat' backwards.", "words")]


#: The features eval: (question, topic, test threshold or None, [(assertion type, value, weight or None)]).
FEATURE_TESTS = [
    ("What is 2 plus 2?", "arithmetic", 0.6, [("llm-rubric", "The answer is correct and brief", 3),
                                              ("contains", "answer", 1)]),
    ("Name a colour.", "words", None, [("llm-rubric", "The answer names a colour", 2), ("icontains", "attempt", 1)]),
    ("Name an animal.", "words", None, [("llm-rubric", "The answer names an animal", None),
                                        ("contains", "answer", None)]),
    ("Spell 'cat' backwards.", "words", None, [("llm-rubric", "The answer is tac", None), ("contains", "zzz", 0)]),
    ("What is 3 plus 3?", "arithmetic", 0.5, [("llm-rubric", "The answer is correct", 1), ("contains", "3", 2)]),
]
#: ``--repeat`` of the features eval.
REPEAT = 3
#: The test whose system request the fake server refuses (a provider error), and the grader that answers prose.
_PROVIDER_ERROR = "Name an animal."
_PROSE = ("backwards", "grader-b")


def recorded_features(suffix: str = ".json") -> list[Path]:
    """The features eval's recorded result files (``.json`` or ``.jsonl``), one per grader."""
    return [RECORDED / "features" / f"{grader}{suffix}" for grader in GRADERS]


def recorded_cli_grader() -> list[Path]:
    """The result files of the eval graded by ``--grader`` on the command line, one per grader."""
    return [RECORDED / "cli_grader" / f"{grader}.json" for grader in GRADERS]


def recorded(where: str = "defaultTest") -> list[Path]:
    """The recorded result files of one placement of the grader, one per grader."""
    folder = RECORDED if where == "defaultTest" else RECORDED / where
    return [folder / f"{grader}.json" for grader in GRADERS]


def promptfoo_binary() -> Path | None:
    """The promptfoo CLI: ``$PROMPTFOO``, else the one installed under .ci/node, else None."""
    named = os.environ.get("PROMPTFOO")
    candidates = [Path(named)] if named else []
    candidates.append(REPO / ".ci" / "node" / "node_modules" / ".bin" / "promptfoo")
    return next((c for c in candidates if c.is_file() and os.access(c, os.X_OK)), None)


def _text(body: dict) -> str:
    return "\n".join(m["content"] for m in body["messages"] if isinstance(m.get("content"), str))


def _grade(body: dict) -> str:
    text = _text(body)
    if "rubric" not in text.lower():
        question = text.strip().splitlines()[-1]
        return f"Here is my answer to {question!r}: {sum(map(ord, question)) % 10}."
    model = str(body.get("model"))
    verdict = (sum(map(ord, text)) + sum(map(ord, model))) % 3 != 0
    return json.dumps({"reason": f"{model}: the output {'meets' if verdict else 'misses'} the rubric",
                       "pass": verdict, "score": 1.0 if verdict else 0.0})


class _Attempts:
    """The features eval's server: answers that change with each attempt, graded with partial scores."""

    def __init__(self) -> None:
        self.seen: dict[str, int] = {}

    def __call__(self, body: dict) -> str:
        text, model = _text(body), str(body.get("model"))
        if "rubric" not in text.lower():
            question = text.strip().splitlines()[-1]
            self.seen[question] = self.seen.get(question, 0) + 1
            return f"Here is my answer to {question!r}, attempt {self.seen[question]}: {sum(map(ord, question)) % 10}."
        if _PROSE[0] in text and model == _PROSE[1]:
            return "I would say the answer is fine, more or less."  # no JSON: promptfoo cannot read a grade
        score = (sum(map(ord, text)) + 7 * sum(map(ord, model))) % 11 / 10
        return json.dumps({"reason": f"{model}: the output scores {score:.1f} on the rubric", "pass": score >= 0.5,
                           "score": score})


def _provider_error(body: dict) -> str | None:
    text = _text(body)
    return "bad_request" if _PROVIDER_ERROR in text and "rubric" not in text.lower() else None


def _config(url: str, grader: str, where: str) -> dict:
    def provider(name: str) -> dict:
        return {"id": f"openai:chat:{name}", "config": {"apiBaseUrl": url, "apiKey": "sk-local"}}

    options = {"provider": provider(grader)}
    config: dict = {"description": f"graded by {grader}", "prompts": ["Answer briefly: {{question}}",
                                                                     "You are careful. {{question}}"],
                    "providers": [provider("system-x")], "tests": []}
    for question, topic in TESTS:
        config["tests"].append({"description": question, "vars": {"question": question, "topic": topic},
                                "assert": [{"type": "llm-rubric", "value": "The answer is correct and brief"},
                                           {"type": "contains", "value": "answer"}]})
    if where == "defaultTest":
        config["defaultTest"] = {"options": options}
    elif where == "test":
        for test in config["tests"]:
            test["options"] = options
    else:
        for test in config["tests"]:
            test["assert"][0]["provider"] = provider(grader)
    return config


def _features_config(url: str, grader: str) -> dict:
    def provider(name: str) -> dict:
        return {"id": f"openai:chat:{name}", "config": {"apiBaseUrl": url, "apiKey": "sk-local"}}

    config: dict = {"description": f"features graded by {grader}", "prompts": ["Answer briefly: {{question}}"],
                    "providers": [provider("system-x")], "defaultTest": {"options": {"provider": provider(grader)}},
                    "tests": []}
    for question, topic, threshold, assertions in FEATURE_TESTS:
        test: dict = {"description": question, "vars": {"question": question, "topic": topic}, "assert": [
            {"type": kind, "value": value, **({"weight": weight} if weight is not None else {})}
            for kind, value, weight in assertions]}
        if threshold is not None:
            test["threshold"] = threshold
        config["tests"].append(test)
    return config


def _env(home: Path, url: str | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI", "PROMPTFOO"))}
    env.update(HOME=str(home), PROMPTFOO_CONFIG_DIR=str(home / ".promptfoo"), PROMPTFOO_DISABLE_TELEMETRY="1",
               PROMPTFOO_DISABLE_UPDATE="1", PROMPTFOO_CACHE_ENABLED="false", PROMPTFOO_DISABLE_SHARING="1",
               PROMPTFOO_DISABLE_REMOTE_GENERATION="true", PROMPTFOO_SELF_HOSTED="1", OPENAI_API_KEY="sk-local",
               NO_COLOR="1", **({"OPENAI_BASE_URL": url} if url else {}))
    return env


def _eval(binary: Path, folder: Path, config: dict, outputs: list[Path], env: dict[str, str], *extra: str) -> None:
    path = folder / outputs[0].with_suffix(".yaml").name
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    done = subprocess.run([str(binary), "eval", "-c", str(path), "-o", *map(str, outputs), "--no-cache",
                           "--no-progress-bar", "--no-table", *extra], cwd=folder, env=env,
                          capture_output=True, text=True, timeout=300, check=False)
    # promptfoo exits 100 when an assertion failed: that is a result, not an error.
    assert done.returncode in (0, 100) and all(p.is_file() for p in outputs), (
        done.returncode, done.stdout[-2000:], done.stderr[-2000:])


def _binary_and_home(folder: Path, binary: Path | None) -> tuple[Path, Path]:
    binary = binary or promptfoo_binary()
    assert binary is not None, "promptfoo is not installed"
    folder.mkdir(parents=True, exist_ok=True)
    home = folder / "home"
    home.mkdir(exist_ok=True)
    return binary, home


def run_promptfoo(folder: Path, graders=GRADERS, *, where: str = "defaultTest",
                  binary: Path | None = None) -> list[Path]:
    """One ``promptfoo eval`` per grader (named in ``where``: defaultTest, test or assertion); the result files."""
    binary, home = _binary_and_home(folder, binary)
    out = []
    with FakeServer(responder=_grade) as server:
        for grader in graders:
            results = folder / f"{grader}.json"
            _eval(binary, folder, _config(server.url, grader, where), [results], _env(home))
            out.append(results)
    shutil.rmtree(home, ignore_errors=True)
    return out


def run_features(folder: Path, graders=GRADERS, *, binary: Path | None = None) -> list[tuple[Path, Path]]:
    """The features eval once per grader, each written as .json and .jsonl; the (json, jsonl) pairs."""
    binary, home = _binary_and_home(folder, binary)
    out = []
    for grader in graders:
        # A fresh server per grader: both graders see the same answers, attempt by attempt.
        with FakeServer(responder=_Attempts(), fault_for=_provider_error) as server:
            results = (folder / f"{grader}.json", folder / f"{grader}.jsonl")
            _eval(binary, folder, _features_config(server.url, grader), list(results), _env(home),
                  "--repeat", str(REPEAT), "--max-concurrency", "1")
            out.append(results)
    shutil.rmtree(home, ignore_errors=True)
    return out


def run_cli_grader(folder: Path, graders=GRADERS, *, binary: Path | None = None) -> list[Path]:
    """The plain eval with no grader in its config, graded by ``--grader openai:chat:NAME``; the result files."""
    binary, home = _binary_and_home(folder, binary)
    out = []
    with FakeServer(responder=_grade) as server:
        for grader in graders:
            config = _config(server.url, grader, "defaultTest")
            del config["defaultTest"]
            results = folder / f"{grader}.json"
            # The command line's grader has no apiBaseUrl of its own: OPENAI_BASE_URL sends it to the fake server.
            _eval(binary, folder, config, [results], _env(home, server.url), "--grader", f"openai:chat:{grader}")
            out.append(results)
    shutil.rmtree(home, ignore_errors=True)
    return out


def main(argv: list[str] | None = None) -> int:
    """Run every placement's evals with the pinned promptfoo and record their result files."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--promptfoo", type=Path, help="the promptfoo binary (default: $PROMPTFOO, else .ci/node's)")
    args = parser.parse_args(argv)
    binary = args.promptfoo or promptfoo_binary()
    if binary is None:
        print(f"promptfoo is not installed: npm install --prefix .ci/node promptfoo@{PROMPTFOO_VERSION}", file=sys.stderr)
        return 2
    version = subprocess.run([str(binary), "--version"], capture_output=True, text=True, check=False).stdout.strip()
    if version != PROMPTFOO_VERSION:
        print(f"{binary} is promptfoo {version!r}; the tests pin {PROMPTFOO_VERSION}", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as scratch:
        made: list[tuple[Path, Path]] = []
        for where in PLACES:
            made += zip(run_promptfoo(Path(scratch) / where, where=where, binary=binary), recorded(where))
        pairs = run_features(Path(scratch) / "features", binary=binary)
        made += zip([p for pair in pairs for p in pair],
                    [p for pair in zip(recorded_features(), recorded_features(".jsonl")) for p in pair])
        made += zip(run_cli_grader(Path(scratch) / "cli_grader", binary=binary), recorded_cli_grader())
        for source, target in made:
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, target)
            print(f"{target.relative_to(REPO)} ({target.stat().st_size:,} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
