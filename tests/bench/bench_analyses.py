"""Benchmark of the multiverse analyses on synthetic verdicts (not collected by pytest).

Builds a synthetic grid of 1k and 10k universes (100k with --huge) x 5 systems
x 120 cases, then times agreement (judge axis, with per-criterion agreement on
the 1k grid or with --criteria), ranking (bootstrap rank intervals, B=1000, for
the primary universe only) and the variance decomposition, and reports the
wall time and the peak resident memory above the table's own footprint.

Reproduce:  python tests/bench/bench_analyses.py [--sizes 1000 10000] [--huge] [--criteria]
Targets:    10k universes under 60 s for the three analyses together and under 4 GB, on 2 cores.
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from multiverse.analysis import agreement, ranking, variance

# Axes of the synthetic grid, in the order they are added as the grid grows.
# stage: which store stage the axis touches (rollout -> new transcripts, judge -> new judgments, score).
BASE_AXES = [
    ("judge", "judge", 5),
    ("evidence", "judge", 2),
    ("setting", "rollout", 2),
    ("user", "rollout", 5),
    ("scoring", "score", 2),
    ("prompt", "rollout", 5),
]
EXTRA_AXES = [("temperature", "rollout", 10), ("seed", "rollout", 10)]
CRITERIA = [f"criterion_{i}" for i in range(10)]


def grid_axes(n_universes: int) -> list[tuple[str, str, int]]:
    axes = list(BASE_AXES)
    size = int(np.prod([k for _, _, k in axes]))
    for extra in EXTRA_AXES:
        if size >= n_universes:
            break
        axes.append(extra)
        size *= extra[2]
    if size != n_universes:
        raise SystemExit(f"--sizes: {n_universes}: expected one of 1000, 10000, 100000")
    return axes


def _combine(*codes: np.ndarray) -> np.ndarray:
    out = np.zeros(len(codes[0]), dtype=np.int64)
    for c in codes:
        out *= int(c.max()) + 1
        out += c
    return pd.factorize(out)[0].astype(np.int32)


def synthetic_verdicts(n_universes: int, *, systems: int = 5, cases: int = 120, seed: int = 0,
                       criteria: bool = False):
    """Verdicts (and optionally criteria) of a simulated grid; returns (verdicts, criteria|None, axes)."""
    rng = np.random.default_rng(seed)
    axes = grid_axes(n_universes)
    sizes = [k for _, _, k in axes]
    # Small integer dtypes: at 100k universes every row-length array is 60M entries.
    universe_codes = np.indices(sizes, dtype=np.int8).reshape(len(axes), -1).T  # U x A
    n_rows = n_universes * systems * cases
    u = np.repeat(np.arange(n_universes, dtype=np.int32), systems * cases)
    s = np.tile(np.repeat(np.arange(systems, dtype=np.int8), cases), n_universes)
    c = np.tile(np.arange(cases, dtype=np.int16), n_universes * systems)
    option = {name: universe_codes[u, i] for i, (name, _, _) in enumerate(axes)}

    # Transcripts depend on the rollout axes only; their latent truth on system and rollout.
    rollout = [option[name] for name, stage, _ in axes if stage == "rollout"]
    transcript = _combine(*rollout, s, c)
    base = 0.55 + 0.07 * np.arange(systems)
    shift = 0.04 * option["setting"] - 0.015 * option["user"] + 0.03 * (option["user"] == 4) * (s - 2)
    truth = rng.random(transcript.max() + 1)[transcript] < np.clip(base[s] + shift, 0.02, 0.98)

    # Judgments add judge and evidence: a judge-specific error rate and a judge x system bias.
    judgment = _combine(transcript, option["judge"], option["evidence"])
    error = 0.08 + 0.03 * option["judge"] + 0.04 * option["evidence"]
    flip = rng.random(judgment.max() + 1)[judgment] < error
    lenient = (option["judge"] == 3) & (s == 0)
    label = np.where(flip, ~truth, truth) | (lenient & (rng.random(n_rows) < 0.3))
    # Scoring "impermissible only" forgives some non-compliant judgments.
    forgiven = rng.random(judgment.max() + 1)[judgment] < 0.25
    compliant = label | ((option["scoring"] == 1) & forgiven)

    status_draw = rng.random(judgment.max() + 1)[judgment]
    status = np.where(status_draw < 0.02, 2, np.where(status_draw < 0.03, 1, 0)).astype(np.int8)
    del status_draw, flip, forgiven, truth, label
    status_names = np.array(["ok", "excluded", "judge_failed"])

    columns = {"universe_id": pd.Categorical.from_codes(u, [f"u{i:05d}" for i in range(n_universes)])}
    for _i, (name, _, k) in enumerate(axes):
        columns[name] = pd.Categorical.from_codes(option[name], [f"{name}_{j}" for j in range(k)])
    columns["system"] = pd.Categorical.from_codes(s, [f"system_{j}" for j in range(systems)])
    columns["case_id"] = pd.Categorical.from_codes(c, [f"case_{j:03d}" for j in range(cases)])
    columns["replicate"] = np.zeros(n_rows, dtype=np.int8)
    if n_universes <= 10000:
        columns["transcript_key"] = pd.Categorical.from_codes(
            transcript, [f"t{j:015x}" for j in range(transcript.max() + 1)])
        columns["judgment_key"] = pd.Categorical.from_codes(
            judgment, [f"j{j:015x}" for j in range(judgment.max() + 1)])
    else:
        # 30M distinct key strings would not fit beside the table: integer keys at 100k.
        columns["transcript_key"] = transcript
        columns["judgment_key"] = judgment
    columns["status"] = pd.Categorical(status_names[status], categories=list(status_names))
    flags = pd.array(compliant, dtype="boolean")
    flags[status != 0] = pd.NA
    columns["compliant"] = flags
    verdicts = pd.DataFrame(columns)

    table = None
    if criteria:
        # One row per judgment x criterion (first judge sample only).
        first = pd.unique(judgment)
        n_j = len(first)
        k = len(CRITERIA)
        applicable = rng.random(n_j * k) < 0.35
        crit_ok = pd.array(rng.random(n_j * k) < 0.8, dtype="boolean")
        crit_ok[~applicable] = pd.NA
        table = pd.DataFrame({
            "judgment_key": (
                pd.Categorical.from_codes(np.repeat(first, k), verdicts["judgment_key"].cat.categories)
                if isinstance(verdicts["judgment_key"].dtype, pd.CategoricalDtype)
                else np.repeat(first, k)),
            "sample": np.zeros(n_j * k, dtype=np.int8),
            "criterion": pd.Categorical.from_codes(np.tile(np.arange(k), n_j), CRITERIA),
            "permissible": np.tile(np.arange(k) >= 6, n_j),
            "applicable": applicable,
            "compliant": crit_ok,
        })
    return verdicts, table, [name for name, _, _ in axes]


def _rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


class PeakMemory:
    """Peak resident memory while the block runs, sampled every 5 ms (Linux)."""

    def __enter__(self):
        gc.collect()
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


def bench(n_universes: int, criteria: bool) -> dict:
    t0 = time.perf_counter()
    verdicts, table, axes = synthetic_verdicts(n_universes, criteria=criteria)
    build = time.perf_counter() - t0
    table_mb = (verdicts.memory_usage(deep=True).sum()
                + (table.memory_usage(deep=True).sum() if table is not None else 0)) / 2**20
    print(f"\n{n_universes} universes: {len(verdicts):,} verdict rows"
          + (f", {len(table):,} criteria rows" if table is not None else "")
          + f" ({table_mb:,.0f} MB in memory, built in {build:.1f} s)")
    runs = {
        "agreement": lambda: agreement(verdicts, axes=axes, axis="judge", criteria=table),
        "ranking": lambda: ranking(verdicts, axes=axes, bootstrap=1000),
        "variance": lambda: variance(verdicts, axes=axes),
    }
    results, total = {}, 0.0
    for name, run in runs.items():
        with PeakMemory() as memory:
            t = time.perf_counter()
            results[name] = run()
            seconds = time.perf_counter() - t
        total += seconds
        extra = (memory.peak - memory.start) / 2**20
        print(f"  {name:<10} {seconds:7.2f} s   peak RSS {memory.peak / 2**20:7,.0f} MB "
              f"(+{extra:,.0f} MB over the loaded table)")
    print(f"  {'total':<10} {total:7.2f} s   process peak RSS {_peak_rss_mb():,.0f} MB   "
          f"(load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores)")
    agree, rank, var = results["agreement"], results["ranking"], results["variance"]
    print(f"  agreement: {len(agree['pairs'])} judge pairs, alpha {agree['krippendorff_alpha']:.3f}, "
          f"{len(agree['per_criterion'])} per-criterion summaries")
    print(f"  ranking: p_top {({k: round(v, 3) for k, v in rank['p_top'].items()})}, "
          f"W {rank['kendall_w']['w']:.3f}, {len(rank['flips'])} flips")
    print(f"  variance: {var['summary'][0]}")
    return {"universes": n_universes, "seconds": total}


def _peak_rss_mb() -> float:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--huge", action="store_true", help="also run 100k universes")
    parser.add_argument("--criteria", action="store_true",
                        help="per-criterion agreement at every size (default: 1k only)")
    args = parser.parse_args()
    sizes = args.sizes + ([100000] if args.huge else [])
    print(f"python {sys.version.split()[0]}, pandas {pd.__version__}, numpy {np.__version__}, "
          f"{os.cpu_count()} cores")
    for size in sizes:
        bench(size, criteria=args.criteria or size <= 1000)
        gc.collect()
    print("\nreproduce: python tests/bench/bench_analyses.py "
          + " ".join(sys.argv[1:]))


if __name__ == "__main__":
    main()
