"""Benchmark: the analyses of a run at 1k, 10k and 100k universes.

Not collected by pytest (no test functions). Run from the repository root:

    python tests/bench/bench_scale.py                          # 1k and 10k universes, both grids
    python tests/bench/bench_scale.py --sizes 100000           # the big one
    python tests/bench/bench_scale.py --json                   # one JSON document on stdout

Two grids per size (``--grids``):

- ``full``: N universes x 5 systems x 120 cases, one verdict each;
- ``exclusions``: the same axes minus one exclude rule (setting_1 x user_4, a
  tenth of the universes), 60 cases x 2 replicates (the same rows per
  universe), and a criteria table (3 criteria per judgment) that the agreement
  step uses.

The tables are written as a run writes them to parquet (string columns, as
``tables.write_table`` writes them; not its CSV copy, which ``load_run`` does
not read when the parquet is there) into a folder with a ``manifest.json``
(axes, factors, primary), and each step loads that folder with
``multiverse.load_run``, as every analysis of a run does. ``scale_tables``
describes the synthetic tables (their columns, keys and random structure) and
builds them a block of universes at a time, so the builder needs about 1 GB
whatever the size (``--json`` gives its time and peak under ``build``).

Each step runs in a fresh child process that loads the tables (written once
per size and grid by a builder child) and then runs one step:

- rates: ``multiverse.analysis.rates.compute_rates`` (per universe x system,
  overall and per factor level, Wilson intervals);
- curve: ``case_matrix``, ``spec_curve`` (all systems), ``difference_curve``,
  ``joint_rate_test`` and ``joint_difference_test``, each with B=1000;
- agreement: ``multiverse.analysis.agreement.agreement`` on the judge axis
  (per criterion too, where the grid has a criteria table);
- ranking: ``multiverse.analysis.ranking.ranking`` with bootstrap=1000 on the
  primary universe;
- variance: ``multiverse.analysis.variance.variance``.

Time is the step's wall time (the table load is not counted; ``--json`` gives it as
``load_seconds``, and the resident set after loading as ``before_gb``), and the CPU
time (user + system) the child spent in it: on a shared machine the wall time
includes waiting for a core; system time is mostly page faults of fresh
allocations. Memory is the
child's peak resident set (``ru_maxrss``): the loaded table plus everything
the step allocated; the step's own increment is the peak sampled during the
step minus the resident set just before it.
"""

from __future__ import annotations

import argparse
import ctypes
import gc
import itertools
import json
import os
import platform
import resource
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from scale_tables import GRIDS, grid_axes, write_grid  # noqa: E402  (beside this file, not a package)

STEPS = ("rates", "curve", "agreement", "ranking", "variance")
BOOT = 1000

# -- one step in a child process ----------------------------------------------------


def _rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _maxrss() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _trim() -> None:
    # Give freed heap back to the OS so the resident set before a step is the table.
    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except OSError:
        pass


class PeakRSS:
    """Peak resident set while the block runs, sampled every 5 ms."""

    def __enter__(self):
        self.start = self.peak = _rss()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def _sample(self):
        while not self._stop.wait(0.005):
            self.peak = max(self.peak, _rss())

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, _rss())


