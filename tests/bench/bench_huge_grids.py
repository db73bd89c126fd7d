"""Benchmark: huge grids counted, sampled, planned and capped without listing them (issue 17 item 5).

Not collected by pytest. Grids of 10^6, 10^8 and 10^12 combinations (6, 8 and
12 axes of 10 options, each option a distinct system parameter, so every
combination is a distinct universe) with two exclusion rules. Each step runs
in a fresh process, so its peak resident memory (``ru_maxrss``: the
interpreter, pandas and the spec included) is its own; ``traced`` is the
peak Python allocation of the step itself (tracemalloc).

Steps: ``count`` (``expand --count`` of the unsampled grid: exact count with
exclusions), ``validate`` and ``expand`` of a 50-universe random sample,
``lhs`` (a 50-universe Latin hypercube), ``sparse`` (exclusions that keep
10^-5 of the grid: a random sample drawn by rank among the kept universes),
``plan`` of the random sample, and ``refuse`` (``run --max-units 10`` of the
sample: counted and refused before any call).

Reproduce:  python tests/bench/bench_huge_grids.py [--sizes 6 8 12] [--json]
Targets:    every step at every size in constant memory: peak RSS within a
            few MB of the 10^6 grid's, and seconds, not minutes.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
import tracemalloc
from datetime import datetime, timezone
from pathlib import Path

import yaml

TESTS = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(TESTS.parent))
sys.path.insert(0, str(TESTS))

STEPS = ("count", "validate", "expand", "lhs", "sparse", "plan", "refuse")


def _axes(n_axes: int) -> dict:
    return {f"a{i}": {f"o{j}": {f"systems.atlas.params.p{i}": j} for j in range(10)} for i in range(n_axes)}


def _spec(folder: Path, n_axes: int, step: str) -> Path:
    from conftest import tiny_spec_document

    exclude: list = [{"a0": "o1", "a1": ["o1", "o2"]}, {"a2": "o3", "a3": "o3"}]
    sample: dict | None = {"n": 50, "method": "lhs" if step == "lhs" else "random", "seed": 0}
    if step == "count":
        sample = None
    if step == "sparse":
        # a0..a4 must be o0: 10^-5 of the grid is kept.
        exclude = [{f"a{i}": [f"o{j}" for j in range(1, 10)]} for i in range(5)]
    document = tiny_spec_document(axes=_axes(n_axes), exclude=exclude, **({"sample": sample} if sample else {}))
    path = folder / "spec.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


def child(n_axes: int, step: str) -> None:
    import multiverse as mv
    from multiverse.cli import main

    with tempfile.TemporaryDirectory() as tmp:
        spec_path = _spec(Path(tmp), n_axes, step)
        out = io.StringIO()

        def cli(*argv) -> int:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
                return main([str(a) for a in argv])

        actions = {
            "count": lambda: cli("expand", spec_path, "--count", "--format", "json"),
            "validate": lambda: cli("validate", spec_path),
            "expand": lambda: len(mv.expand(mv.load_spec(spec_path))),
            "lhs": lambda: len(mv.expand(mv.load_spec(spec_path))),
            "sparse": lambda: len(mv.expand(mv.load_spec(spec_path))),
            "plan": lambda: mv.plan(mv.load_spec(spec_path), store=Path(tmp) / "store").stages["rollout"].units,
            "refuse": lambda: cli("run", spec_path, "--store", Path(tmp) / "store", "--out", Path(tmp) / "run",
                                  "--max-units", "10"),
        }
        tracemalloc.start()
        started = time.perf_counter()
        result = actions[step]()
        seconds = time.perf_counter() - started
        traced = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        if step == "count":
            result = json.loads(out.getvalue())["kept"]
        elif step == "refuse":
            result = out.getvalue().strip()
    print(json.dumps({"seconds": seconds, "traced_mb": traced / 2**20,
                      "maxrss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, "result": result}))


def measure(n_axes: int, step: str) -> dict:
    env = {**os.environ, "PYTHONPATH": str(TESTS.parent), "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    proc = subprocess.run([sys.executable, __file__, "--child", step, "--size", str(n_axes)],
                          capture_output=True, text=True, env=env, check=False)
    if proc.returncode:
        raise SystemExit(f"step {step} at 10^{n_axes} failed:\n{proc.stderr}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[6, 8, 12], help="axes of 10 options: 10^N combinations")
    parser.add_argument("--steps", nargs="+", choices=STEPS, default=list(STEPS))
    parser.add_argument("--json", action="store_true", help="print one JSON document on stdout")
    parser.add_argument("--child", choices=STEPS, help=argparse.SUPPRESS)
    parser.add_argument("--size", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.size, args.child)
        return
    date = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    load = os.getloadavg()
    log = sys.stderr if args.json else sys.stdout
    print(f"# python tests/bench/bench_huge_grids.py --sizes {' '.join(map(str, args.sizes))}", file=log)
    print(f"date: {date}; load average at start {' '.join(f'{x:.2f}' for x in load)}", file=log)
    print(f"{'grid':>7}  {'step':<9} {'seconds':>8} {'traced MB':>10} {'peak RSS MB':>12}  result", file=log)
    document: dict = {"date": date, "load": list(load), "sizes": {}}
    for n_axes in args.sizes:
        entry = document["sizes"].setdefault(str(10**n_axes), {})
        for step in args.steps:
            r = measure(n_axes, step)
            entry[step] = r
            shown = r["result"] if not isinstance(r["result"], int) else f"{r['result']:,}"
            print(f"{'10^' + str(n_axes):>7}  {step:<9} {r['seconds']:8.2f} {r['traced_mb']:10.1f} {r['maxrss_mb']:12.0f}  "
                  f"{str(shown)[:90]}", file=log)
    print(f"load average at end {os.getloadavg()[0]:.2f}", file=log)
    if args.json:
        print(json.dumps(document, indent=1))


if __name__ == "__main__":
    main()
