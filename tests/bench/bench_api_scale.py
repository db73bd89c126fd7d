"""Benchmark: a notebook user's analyses of a 1k, 10k or 100k-universe run, load included.

Not collected by pytest (no test functions). Run from the repository root:

    python tests/bench/bench_api_scale.py                      # 10k universes, full grid
    python tests/bench/bench_api_scale.py --sizes 1000 10000 100000 --json

``scale_tables.write_grid`` writes a run folder as a run writes it (N
universes x 5 systems x 120 cases, parquet tables and a manifest); then one
fresh child process does what a user does in a notebook, through the public
API only, and the clock runs from before ``load_run`` to the last result:

    results = mv.load_run(folder)
    results.curve(threshold="primary")     # the curve, a joint rate test for every system (B = 1000)
    results.agreement(axis="judge")
    results.ranking()                      # bootstrap rank intervals, B = 1000
    results.variance()

Printed per step: wall seconds and CPU seconds (user + system; on a shared
machine the wall time includes waiting for a core); then the total and the
child's peak resident set (``ru_maxrss``: the loaded tables plus everything
every step allocated). ``--cli`` runs the same four analyses as four
``multiverse`` commands instead (each a fresh process, as a user at a shell),
each with its own peak resident set (target: each at most 4 GB at 100k).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(Path(__file__).resolve().parent))

from scale_tables import GRIDS, grid_axes, write_grid  # noqa: E402  (beside this file, not a package)

STEPS = ("load_run", "curve", "agreement", "ranking", "variance")
TARGETS = {10000: 10.0, 100000: 60.0}  # seconds (issue 30); memory: 4 GB at 100k


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def api_child(folder: str) -> None:
    import multiverse as mv

    steps: dict[str, dict] = {}
    results = None

    def timed(name, thunk):
        wall, cpu = time.perf_counter(), _cpu()
        out = thunk()
        steps[name] = {"seconds": round(time.perf_counter() - wall, 3), "cpu_seconds": round(_cpu() - cpu, 2)}
        return out

    start = time.perf_counter()
    results = timed("load_run", lambda: mv.load_run(folder))
    curve = timed("curve", lambda: results.curve(threshold="primary"))
    agreement = timed("agreement", lambda: results.agreement(axis="judge"))
    ranking = timed("ranking", lambda: results.ranking())
    variance = timed("variance", lambda: results.variance())
    total = time.perf_counter() - start
    tests = curve.source["tests"]
    stouffer = ", ".join(f"{t['statistics']['stouffer_z']['p']:.3g}" for t in tests)
    summary = (f"{len(curve.frame):,} curve rows, {len(tests)} joint tests (Stouffer p {stouffer}); "
               f"{len(agreement.frame)} judge pairs; W {ranking.source['kendall_w']['w']:.3f}; "
               f"{len(variance.frame)} variance terms")
    print(json.dumps({"steps": steps, "seconds": round(total, 3), "cpu_seconds": round(_cpu(), 2),
                      "peak_gb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, 3),
                      "summary": summary}))


def cli_child(folder: str) -> dict:
    """The same analyses as four commands, each its own process (as a user at a shell runs them)."""
    steps = {}
    for name, argv in (("curve", ["curve", folder, "--threshold", "primary", "--json"]), ("agreement", ["agreement", folder, "--json"]),
                       ("ranking", ["ranking", folder, "--json"]), ("variance", ["variance", folder, "--json"])):
        started = time.perf_counter()
        with tempfile.TemporaryFile() as err:
            proc = subprocess.Popen([sys.executable, "-c", "import sys; from multiverse.cli import main; sys.exit(main())", *argv],
                                    stdout=subprocess.DEVNULL, stderr=err, env={**os.environ, "PYTHONPATH": str(ROOT)})
            # The command's own usage (wait4): its peak resident set, not the largest of all children so far.
            _, status, usage = os.wait4(proc.pid, 0)
            if os.waitstatus_to_exitcode(status) != 0:
                err.seek(0)
                last = (err.read().decode(errors="replace").strip().splitlines() or [""])[-1]
                return {"error": f"{name}: exit {os.waitstatus_to_exitcode(status)}: {last}"}
        steps[name] = {"seconds": round(time.perf_counter() - started, 3),
                       "cpu_seconds": round(usage.ru_utime + usage.ru_stime, 2),
                       "peak_gb": round(usage.ru_maxrss / 2**20, 3)}
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return {"steps": steps, "seconds": round(sum(s["seconds"] for s in steps.values()), 3),
            "peak_gb": round(usage.ru_maxrss / 2**20, 3)}


def _child(argv: list[str]) -> dict:
    proc = subprocess.run([sys.executable, __file__, *argv], capture_output=True, text=True, check=False,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    if proc.returncode != 0:
        tail = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
        return {"error": f"exit {proc.returncode}{' (killed: out of memory?)' if proc.returncode < 0 else ''}: {tail}"}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10000], help="universes: 1000, 10000, 100000")
    parser.add_argument("--grid", choices=list(GRIDS), default="full")
    parser.add_argument("--cli", action="store_true", help="also run the four analyses as four commands")
    parser.add_argument("--keep", type=Path, help="write the run folders here and keep them (default: a temporary folder)")
    parser.add_argument("--json", action="store_true", help="one JSON document on stdout (the rest on stderr)")
    parser.add_argument("--child", choices=["build", "api", "cli"], help=argparse.SUPPRESS)
    parser.add_argument("--folder", help=argparse.SUPPRESS)
    parser.add_argument("--size", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child == "build":
        started = time.perf_counter()
        built = write_grid(Path(args.folder), args.size, grid=args.grid)
        print(json.dumps({**built, "seconds": round(time.perf_counter() - started, 2)}))
        return 0
    if args.child == "api":
        api_child(args.folder)
        return 0
    if args.child == "cli":
        print(json.dumps(cli_child(args.folder)))
        return 0

    out = sys.stdout
    if args.json:
        sys.stdout = sys.stderr
    import numpy as np
    import pandas as pd
    import pyarrow as pa

    command = " ".join(shlex.quote(a) for a in ["python", *sys.argv])
    date = datetime.now(timezone.utc).isoformat(timespec="seconds")
    machine = (f"{os.cpu_count()} cores, {platform.platform()}, python {platform.python_version()}, numpy {np.__version__}, "
               f"pandas {pd.__version__}, pyarrow {pa.__version__}, "
               f"{os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') / 2**30:.0f} GB RAM")
    print(f"command: {command}\nmachine: {machine}\ndate: {date}; load average {os.getloadavg()[0]:.2f}")
    document: dict = {"command": command, "date": date, "machine": machine, "grid": args.grid, "sizes": {}}
    base = args.keep or Path(tempfile.mkdtemp(prefix="bench-api-"))
    try:
        for size in args.sizes:
            grid_axes(size)
            folder = base / f"{args.grid}-{size}"
            if not (folder / "manifest.json").exists():
                built = _child(["--child", "build", "--folder", str(folder), "--size", str(size), "--grid", args.grid])
                if "error" in built:
                    print(f"{size:,} universes: building the run folder failed: {built['error']}")
                    continue
                print(f"\n{size:,} universes, {args.grid} grid: {built['rows']:,} verdict rows written in {built['seconds']} s")
            entry = _child(["--child", "api", "--folder", str(folder)])
            document["sizes"][str(size)] = entry
            if "error" in entry:
                print(f"  api: FAILED {entry['error']}")
                continue
            print(f"  {'step':<12}{'seconds':>9}{'cpu':>8}")
            for name, step in entry["steps"].items():
                print(f"  {name:<12}{step['seconds']:9.2f}{step['cpu_seconds']:8.1f}")
            target = TARGETS.get(size)
            verdict = "" if target is None else ("  PASS" if entry["seconds"] <= target else "  MISS") + f" (target {target:g} s)"
            print(f"  {'total':<12}{entry['seconds']:9.2f}{entry['cpu_seconds']:8.1f}   peak RSS {entry['peak_gb']:.2f} GiB{verdict}")
            print(f"  {entry['summary']}")
            if args.cli:
                cli = _child(["--child", "cli", "--folder", str(folder)])
                entry["cli"] = cli
                if "error" in cli:
                    print(f"  cli: FAILED {cli['error']}")
                else:
                    print("  as four commands: " + ", ".join(f"{k} {v['seconds']:.1f} s ({v['cpu_seconds']:.1f} CPU, "
                                                             f"{v['peak_gb']:.2f} GiB)" for k, v in cli["steps"].items())
                          + f"; total {cli['seconds']:.1f} s, largest process {cli['peak_gb']:.2f} GiB")
    finally:
        if args.keep is None:
            shutil.rmtree(base, ignore_errors=True)
    if args.json:
        print(json.dumps(document, indent=1), file=out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