def _step(name: str, verdicts, criteria, axes, factors, primary) -> tuple[dict, str]:
    """Run one step; returns (sub-step seconds, a one-line summary of the result)."""
    parts: dict[str, float] = {}

    def timed(label, thunk):
        t = time.perf_counter()
        out = thunk()
        parts[label] = time.perf_counter() - t
        return out

    if name == "rates":
        from multiverse.analysis import compute_rates

        rates = timed("compute_rates", lambda: compute_rates(verdicts, axes=axes, factors=factors))
        return parts, f"{len(rates):,} rate rows"
    if name == "curve":
        from multiverse.analysis import (
            case_matrix,
            difference_curve,
            joint_difference_test,
            joint_rate_test,
            spec_curve,
        )

        m = timed("case_matrix", lambda: case_matrix(verdicts, axes=axes))
        curve = timed("spec_curve", lambda: spec_curve(m, axes=axes, primary=primary))
        diff = timed("difference_curve", lambda: difference_curve(m, axes=axes, a="system_4", b="system_0"))
        rate = timed(f"joint_rate_test B={BOOT}",
                     lambda: joint_rate_test(m, system="system_0", threshold=0.7, boot=BOOT))
        dtest = timed(f"joint_difference_test B={BOOT}",
                      lambda: joint_difference_test(m, a="system_4", b="system_0", boot=BOOT))
        return parts, (f"{len(curve):,} curve rows, {len(diff):,} difference rows; "
                       f"rate p={rate.p['stouffer_z']:.3g}, difference p={dtest.p['stouffer_z']:.3g}")
    if name == "agreement":
        from multiverse.analysis import agreement

        result = timed("agreement", lambda: agreement(verdicts, axes=axes, axis="judge", criteria=criteria))
        per_criterion = f", {len(result.get('per_criterion') or [])} per-criterion rows" if criteria is not None else ""
        return parts, (f"{len(result['pairs'])} judge pairs on {result['n_units']:,} units "
                       f"({result['paired_on']}), alpha {result['krippendorff_alpha']:.3f}{per_criterion}")
    if name == "ranking":
        from multiverse.analysis import ranking

        result = timed("ranking", lambda: ranking(verdicts, axes=axes, primary=primary, bootstrap=BOOT))
        return parts, f"W {result['kendall_w']['w']:.3f}, {len(result['flips']):,} flips, {len(result['bootstrap'])} bootstrap rows"
    if name == "variance":
        from multiverse.analysis import variance

        result = timed("variance", lambda: variance(verdicts, axes=axes))
        return parts, f"{len(result['terms'])} terms; {result['summary'][0] if result['summary'] else ''}"
    raise SystemExit(f"unknown step {name!r}")


def child(args) -> None:
    folder = Path(args.table)
    if args.child == "build":
        t = time.perf_counter()
        built = write_grid(folder, args.size, grid=args.grid)
        print(json.dumps({**built, "seconds": time.perf_counter() - t, "maxrss": _maxrss()}))
        return
    import numpy as np  # noqa: F401  (imported before the measurement)
    import pandas as pd  # noqa: F401

    from multiverse import load_run

    t = time.perf_counter()
    results = load_run(folder)
    verdicts, criteria = results.verdicts, results.criteria
    axes, factors, primary = results.axes, results.factors, results.primary
    del results
    load = time.perf_counter() - t
    _step_imports(args.child)
    _trim()
    before = resource.getrusage(resource.RUSAGE_SELF)
    with PeakRSS() as memory:
        t = time.perf_counter()
        parts, summary = _step(args.child, verdicts, criteria, axes, factors, primary)
        seconds = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_SELF)
    user, system = after.ru_utime - before.ru_utime, after.ru_stime - before.ru_stime
    print(json.dumps({"seconds": seconds, "user": user, "system": system, "parts": parts, "summary": summary, "load": load,
                      "rss_before": memory.start, "rss_peak": memory.peak, "maxrss": _maxrss()}))


def _step_imports(name: str) -> None:
    # Import the modules before the clock starts: import time is not analysis time.
    import multiverse.analysis.agreement
    import multiverse.analysis.curve
    import multiverse.analysis.inference
    import multiverse.analysis.ranking
    import multiverse.analysis.rates
    import multiverse.analysis.variance  # noqa: F401


# -- the parent --------------------------------------------------------------------


