"""Run one of the documented benchmarks and record its JSON output for the Performance page.

    python docs/bench/record.py NAME        # NAME is one of BENCHMARKS below; writes docs/bench/NAME.json

The record holds the benchmark's own JSON document unchanged, the command that made it, the date (UTC), the
machine and its load average, so the page (made by ``docs/_ext/generated.py`` at each build) never carries a
hand-copied figure. Run from the repository root.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shlex
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]

#: name -> (title, what it measures, command after ``python``)
BENCHMARKS = {
    "api_scale_1k": ("Analyses of a 1,000-universe run through the public API",
                     "One fresh process runs load_run, the curve with a joint test per system (B = 1,000), agreement, "
                     "ranking and variance on a run folder of 1,000 universes × 5 systems × 120 cases written as a "
                     "run writes it; seconds are wall time per step (target at 10k: ≤ 10 s; at 100k: ≤ 60 s, ≤ 4 GB).",
                     ["tests/bench/bench_api_scale.py", "--sizes", "1000", "--json"]),
    "store_writes": ("The store's writes next to a plain sqlite3 loop",
                     "Store.put from 8 threads against one sqlite3 connection committing each INSERT of the same "
                     "3,000 records (judgments, answers and every tenth a long transcript), 5 alternated pairs, each "
                     "a fresh process measured over its writes alone: rate, CPU (user + system) and bytes as the "
                     "store's over plain's, median and range (target: rate >= 0.6).",
                     ["tests/bench/bench_store_writes.py", "--rows", "3000", "--pairs", "5", "--json"]),
    "run_cpu": ("A whole run's CPU per request next to litellm's",
                "multiverse run of an audit grid (480 requests, two systems, two judges, 16 jobs) on a fake "
                "OpenAI-compatible server on loopback (50 ms a request), against litellm.completion sending the "
                "same requests from 16 threads; whole processes, start-up included, CPU = user + system; 3 "
                "alternated pairs, each ratio's median and range (target: <= 1.25).",
                ["tests/bench/bench_run_cpu.py", "--cases", "10", "--modes", "run", "litellm", "--pairs", "3",
                 "--json"]),
    "anchoring_scores": ("Anchoring on scores: coverage under simulation",
                         "Coverage of the anchored intervals on ordinal scores over simulated studies with a known truth.",
                         ["tests/bench/bench_anchoring_scores.py", "--reps", "200", "--json"]),
}


def machine() -> str:
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor()) if Path("/proc/cpuinfo").exists() else ""
    return f"{os.cpu_count()} cores ({cpu}), {platform.system()}, Python {platform.python_version()}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("name", choices=sorted(BENCHMARKS))
    name = parser.parse_args().name
    title, what, argv = BENCHMARKS[name]
    load = os.getloadavg()[0]  # before the run: the machine as the benchmark found it
    done = subprocess.run([sys.executable, *argv], cwd=ROOT, capture_output=True, text=True, check=True)
    lines = done.stdout.strip().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(("{", "[")))  # the JSON document
    result = json.loads("\n".join(lines[start:]))
    record = {"title": title, "what": what, "command": shlex.join(["python", *argv]),
              "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
              "machine": machine(), "load": f"{load:.1f}", "result": result}
    (HERE / f"{name}.json").write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    print(f"wrote docs/bench/{name}.json")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
