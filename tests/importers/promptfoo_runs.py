"""Genuine promptfoo results for the importer's tests: small evals run against the fake server, recorded.

promptfoo's npm install compiles a native SQLite module from source (15 minutes on a loaded 2-core
machine), so CI does not install it: the tests read what the pinned version wrote, recorded under
``promptfoo_results/`` by this module run as a script::

    npm install --prefix .ci/node promptfoo@0.119.0     # once; PROMPTFOO names another binary
    python tests/importers/promptfoo_runs.py             # records every placement, in place

Each placement of the grader (``defaultTest``, the ``test``'s options, the ``assertion``'s provider)
is one pair of evals, graded by grader-a and then grader-b: ``promptfoo_results/grader-*.json`` for
``defaultTest``, ``promptfoo_results/<placement>/grader-*.json`` for the others. The files are kept
as promptfoo wrote them (ids, timestamps and the fake server's loopback port change between
recordings, nothing the importer reads does).

Both the system and the graders are ``openai:chat:...`` providers whose ``apiBaseUrl`` is the fake
server on loopback; the graders answer ``llm-rubric`` in promptfoo's JSON (``pass``, ``score``,
``reason``), deterministically from the grader's name and the answer, so two graders disagree on
some. Telemetry, update checks and the cache are off, and promptfoo's home is the eval's folder.
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

__all__ = ["GRADERS", "PLACES", "PROMPTFOO_VERSION", "RECORDED", "promptfoo_binary", "recorded", "run_promptfoo"]

# 0.120.0 looks for its database migrations in the wrong folder and stops at start; 0.121+ needs Node 22.
PROMPTFOO_VERSION = "0.119.0"
REPO = Path(__file__).resolve().parents[2]
RECORDED = Path(__file__).resolve().parent / "promptfoo_results"
#: Where an eval names its grader: promptfoo takes the assertion's provider, else the test's, else defaultTest's.
PLACES = ("defaultTest", "test", "assertion")
GRADERS = ("grader-a", "grader-b")
TESTS = [("What is 2 plus 2?", "arithmetic"), ("Name a colour.", "words"), ("What is 3 plus 3?", "arithmetic"),
         ("Name an animal.", "words"), ("Spell 'cat' backwards.", "words")]


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


def _grade(body: dict) -> str:
    text = "\n".join(m["content"] for m in body["messages"] if isinstance(m.get("content"), str))
    if "rubric" not in text.lower():
        question = text.strip().splitlines()[-1]
        return f"Here is my answer to {question!r}: {sum(map(ord, question)) % 10}."
    model = str(body.get("model"))
    verdict = (sum(map(ord, text)) + sum(map(ord, model))) % 3 != 0
    return json.dumps({"reason": f"{model}: the output {'meets' if verdict else 'misses'} the rubric",
                       "pass": verdict, "score": 1.0 if verdict else 0.0})


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


def run_promptfoo(folder: Path, graders=GRADERS, *, where: str = "defaultTest",
                  binary: Path | None = None) -> list[Path]:
    """One ``promptfoo eval`` per grader (named in ``where``: defaultTest, test or assertion); the result files."""
    binary = binary or promptfoo_binary()
    assert binary is not None, "promptfoo is not installed"
    folder.mkdir(parents=True, exist_ok=True)
    home = folder / "home"
    home.mkdir(exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI", "PROMPTFOO"))}
    env.update(HOME=str(home), PROMPTFOO_CONFIG_DIR=str(home / ".promptfoo"), PROMPTFOO_DISABLE_TELEMETRY="1",
               PROMPTFOO_DISABLE_UPDATE="1", PROMPTFOO_CACHE_ENABLED="false", PROMPTFOO_DISABLE_SHARING="1",
               PROMPTFOO_DISABLE_REMOTE_GENERATION="true", PROMPTFOO_SELF_HOSTED="1", OPENAI_API_KEY="sk-local",
               NO_COLOR="1")
    out = []
    with FakeServer(responder=_grade) as server:
        for grader in graders:
            config = folder / f"{grader}.yaml"
            config.write_text(yaml.safe_dump(_config(server.url, grader, where), sort_keys=False))
            results = folder / f"{grader}.json"
            done = subprocess.run([str(binary), "eval", "-c", str(config), "-o", str(results), "--no-cache",
                                   "--no-progress-bar", "--no-table"], cwd=folder, env=env,
                                  capture_output=True, text=True, timeout=300, check=False)
            # promptfoo exits 100 when an assertion failed: that is a result, not an error.
            assert done.returncode in (0, 100) and results.is_file(), (done.returncode, done.stdout[-2000:],
                                                                       done.stderr[-2000:])
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
        for where in PLACES:
            made = run_promptfoo(Path(scratch) / where, where=where, binary=binary)
            for source, target in zip(made, recorded(where)):
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(source, target)
                print(f"{where}: {target.relative_to(REPO)} ({target.stat().st_size:,} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