def _run_child(argv: list[str]) -> dict:
    proc = subprocess.run([sys.executable, __file__, *argv], check=False, capture_output=True, text=True)
    if proc.returncode != 0:
        tail = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
        killed = " (killed: out of memory?)" if proc.returncode < 0 else ""
        return {"error": f"exit {proc.returncode}{killed}: {tail}"}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _gb(n: float) -> str:
    return f"{n / 2**30:6.2f} GB"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000],
                        help="universe counts: 1000, 10000, 100000 (default 1000 10000)")
    parser.add_argument("--steps", nargs="+", choices=STEPS, default=list(STEPS))
    parser.add_argument("--grids", nargs="+", choices=list(GRIDS), default=list(GRIDS))
    parser.add_argument("--json", action="store_true", help="print one JSON document on stdout (the rest goes to stderr)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--size", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--grid", choices=list(GRIDS), help=argparse.SUPPRESS)
    parser.add_argument("--table", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args)
        return 0
    stdout = sys.stdout
    if args.json:
        sys.stdout = sys.stderr  # the human-readable report; the JSON alone goes to stdout

    command = " ".join(shlex.quote(a) for a in [sys.executable, *sys.argv])
    print(f"command: {command}   (cwd {os.getcwd()})")
    import numpy as np
    import pandas as pd

    machine = (f"{os.cpu_count()} cores, {platform.platform()}, python {platform.python_version()}, "
               f"numpy {np.__version__}, pandas {pd.__version__}, "
               f"{os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') / 2**30:.0f} GB RAM")
    date = datetime.now(timezone.utc).isoformat(timespec="seconds")
    print(f"machine: {machine}")
    print(f"date: {date}; load average at start {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"tables written with string columns and loaded with multiverse.load_run; "
          f"B={BOOT} for the joint tests and the rank bootstrap")

    results: dict[tuple[int, str], dict] = {}
    with tempfile.TemporaryDirectory(prefix="bench-scale-") as tmp:
        for size in args.sizes:
            grid_axes(size)
            for grid in args.grids:
                folder = Path(tmp) / f"{grid}-{size}"
                folder.mkdir()
                common = ["--size", str(size), "--grid", grid, "--table", str(folder)]
                results[size, grid] = _one_grid(size, grid, common, args.steps)
                shutil.rmtree(folder)

    sizes = sorted({size for size, _ in results})
    full = {size: results[size, "full"] for size in sizes if (size, "full") in results}
    if len(full) > 1:
        print("\ngrowth, full grid (time ratio / peak-memory ratio between consecutive sizes; rows grow 10x):")
        done = sorted(size for size, r in full.items() if "steps" in r)
        for small, big in itertools.pairwise(done):
            line = []
            for step in args.steps:
                a, b = full[small]["steps"].get(step, {}), full[big]["steps"].get(step, {})
                if "seconds" in a and "seconds" in b:
                    line.append(f"{step} {b['seconds'] / max(a['seconds'], 1e-9):.1f}x/{b['maxrss'] / a['maxrss']:.1f}x")
            ratio = full[big]["total"] / max(full[small]["total"], 1e-9)
            print(f"  {big // 1000}k / {small // 1000}k: total {ratio:.1f}x wall time, "
                  f"{full[big]['peak'] / max(full[small]['peak'], 1):.1f}x memory; " + ", ".join(line))

    print()
    for (size, grid), r in sorted(results.items()):
        if "steps" not in r or size not in (10000, 100000):
            continue
        # The targets (issue 17): 100k in 30 s and 4 GB; 10k in 60 s (README) and 1.2 GB.
        seconds_target, memory_target = (30, 4) if size == 100000 else (60, 1.2)
        ok = not r["failed"] and r["total"] <= seconds_target and r["peak"] <= memory_target * 2**30
        print(f"{'PASS' if ok else 'MISS'}  {size:,} universes, {grid} grid: {r['total']:.1f} s "
              f"(target {seconds_target} s), peak {r['peak'] / 2**30:.2f} GB (target {memory_target} GB)")

    if args.json:
        document: dict = {"command": command, "date": date, "machine": machine,
                          "loaded_with": "multiverse.load_run", "sizes": {}}
        for (size, grid), r in sorted(results.items(), key=lambda kv: (kv[0][0], kv[0][1] != "full")):
            entry = _json_entry(r)
            if grid == "full":
                document["sizes"].setdefault(str(size), {}).update(entry)
            else:
                document["sizes"].setdefault(str(size), {}).setdefault("grids", {})[grid] = entry
        print(json.dumps(document, indent=1), file=stdout)
    return 0


def _one_grid(size: int, grid: str, common: list[str], steps_wanted: list[str]) -> dict:
    """Build one grid's tables, run each step in its own child; print and return the results."""
    built = _run_child(["--child", "build", *common])
    if "error" in built:
        print(f"\n{size:,} universes, {grid} grid: building the tables failed: {built['error']}")
        return {"error": built["error"]}
    criteria = f", criteria {built['criteria_rows']:,} rows" if built["criteria_rows"] else ""
    print(f"\n{size:,} universes, {grid} grid ({built['universes']:,} universes kept): {built['rows']:,} verdict rows, "
          f"{built['transcripts']:,} transcripts, {built['judgments']:,} judgments{criteria}; "
          f"table {_gb(built['table_bytes']).strip()} as Arrow text (built in {built['seconds']:.1f} s, "
          f"builder peak {_gb(built['maxrss']).strip()})")
    print(f"  {'step':<34}{'seconds':>9}{'cpu user+sys':>14}{'child peak RSS':>16}{'step increment':>16}   result")
    steps = {}
    for step in steps_wanted:
        r = _run_child(["--child", step, *common])
        steps[step] = r
        if "error" in r:
            print(f"  {step:<34}  FAILED {r['error']}")
            continue
        print(f"  {step:<34}{r['seconds']:9.2f}{r['user']:7.1f}+{r['system']:<6.1f}{_gb(r['maxrss']):>16}"
              f"{_gb(r['rss_peak'] - r['rss_before']):>16}   {r['summary']}")
        if len(r["parts"]) > 1:
            for part, seconds in r["parts"].items():
                print(f"    {part:<32}{seconds:9.2f}")
    done = [r for r in steps.values() if "error" not in r]
    total = sum(r["seconds"] for r in done)
    peak = max((r["maxrss"] for r in done), default=0)
    cpu_user, cpu_system = sum(r["user"] for r in done), sum(r["system"] for r in done)
    print(f"  {'total':<34}{total:9.2f}{cpu_user:7.1f}+{cpu_system:<6.1f}{_gb(peak):>16}   (peak = largest child; "
          f"load average now {os.getloadavg()[0]:.2f})")
    return {"built": built, "total": total, "peak": peak, "steps": steps, "failed": len(done) < len(steps)}


def _json_entry(r: dict) -> dict:
    if "steps" not in r:
        return {"error": r["error"]}
    steps = {}
    for name, step in r["steps"].items():
        if "error" in step:
            steps[name] = {"error": step["error"]}
        else:
            steps[name] = {"seconds": round(step["seconds"], 3), "peak_gb": round(step["maxrss"] / 2**30, 3),
                           "load_seconds": round(step["load"], 2),
                           "before_gb": round(step["rss_before"] / 2**30, 3),
                           "cpu_seconds": round(step["user"] + step["system"], 2),
                           "parts": {k: round(v, 3) for k, v in step["parts"].items()}, "result": step["summary"]}
    built = r["built"]
    return {"rows": built["rows"], "universes": built["universes"], "criteria_rows": built["criteria_rows"],
            "seconds": round(r["total"], 2), "peak_gb": round(r["peak"] / 2**30, 3), "steps": steps,
            "build": {"seconds": round(built["seconds"], 2), "peak_gb": round(built["maxrss"] / 2**30, 3)}}


if __name__ == "__main__":
    sys.exit(main())
