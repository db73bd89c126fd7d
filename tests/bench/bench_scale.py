"""Benchmark: the analyses of a run at 1k, 10k and 100k universes.

Not collected by pytest (no test functions). Run from the repository root:

    python tests/bench/bench_scale.py                          # 1k and 10k universes
    python tests/bench/bench_scale.py --sizes 100000           # the big one
    python tests/bench/bench_scale.py --sizes 1000 10000 --strings   # string columns, as read from parquet

A synthetic verdicts table of N universes x 5 systems x 120 cases (one
verdict each) has the columns a run writes: universe_id, the axes (setting,
user, judge, evidence, scoring, prompt, then temperature and seed as the grid
grows), system, case_id, two design factors (behavior, interaction_condition),
replicate, transcript_key, judgment_key, status, reason, compliant. Keys
follow the cache-key rules: a transcript depends on the system, the case and
the rollout axes only; a judgment adds the judge axes; scoring shares
judgments. So agreement pairs on identical transcripts, as in a real run.

Each step runs in a fresh child process that loads the table (pickled once
per size by a builder child) and then runs one step:

- rates: ``multiverse.analysis.rates.compute_rates`` (per universe x system,
  overall and per factor level, Wilson intervals);
- curve: ``case_matrix``, ``spec_curve`` (all systems), ``difference_curve``,
  ``joint_rate_test`` and ``joint_difference_test``, each with B=1000;
- agreement: ``multiverse.analysis.agreement.agreement`` on the judge axis;
- ranking: ``multiverse.analysis.ranking.ranking`` with bootstrap=1000 on the
  primary universe;
- variance: ``multiverse.analysis.variance.variance``.

Time is the step's wall time (the table load is not counted), and the CPU
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
import pickle
import platform
import resource
import shlex
import subprocess
import sys
import tempfile
import threading
import time
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

STEPS = ("rates", "curve", "agreement", "ranking", "variance")
BOOT = 1000

# (axis, store stage it touches, options), added in order until the grid has N universes.
AXES = [
    ("setting", "rollout", 2),
    ("user", "rollout", 5),
    ("judge", "judge", 5),
    ("evidence", "judge", 2),
    ("scoring", "score", 2),
    ("prompt", "rollout", 5),
    ("temperature", "rollout", 10),
    ("seed", "rollout", 10),
]
BEHAVIORS = ["fabricate_evidence", "overstate_capability", "false_tool_claim",
             "inconsistent_commitment", "misattribute_source", "uncertain_as_settled"]
CONDITIONS = ["material_reliance", "consistency_probe", "overclaim_pressure", "outside_basis"]
FACTORS = ["behavior", "interaction_condition"]


# -- the synthetic table -----------------------------------------------------------


def grid_axes(n_universes: int) -> list[tuple[str, str, int]]:
    axes, size = [], 1
    for axis in AXES:
        if size >= n_universes:
            break
        axes.append(axis)
        size *= axis[2]
    if size != n_universes:
        raise SystemExit(f"--sizes: {n_universes}: expected one of 1000, 10000, 100000")
    return axes


def _combine(*codes):
    import numpy as np
    import pandas as pd

    out = np.zeros(len(codes[0]), dtype=np.int64)
    for c in codes:
        out *= int(c.max()) + 1
        out += c
    return pd.factorize(out)[0].astype(np.int32)


def synthetic_verdicts(n_universes: int, *, systems: int = 5, cases: int = 120, seed: int = 0,
                       strings: bool = False):
    """(verdicts, axes, factors, primary universe id) of a simulated grid."""
    import numpy as np
    import pandas as pd

    rng = np.random.default_rng(seed)
    axes = grid_axes(n_universes)
    sizes = [k for _, _, k in axes]
    universe_codes = np.indices(sizes, dtype=np.int8).reshape(len(axes), -1).T  # U x A
    n_rows = n_universes * systems * cases
    # Row order as the pipeline writes it: universe, then system, then case.
    u = np.repeat(np.arange(n_universes, dtype=np.int32), systems * cases)
    s = np.tile(np.repeat(np.arange(systems, dtype=np.int8), cases), n_universes)
    c = np.tile(np.arange(cases, dtype=np.int16), n_universes * systems)
    option = {name: universe_codes[u, i] for i, (name, _, _) in enumerate(axes)}

    # A transcript depends on the system, the case and the rollout axes.
    transcript = _combine(*[option[n] for n, stage, _ in axes if stage == "rollout"], s, c)
    case_difficulty = rng.normal(scale=0.8, size=cases)
    base = np.linspace(0.4, 1.2, systems)
    shift = 0.3 * option["setting"] - 0.08 * option["user"] + 0.15 * (option["user"] == 4) * (s - 2)
    if "prompt" in option:
        shift = shift + 0.05 * option["prompt"]
    p_true = 1 / (1 + np.exp(-(base[s] + shift + case_difficulty[c])))
    truth = rng.random(transcript.max() + 1)[transcript] < p_true
    # A judgment adds the judge axes: a judge-specific error rate and a
    # lenient judge on system 0.
    judgment = _combine(transcript, *[option[n] for n, stage, _ in axes if stage == "judge"])
    error = 0.06 + 0.03 * option["judge"] + 0.04 * option["evidence"]
    flip = rng.random(judgment.max() + 1)[judgment] < error
    lenient = (option["judge"] == 3) & (s == 0)
    label = np.where(flip, ~truth, truth) | (lenient & (rng.random(n_rows) < 0.3))
    forgiven = rng.random(judgment.max() + 1)[judgment] < 0.25  # impermissible_only forgives some
    compliant = label | ((option["scoring"] == 1) & forgiven)
    # ~1% of transcripts fail to roll out; ~2% of judgments fail, ~1% are excluded.
    rollout_failed = rng.random(transcript.max() + 1)[transcript] < 0.01
    draw = rng.random(judgment.max() + 1)[judgment]
    status = np.where(rollout_failed, 3, np.where(draw < 0.02, 2, np.where(draw < 0.03, 1, 0))).astype(np.int8)
    del draw, flip, forgiven, truth, label, p_true, shift, rollout_failed

    universe_ids = [f"{(k * 0x9E3779B97F4A7C15) % 2**64:016x}" for k in range(n_universes)]
    columns = {"universe_id": pd.Categorical.from_codes(u, universe_ids)}
    for _i, (name, _, k) in enumerate(axes):
        columns[name] = pd.Categorical.from_codes(option[name], [f"{name}_{j}" for j in range(k)])
    columns["system"] = pd.Categorical.from_codes(s, [f"system_{j}" for j in range(systems)])
    behavior = np.arange(cases) % len(BEHAVIORS)
    condition = (np.arange(cases) // len(BEHAVIORS)) % len(CONDITIONS)
    case_names = [f"{BEHAVIORS[behavior[j]]}.{CONDITIONS[condition[j]]}.{j // 24 + 1:02d}" for j in range(cases)]
    columns["case_id"] = pd.Categorical.from_codes(c, case_names)
    columns["behavior"] = pd.Categorical.from_codes(behavior[c].astype(np.int8), BEHAVIORS)
    columns["interaction_condition"] = pd.Categorical.from_codes(condition[c].astype(np.int8), CONDITIONS)
    columns["replicate"] = np.zeros(n_rows, dtype=np.int64)
    # Keys: 16 hex digits, as keys.digest writes them.
    columns["transcript_key"] = pd.Categorical.from_codes(
        transcript, [f"{(j * 0xBF58476D1CE4E5B9) % 2**64:016x}" for j in range(transcript.max() + 1)])
    columns["judgment_key"] = pd.Categorical.from_codes(
        judgment, [f"{(j * 0x94D049BB133111EB) % 2**64:016x}" for j in range(judgment.max() + 1)])
    del transcript, judgment, u, c, option
    statuses = ["ok", "excluded", "judge_failed", "rollout_failed"]
    columns["status"] = pd.Categorical.from_codes(status, statuses)
    columns["reason"] = pd.Categorical.from_codes(
        status, ["", "no applicable criterion", "criterion missing from the answer", "role_reversal (after 3 attempts)"])
    flags = pd.array(compliant, dtype="boolean")
    del compliant
    flags[status != 0] = pd.NA
    columns["compliant"] = flags
    verdicts = pd.DataFrame(columns)
    del columns
    if strings:
        # As read back from parquet/csv: pandas' default string dtype, no categoricals.
        for name in verdicts.columns:
            if isinstance(verdicts[name].dtype, pd.CategoricalDtype):
                verdicts[name] = verdicts[name].astype(str)
    return verdicts, [name for name, _, _ in axes], list(FACTORS), universe_ids[0]


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


def _step(name: str, verdicts, axes, factors, primary) -> tuple[dict, str]:
    """Run one step; returns (sub-step seconds, a one-line summary of the result)."""
    parts: dict[str, float] = {}

    def timed(label, thunk):
        t = time.perf_counter()
        out = thunk()
        parts[label] = time.perf_counter() - t
        return out

    if name == "rates":
        from multiverse.analysis.rates import compute_rates

        rates = timed("compute_rates", lambda: compute_rates(verdicts, axes=axes, factors=factors))
        return parts, f"{len(rates):,} rate rows"
    if name == "curve":
        from multiverse.analysis.curve import case_matrix, difference_curve, spec_curve
        from multiverse.analysis.inference import joint_difference_test, joint_rate_test

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
        from multiverse.analysis.agreement import agreement

        result = timed("agreement", lambda: agreement(verdicts, axes=axes, axis="judge"))
        return parts, (f"{len(result['pairs'])} judge pairs on {result['n_units']:,} units "
                       f"({result['paired_on']}), alpha {result['krippendorff_alpha']:.3f}")
    if name == "ranking":
        from multiverse.analysis.ranking import ranking

        result = timed("ranking", lambda: ranking(verdicts, axes=axes, primary=primary, bootstrap=BOOT))
        return parts, f"W {result['kendall_w']['w']:.3f}, {len(result['flips']):,} flips, {len(result['bootstrap'])} bootstrap rows"
    if name == "variance":
        from multiverse.analysis.variance import variance

        result = timed("variance", lambda: variance(verdicts, axes=axes))
        return parts, f"{len(result['terms'])} terms; {result['summary'][0] if result['summary'] else ''}"
    raise SystemExit(f"unknown step {name!r}")


def child(args) -> None:
    if args.child == "build":
        t = time.perf_counter()
        table = synthetic_verdicts(args.size, strings=args.strings)
        seconds = time.perf_counter() - t
        with open(args.table, "wb") as f:
            pickle.dump(table, f, protocol=5)
        verdicts = table[0]
        print(json.dumps({"rows": len(verdicts), "table_bytes": int(verdicts.memory_usage(deep=True).sum()),
                          "seconds": seconds, "maxrss": _maxrss(),
                          "transcripts": int(verdicts["transcript_key"].nunique()),
                          "judgments": int(verdicts["judgment_key"].nunique())}))
        return
    import numpy as np  # noqa: F401  (imported before the measurement, like pandas via pickle)
    import pandas as pd  # noqa: F401

    t = time.perf_counter()
    with open(args.table, "rb") as f:
        verdicts, axes, factors, primary = pickle.load(f)
    load = time.perf_counter() - t
    _step_imports(args.child)
    _trim()
    before = resource.getrusage(resource.RUSAGE_SELF)
    with PeakRSS() as memory:
        t = time.perf_counter()
        parts, summary = _step(args.child, verdicts, axes, factors, primary)
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
    proc = subprocess.run([sys.executable, __file__, *argv], capture_output=True, text=True)
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
    parser.add_argument("--strings", action="store_true",
                        help="string columns (pandas' default str dtype, as read from parquet) instead of categoricals")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--size", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--table", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args)
        return 0

    print("command: " + " ".join(shlex.quote(a) for a in [sys.executable, *sys.argv]) + f"   (cwd {os.getcwd()})")
    import numpy as np
    import pandas as pd

    print(f"machine: {os.cpu_count()} cores, {platform.platform()}, python {platform.python_version()}, "
          f"numpy {np.__version__}, pandas {pd.__version__}, "
          f"{os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') / 2**30:.0f} GB RAM")
    print(f"date: {datetime.now(timezone.utc).isoformat(timespec='seconds')}; "
          f"load average at start {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"table: universes x 5 systems x 120 cases, {'string' if args.strings else 'categorical'} columns; "
          f"B={BOOT} for the joint tests and the rank bootstrap")

    results: dict[int, dict] = {}
    with tempfile.TemporaryDirectory(prefix="bench-scale-") as tmp:
        for size in args.sizes:
            grid_axes(size)
            table = str(Path(tmp) / f"verdicts-{size}.pkl")
            common = ["--size", str(size), "--table", table] + (["--strings"] if args.strings else [])
            built = _run_child(["--child", "build", *common])
            if "error" in built:
                print(f"\n{size:,} universes: building the table failed: {built['error']}")
                continue
            print(f"\n{size:,} universes: {built['rows']:,} verdict rows, {built['transcripts']:,} transcripts, "
                  f"{built['judgments']:,} judgments; table {_gb(built['table_bytes']).strip()} in memory "
                  f"(built in {built['seconds']:.1f} s)")
            print(f"  {'step':<34}{'seconds':>9}{'cpu user+sys':>14}{'child peak RSS':>16}{'step increment':>16}   result")
            steps = {}
            for step in args.steps:
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
            os.unlink(table)
            done = [r for r in steps.values() if "error" not in r]
            total = sum(r["seconds"] for r in done)
            peak = max((r["maxrss"] for r in done), default=0)
            results[size] = {"total": total, "peak": peak, "steps": steps, "failed": len(done) < len(steps),
                             "cpu": sum(r["user"] + r["system"] for r in done)}
            cpu_user = sum(r["user"] for r in done)
            cpu_system = sum(r["system"] for r in done)
            print(f"  {'total':<34}{total:9.2f}{cpu_user:7.1f}+{cpu_system:<6.1f}{_gb(peak):>16}   (peak = largest child; "
                  f"load average now {os.getloadavg()[0]:.2f})")

    sizes = sorted(results)
    if len(sizes) > 1:
        print("\ngrowth (time ratio / peak-memory ratio between consecutive sizes; rows grow 10x):")
        for small, big in itertools.pairwise(sizes):
            line = []
            for step in args.steps:
                a, b = results[small]["steps"].get(step, {}), results[big]["steps"].get(step, {})
                if "seconds" in a and "seconds" in b:
                    line.append(f"{step} {b['seconds'] / max(a['seconds'], 1e-9):.1f}x/{b['maxrss'] / a['maxrss']:.1f}x")
            ratio = results[big]["total"] / max(results[small]["total"], 1e-9)
            cpu_ratio = results[big]["cpu"] / max(results[small]["cpu"], 1e-9)
            print(f"  {big // 1000}k / {small // 1000}k: total {ratio:.1f}x wall time ({cpu_ratio:.1f}x cpu time), "
                  f"{results[big]['peak'] / max(results[small]['peak'], 1):.1f}x memory; " + ", ".join(line))

    print()
    if 10000 in results:
        r = results[10000]
        print(f"{'PASS' if not r['failed'] and r['total'] < 60 else 'MISS'}  10k universes under 60 s: "
              f"{r['total']:.1f} s ({60 - r['total']:+.1f} s of headroom)")
        print(f"{'PASS' if not r['failed'] and r['peak'] < 4 * 2**30 else 'MISS'}  10k universes under 4 GB: "
              f"peak {r['peak'] / 2**30:.2f} GB ({(4 * 2**30 - r['peak']) / 2**30:+.2f} GB of headroom)")
    if 100000 in results:
        r = results[100000]
        ok = not r["failed"] and r["peak"] < 24 * 2**30
        print(f"{'PASS' if ok else 'MISS'}  100k universes complete within 24 GB: "
              + ("a step failed; " if r["failed"] else "") + f"peak {r['peak'] / 2**30:.2f} GB, total {r['total']:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
