"""Benchmark of the paths that must stay quick (not collected by pytest).

The unit tests check what these paths do (a huge spec is refused, a sample of a
billion universes is drawn without listing them, rates and scores come out
right, a simulated reply is well formed); this script times them, since a
timed assertion in a unit test fails on a busy machine and passes on a slow
regression. Each line prints the seconds taken and the target.

Reproduce:  python tests/bench/bench_quick_paths.py
Targets:    each refusal by ``validate`` < 10 s; expanding a 10-universe sample of a
            10^9-universe grid < 10 s; rates of 600k verdicts < 10 s; scoring 1M
            criteria rows < 10 s; one simulated model call < 5 ms (2 cores).
"""

from __future__ import annotations

import contextlib
import io
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

TESTS = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(TESTS.parent))
sys.path.insert(0, str(TESTS))

from conftest import tiny_spec_document  # noqa: E402

from multiverse.cli import main  # noqa: E402


def _line(what: str, seconds: float, target: float, unit: str = "s") -> None:
    shown = seconds * 1000 if unit == "ms" else seconds
    goal = target * 1000 if unit == "ms" else target
    verdict = "ok" if seconds < target else "OVER TARGET"
    print(f"{what:<58} {shown:9.3f} {unit}   target < {goal:g} {unit}   {verdict}")


def _timed(fn) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def _quiet_main(argv: list[str]) -> int:
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        return main(argv)


def _huge_grid(n_axes: int = 9, n_options: int = 10) -> dict:
    return {f"a{i}": {f"o{j}": {f"systems.atlas.params.p{i}": j} for j in range(n_options)} for i in range(n_axes)}


def refusals(folder: Path) -> None:
    sizes = [("design.cases_per_cell", 10**9), ("rollout.replicates", 10**9), ("judge.samples", 10**6),
             ("scoring.ci.n_boot", 10**9), ("rollout.max_turns", 10**12)]
    for path, value in sizes:
        document = tiny_spec_document()
        node = document
        *parents, last = path.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[last] = value
        spec = folder / "spec.yaml"
        spec.write_text(yaml.safe_dump(document))
        _line(f"validate refuses {path} = {value:.0e}", _timed(lambda spec=spec: _quiet_main(["validate", str(spec)])), 10)
    spec = folder / "grid.yaml"
    spec.write_text(yaml.safe_dump(tiny_spec_document(axes=_huge_grid())))
    _line("validate refuses 10^9 universes without a sample", _timed(lambda spec=spec: _quiet_main(["validate", str(spec)])), 10)
    deep = folder / "deep.yaml"
    deep.write_text("[" * 20_000 + "]" * 20_000)
    _line("validate refuses 20,000-deep YAML nesting", _timed(lambda: _quiet_main(["validate", str(deep)])), 20)


def billion_sample(folder: Path) -> None:
    from multiverse.spec import load_spec
    from multiverse.spec._grid import expand

    for method in ("random", "lhs"):
        document = tiny_spec_document(axes=_huge_grid(), primary={f"a{i}": "o3" for i in range(9)},
                                      sample={"n": 10, "method": method, "seed": 4})
        spec = folder / f"{method}.yaml"
        spec.write_text(yaml.safe_dump(document))
        loaded = load_spec(spec)
        _line(f"expand a {method} sample of 10 from 10^9 universes", _timed(lambda loaded=loaded: expand(loaded)), 10)


def rates_and_scores() -> None:
    from multiverse.analysis import compute_rates, score_verdicts

    rng = np.random.default_rng(0)
    universes, systems, cases = 1000, 5, 120
    n = universes * systems * cases
    verdicts = pd.DataFrame({
        "universe_id": np.repeat([f"u{i}" for i in range(universes)], systems * cases),
        "system": np.tile(np.repeat([f"s{i}" for i in range(systems)], cases), universes),
        "case_id": np.tile([f"c{i}" for i in range(cases)], universes * systems),
        "behavior": np.tile([f"b{i % 6}" for i in range(cases)], universes * systems),
        "status": "ok",
        "compliant": pd.array(rng.random(n) < 0.7, dtype="boolean"),
        "judge": "j",
    })
    _line(f"rates of {n:,} verdicts (by behaviour too)",
          _timed(lambda: compute_rates(verdicts, axes=["judge"], factors=["behavior"])), 10)
    judgments = 100_000
    criteria = pd.DataFrame({
        "judgment_key": np.repeat([f"k{i}" for i in range(judgments)], 10),
        "sample": 0,
        "criterion": np.tile([f"x{i}" for i in range(10)], judgments),
        "permissible": np.tile([False] * 6 + [True] * 4, judgments),
        "applicable": rng.random(judgments * 10) < 0.3,
        "compliant": pd.array(rng.random(judgments * 10) < 0.9, dtype="boolean"),
    })
    samples = pd.DataFrame({"judgment_key": [f"k{i}" for i in range(judgments)], "sample": 0, "status": "ok"})
    _line(f"score {judgments * 10:,} criteria rows (all_applicable)",
          _timed(lambda: score_verdicts(criteria, samples, "all_applicable")), 10)


def sim_calls() -> None:
    from multiverse.sim import load_world, respond

    world = load_world("deception")
    behaviour = next(c.id for c in world.criteria.values() if not c.permissible)
    criteria = [{"id": c.id, "permissible": c.permissible} for c in world.criteria.values()]

    def task(kind: str, **fields) -> str:
        return "TASK: " + json.dumps({"kind": kind, **fields}, sort_keys=True)

    cell = {"behavior": behaviour, "interaction_condition": next(iter(world.conditions))}
    draft = [{"role": "user", "content": "Answer with JSON only.\n" + task(
        "draft_case", cell=cell, index=0, tools=False,
        criterion={"id": behaviour, "name": behaviour, "definition": "", "permissible": False})}]
    case = json.loads(respond("sim/generator", draft, seed=0).text)
    reply = respond("sim/atlas", [{"role": "user", "content": case["prompt"]}], seed=0).text
    judge = [{"role": "user", "content": f"Transcript:\nUSER: {case['prompt']}\nASSISTANT: {reply}\n"
                                         + task("judge", criteria=criteria, evidence_standard="strict")}]
    calls = 400

    def both() -> None:
        for seed in range(calls // 2):
            respond("sim/judge-a", judge, seed=seed)
            respond("sim/atlas", [{"role": "user", "content": case["prompt"]}], seed=seed)

    _line("one simulated model call (target and judge, mean)", _timed(both) / calls, 0.005, unit="ms")


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as folder:
        refusals(Path(folder))
        billion_sample(Path(folder))
    rates_and_scores()
    sim_calls()
