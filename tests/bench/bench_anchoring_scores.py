"""Coverage of the anchored mean score (PPI++ on a bounded scale) under known truth: prints the table.

    python tests/bench/bench_anchoring_scores.py [--reps 2000] [--transcripts 300] [--json]

For each scale (1-5, 1-10), human score distribution (mid, high, ceiling,
rare-low: tests/analysis/test_anchoring_scores.py), judge (good, biased,
noisy) and number of labels (20, 50, 100): the share of ``--reps`` simulated
cells whose 95% interval holds the true human mean, for the anchored
interval, the humans-only one and ppi-python's normal interval on the same
data (``ppi_mean_batch``, equal to ``ppi_mean_ci``), and the median widths in
the scale's units. ``--replicates 3`` draws 3 transcripts per case that
share a case effect on the human score (the anchored interval is then
clustered by case; the others are not). README › Human anchoring › Scores
quotes this table.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "analysis"))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from test_anchoring_scores import JUDGES, SHAPES, judge_scores, shape, sums

from multiverse.analysis.anchoring._calibrate import ppi_mean_batch
from multiverse.analysis.anchoring._ppi import design_effects, ppi_bounded_mean, ppi_lambda


def world(rng, reps: int, k: int, shape_name: str, judge: str, transcripts: int, replicates: int):
    """Human and judge scores (reps x transcripts, labelled first after a shuffle), case codes and the true mean."""
    p = shape(shape_name, k)
    points = np.arange(1, k + 1)
    cases = transcripts // replicates
    if replicates == 1:
        y = rng.choice(points, size=(reps, transcripts), p=p).astype(float)
        case = np.broadcast_to(np.arange(transcripts), y.shape)
    else:
        # A case effect: each case's scores come from the distribution tilted towards a case-level draw, so the
        # replicates of a case are alike; the mixture over cases is still ``p`` (each replicate's marginal).
        anchor = rng.choice(points, size=(reps, cases), p=p)
        own = rng.choice(points, size=(reps, cases, replicates), p=p)
        same = rng.random((reps, cases, replicates)) < 0.5
        y = np.where(same, anchor[..., None], own).reshape(reps, cases * replicates).astype(float)
        case = np.broadcast_to(np.repeat(np.arange(cases), replicates), y.shape)
        order = np.argsort(rng.random(y.shape), axis=1)
        y, case = np.take_along_axis(y, order, 1), np.take_along_axis(case, order, 1)
    return y, judge_scores(rng, y, k, judge), case, float((points * p).sum())


def cell(rng, reps: int, k: int, shape_name: str, judge: str, labels: int, transcripts: int,
         replicates: int) -> dict:
    y, f, case, truth = world(rng, reps, k, shape_name, judge, transcripts, replicates)
    ry, rf = (y - 1) / (k - 1), (f - 1) / (k - 1)
    moments = sums(ry, rf, labels)
    deff: np.ndarray | float = 1.0
    if replicates > 1:
        n, sy, _, sf, _, syf, big_n, sfu, _ = moments
        lam = ppi_lambda(n, sy, sf, syf, big_n, sfu, moments[4] + moments[8])
        rows = np.repeat(np.arange(reps), transcripts)
        labelled = np.zeros(y.shape, bool)
        labelled[:, :labels] = True
        deff = design_effects(rows, (case + rows.reshape(case.shape) * transcripts).ravel(), labelled.ravel(),
                              ry.ravel(), rf.ravel(), lam, n, big_n, sy, sf, sfu)
    _, low, high, _ = ppi_bounded_mean(*moments, 0.05, deff)
    _, h_low, h_high, _ = ppi_bounded_mean(*moments, 0.05, judge=False)
    _, n_low, n_high, _ = ppi_mean_batch(y[:, :labels], f[:, :labels], f[:, labels:], 0.05)
    target = (truth - 1) / (k - 1)

    def covered(lo, hi, t):
        return round(float(np.mean((lo <= t) & (t <= hi))), 3)

    return {"scale": f"1-{k}", "shape": shape_name, "judge": judge, "labels": labels, "replicates": replicates,
            "true_mean": round(truth, 3), "anchored": covered(low, high, target), "humans_only": covered(h_low, h_high, target),
            "ppi_normal": covered(n_low, n_high, truth), "points": int(np.sum(high - low <= 0)),
            "width": round(float(np.median(high - low)) * (k - 1), 3),
            "humans_width": round(float(np.median(h_high - h_low)) * (k - 1), 3),
            "normal_width": round(float(np.median(n_high - n_low)), 3)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=2000)
    parser.add_argument("--transcripts", type=int, default=300)
    parser.add_argument("--replicates", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    start = time.perf_counter()
    rows = [cell(rng, args.reps, k, s, j, n, args.transcripts, args.replicates)
            for k in (5, 10) for s in SHAPES for n in (20, 50, 100) for j in JUDGES]
    if args.json:
        print(json.dumps({"reps": args.reps, "transcripts": args.transcripts, "replicates": args.replicates,
                          "seconds": round(time.perf_counter() - start, 1), "cells": rows}))
        return
    print(f"# {args.reps} cells of {args.transcripts} transcripts ({args.replicates} per case), 95% intervals; "
          f"{time.perf_counter() - start:.0f} s")
    print("| scale | shape | mean | labels | anchored (good, biased, noisy) | humans only | ppi-python normal (lowest) "
          "| points | width (good, biased, noisy) | humans-only width |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for i in range(0, len(rows), len(JUDGES)):
        group = rows[i:i + len(JUDGES)]
        first = group[0]
        print(f"| {first['scale']} | {first['shape']} | {first['true_mean']:.2f} | {first['labels']} | "
              + ", ".join(f"{g['anchored']:.3f}" for g in group) + f" | {first['humans_only']:.3f} | "
              f"{min(g['ppi_normal'] for g in group):.3f} | {sum(g['points'] for g in group)} | "
              + ", ".join(f"{g['width']:.2f}" for g in group) + f" | {first['humans_width']:.2f} |")
    worst = min(rows, key=lambda r: r["anchored"])
    print(f"# lowest anchored coverage: {worst['anchored']:.3f} ({worst['scale']}, {worst['shape']}, {worst['judge']}, "
          f"{worst['labels']} labels)")


if __name__ == "__main__":
    main()
