"""Benchmark: specification curve + joint inference on large synthetic multiverses.

Not collected by pytest (no test_ prefix). Run from the repository root:

    python tests/bench/bench_curve.py                 # 1k and 10k universes
    python tests/bench/bench_curve.py --sizes 1000 10000 100000
    python tests/bench/bench_curve.py --boot 1000 --cases 120 --systems 5
    python tests/bench/bench_curve.py --strings       # string columns, as from csv

For each size it builds a verdicts table (universes x systems x cases, one
verdict each, categorical columns as a run would store them), then times:
the case matrix, spec_curve for every system, difference_curve, a joint rate
test (one system vs a threshold, centred bootstrap) and a joint difference
test (case sign flips), each with ``--boot`` replicates. Peak memory is
measured in a second pass with tracemalloc (numpy and Python allocations),
and the process's peak RSS is reported at the end.
"""

from __future__ import annotations

import argparse
import platform
import resource
import sys
import time
import tracemalloc
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from multiverse.analysis import case_matrix, difference_curve, joint_difference_test, joint_rate_test, spec_curve


def synthetic_verdicts(n_universes: int, n_systems: int, n_cases: int, seed: int = 0):
    """Verdicts for ``n_universes`` (axes of 10 options each) x systems x cases."""
    rng = np.random.default_rng(seed)
    n_axes = max(1, round(np.log10(n_universes)))
    options = 10
    if options**n_axes != n_universes:
        raise SystemExit(f"--sizes: expected powers of 10, got {n_universes}")
    axes = [f"axis{k}" for k in range(n_axes)]
    # Option effects on the logit scale plus a shared case difficulty: the
    # universes judge the same transcripts, so they are strongly dependent.
    option_effect = rng.normal(scale=0.3, size=(n_axes, options))
    universe_options = np.array(np.unravel_index(np.arange(n_universes), (options,) * n_axes))
    universe_effect = option_effect[np.arange(n_axes)[:, None], universe_options].sum(axis=0)
    system_effect = np.linspace(-0.4, 0.4, n_systems)
    case_effect = rng.normal(size=n_cases)
    logit = (0.5 + universe_effect[:, None, None] + system_effect[None, :, None]
             + case_effect[None, None, :])
    compliant = rng.random(logit.shape) < 1 / (1 + np.exp(-logit))
    u, s, c = (idx.reshape(-1) for idx in np.indices(logit.shape, dtype=np.int32))
    universe_ids = [f"u{k:06d}" for k in range(n_universes)]
    columns = {"universe_id": pd.Categorical.from_codes(u, universe_ids)}
    for k, axis in enumerate(axes):
        columns[axis] = pd.Categorical.from_codes(
            universe_options[k][u], [f"{axis}_opt{j}" for j in range(options)])
    columns["system"] = pd.Categorical.from_codes(s, [f"system{j}" for j in range(n_systems)])
    columns["case_id"] = pd.Categorical.from_codes(c, [f"case{j:03d}" for j in range(n_cases)])
    columns["status"] = pd.Categorical.from_codes(np.zeros(len(u), dtype=np.int8), ["ok"])
    columns["compliant"] = compliant.reshape(-1)
    return pd.DataFrame(columns), axes


def phases(verdicts, axes, boot):
    """(name, thunk) pairs; each phase reuses what the previous ones built."""
    state = {}

    def matrix():
        state["m"] = case_matrix(verdicts, axes=axes)

    def curve():
        spec_curve(state["m"], axes=axes)

    def curve_from_table():
        spec_curve(verdicts, axes=axes)

    def diff_curve():
        difference_curve(state["m"], axes=axes, a="system1", b="system0")

    def rate_test():
        state["rate"] = joint_rate_test(state["m"], system="system0", threshold=0.6, boot=boot)

    def diff_test():
        state["diff"] = joint_difference_test(state["m"], a="system1", b="system0", boot=boot)

    return state, [
        ("case_matrix (table -> universe x case arrays)", matrix),
        ("spec_curve, all systems (from matrix)", curve),
        ("spec_curve, all systems (from table)", curve_from_table),
        ("difference_curve (from matrix)", diff_curve),
        (f"joint_rate_test, B={boot}", rate_test),
        (f"joint_difference_test, B={boot}", diff_test),
    ]


def run(n_universes: int, args) -> None:
    t0 = time.perf_counter()
    verdicts, axes = synthetic_verdicts(n_universes, args.systems, args.cases)
    if args.strings:
        verdicts = verdicts.astype({c: str for c in verdicts.columns if c != "compliant"})
        verdicts["compliant"] = verdicts["compliant"].astype("boolean")
    print(f"\n{n_universes:,} universes x {args.systems} systems x {args.cases} cases = "
          f"{len(verdicts):,} verdicts ({verdicts.memory_usage(deep=True).sum() / 2**20:.0f} MiB, "
          f"built in {time.perf_counter() - t0:.1f} s)")
    state, steps = phases(verdicts, axes, args.boot)
    timings = {}
    for name, step in steps:
        start = time.perf_counter()
        step()
        timings[name] = time.perf_counter() - start
    peaks = {}
    if not args.no_memory:
        _, steps = phases(verdicts, axes, args.boot)
        tracemalloc.start()
        for name, step in steps:
            tracemalloc.reset_peak()
            base = tracemalloc.get_traced_memory()[0]
            step()
            peaks[name] = (tracemalloc.get_traced_memory()[1] - base) / 2**20
        tracemalloc.stop()
    for name, seconds in timings.items():
        peak = f"{peaks[name]:8.0f} MiB" if name in peaks else ""
        print(f"  {name:<48} {seconds:7.2f} s  {peak}")
    core = sum(timings[k] for k in timings if "from table" not in k)
    print(f"  {'total (matrix + curves + both tests)':<48} {core:7.2f} s")
    for key in ("rate", "diff"):
        test = state[key]
        ps = ", ".join(f"{k}={v:.3g}" for k, v in test.p.items())
        print(f"  {test.kind} test: {test.n_universes:,} universes, {test.n_cases} cases; p: {ps}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000],
                        help="universe counts (powers of 10); add 100000 for the big run")
    parser.add_argument("--systems", type=int, default=5)
    parser.add_argument("--cases", type=int, default=120)
    parser.add_argument("--boot", type=int, default=1000)
    parser.add_argument("--no-memory", action="store_true", help="skip the tracemalloc pass")
    parser.add_argument("--strings", action="store_true",
                        help="plain string columns instead of categoricals (as read from csv)")
    args = parser.parse_args()
    print("command: python tests/bench/bench_curve.py " + " ".join(sys.argv[1:]))
    print(f"python {platform.python_version()}, numpy {np.__version__}, pandas {pd.__version__}, "
          f"{platform.machine()}, {len(__import__('os').sched_getaffinity(0))} CPUs")
    for n in args.sizes:
        run(n, args)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"\npeak RSS of the whole process: {rss:,.0f} MiB")


if __name__ == "__main__":
    main()
