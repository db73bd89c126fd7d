"""Benchmark: how long building a spec's work units takes.

Not collected by pytest (no test functions). Run from the repository root:

    python tests/bench/bench_work_units.py                          # specs/deception-sim.yaml
    python tests/bench/bench_work_units.py --spec specs/demo.yaml --repeat 5

Loads the spec once, then times ``multiverse.work._units.build_work`` over the
spec's whole grid (``expand`` is timed separately) and prints the seconds,
the numbers of unique units and rows, and a digest of every key, so two
versions of the code can be compared for both speed and keys.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from multiverse.spec import load_spec  # noqa: E402
from multiverse.spec._grid import expand  # noqa: E402
from multiverse.work._units import build_work  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spec", default=str(ROOT / "specs" / "deception-sim.yaml"))
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    spec = load_spec(args.spec)
    started = time.perf_counter()
    universes = expand(spec)
    print(f"expand: {time.perf_counter() - started:.2f} s, {len(universes)} universes")
    times = []
    for _ in range(args.repeat):
        started = time.perf_counter()
        work = build_work(spec, universes)
        times.append(time.perf_counter() - started)
    keys = hashlib.sha256()
    for row in work.rows:
        keys.update(f"{row.case_key} {row.transcript_key} {row.judgment_key} {' '.join(row.judge_calls)}\n".encode())
    print(f"build_work: best {min(times):.2f} s, worst {max(times):.2f} s over {args.repeat} runs")
    print(f"units: {len(work.cases)} cases, {len(work.transcripts)} transcripts, {len(work.judge_calls)} judge calls; "
          f"{len(work.rows)} rows")
    print(f"keys digest: {keys.hexdigest()[:16]}")


if __name__ == "__main__":
    main()
