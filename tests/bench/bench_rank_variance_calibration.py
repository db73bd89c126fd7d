"""Calibration of the ranking and variance uncertainty (not collected by pytest).

Prints, with fixed seeds:
- the paired test of two systems (McNemar / sign flip) under the null, with
  3 replicates per case and intra-case correlation through shared difficulty:
  false-positive rate at alpha = 0.05;
- "separable" in ranking (the case-bootstrap interval of P(A above B) excludes
  1/2): how often it is declared under the null and against alternatives;
- the variance decomposition in a world where the axes have no effect: how
  often each term's interval beyond noise covers 0, the mean share against the
  mean noise floor, and how often a real axis effect is found.

Reproduce:  python tests/bench/bench_rank_variance_calibration.py [--reps 200]
"""

from __future__ import annotations

import argparse
import itertools
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from multiverse.analysis import included_verdicts, variance
from multiverse.analysis.ranking._uncertainty import _sign_flip_p, joint_bootstrap


def _logistic(x):
    return 1 / (1 + np.exp(-x))


def paired_test(reps: int) -> None:
    rng = np.random.default_rng(8)
    print("paired test in one universe (36 cases, 3 replicates, shared case difficulty), alpha 0.05")
    for rate in (0.1, 0.5, 0.73, 0.95):
        rejected = []
        for _ in range(reps * 5):
            p = _logistic(np.log(rate / (1 - rate)) + rng.normal(0, 1, 36))
            a, b = ((rng.random((3, 36)) < p).mean(0) for _ in "AB")
            rejected.append(_sign_flip_p(a - b, 1000, rng) < 0.05)
        print(f"  rate {rate:.2f}: false-positive rate {np.mean(rejected):.3f} ({reps * 5} replications)")


def separability(reps: int) -> None:
    rng = np.random.default_rng(11)
    print("ranking: share of replications declaring A and B separable (36 cases x 3 universes, B = 200)")
    for pa, pb in ((0.7, 0.7), (0.3, 0.3), (0.85, 0.7), (0.95, 0.3)):
        declared = []
        for rep in range(reps):
            difficulty = rng.normal(0, 1, 36)
            rows = []
            for u in range(3):
                for system, p in (("A", pa), ("B", pb)):
                    labels = rng.random(36) < _logistic(np.log(p / (1 - p)) + difficulty)
                    rows += [{"judge": f"j{u}", "system": system, "case_id": c, "compliant": bool(x)}
                             for c, x in enumerate(labels)]
            frame = pd.DataFrame(rows)
            frame["universe_id"] = frame["judge"]
            result = joint_bootstrap(included_verdicts(frame, axes=["judge"]), universes=["j0", "j1", "j2"],
                                     systems=["A", "B"], primary=0, resamples=200, seed=rep)
            low, high = result["p_above"]["A"]["B"]
            declared.append(low > 0.5 or high < 0.5)
        kind = "null" if pa == pb else "alternative"
        print(f"  {kind:11s} rate(A) {pa:.2f}, rate(B) {pb:.2f}: {np.mean(declared):.3f} ({reps} replications)")


def variance_noise(reps: int) -> None:
    rng = np.random.default_rng(0)
    print("variance: 3 x 2 axes, 3 systems, 36 shared cases; axis A shifts the logit by `effect` per option")
    for effect in (0.0, 0.5, 1.0):
        covered = {t: [] for t in ("A", "B", "A:system", "B:system")}
        share, floor = [], []
        for rep in range(reps // 2):
            difficulty = rng.normal(0, 1, 36)
            rows = []
            for a, b in itertools.product(range(3), range(2)):
                for s, base in enumerate((0.5, 1.0, 1.5)):
                    labels = rng.random(36) < _logistic(base + difficulty + effect * (a - 1))
                    rows += [{"A": f"a{a}", "B": f"b{b}", "system": f"s{s}", "case_id": c, "compliant": bool(x)}
                             for c, x in enumerate(labels)]
            result = variance(pd.DataFrame(rows), axes=["A", "B"], resamples=200, seed=rep)
            terms = {t["term"]: t for t in result["terms"]}
            for name, hits in covered.items():
                hits.append(terms[name]["low"] <= 0 <= terms[name]["high"])
            share.append(terms["A"]["share"])
            floor.append(terms["A"]["noise"])
        cover = ", ".join(f"{k} {np.mean(v):.2f}" for k, v in covered.items())
        print(f"  effect {effect:.1f}: interval covers 0 -- {cover}; share of A {np.mean(share):.3f} "
              f"vs its noise floor {np.mean(floor):.3f} ({reps // 2} replications)")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--reps", type=int, default=200)
    args = parser.parse_args()
    started = time.time()
    paired_test(args.reps)
    separability(args.reps)
    variance_noise(args.reps)
    print(f"({time.time() - started:.0f} s; python tests/bench/bench_rank_variance_calibration.py --reps {args.reps})")


if __name__ == "__main__":
    main()
