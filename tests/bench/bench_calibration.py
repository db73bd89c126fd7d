"""Calibration of the joint tests and coverage of the rate intervals, by simulation.

Not collected by pytest (no test functions); the suite's fast checks of the
same properties are in tests/analysis/test_calibration.py. Run:

    python tests/bench/bench_calibration.py                 # markdown tables
    python tests/bench/bench_calibration.py --json          # one JSON document
    python tests/bench/bench_calibration.py --draws 200 --sims 500   # quicker, noisier

Joint tests: under a true null (every universe's rate = t, 8 universes sharing
cases, intra-case correlation 0.3 from a Beta case effect), the share of
``--draws`` simulated multiverses where each statistic has p <= 0.05, for
t in {0.02, 0.05, 0.10, 0.30, 0.50, 0.90, 0.98} and n in {30, 36, 100} cases;
then the rate test with 3 replicates per case at every t, the sign-flip
difference test (two systems, same rate), and power (true 0.30 against
t = 0.10, with and without replicates). Then the hard cells: rare rates
(t = 0.01, 0.02), few cases (20), replicates 1-5 and intra-case correlation
0 to 0.6, and power at a rare rate (true 0.01 against t = 0.10, 36 cases).
``--part joint`` runs only the joint-test rows, ``--part coverage`` only the intervals.

Intervals: share of ``--sims`` data sets whose interval holds the true rate,
for the overall rate and for 6-case subgroups, per CI method, true rate p,
cases n, replicates and intra-case correlation.

Anchored (PPI++) intervals: share of ``--anchored-sims`` cells of 600
transcripts whose anchored 95% interval holds the true human rate, per judge
(good 0.95/0.95, biased 0.6/0.95, noisy 0.7/0.7 sensitivity/specificity),
true rate, labels, replicates (3 per case at intra-case correlation 0.3) and
data-generating process (``anchoring_world`` in
tests/analysis/test_anchoring_interval.py), beside ppi-python's normal
interval on the same data. ``--part anchored`` runs these rows alone.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
from scipy import stats

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "analysis"))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from test_anchoring_interval import JUDGES, anchored_intervals, anchoring_world
from test_calibration import audit_world, verdict_table

from multiverse.analysis import compute_rates, joint_difference_test, joint_rate_test
from multiverse.analysis.anchoring._calibrate import ppi_mean_batch
from multiverse.analysis.inference import STATISTICS
from multiverse.core._vocabulary import CI_METHODS

RATES = (0.02, 0.05, 0.10, 0.30, 0.50, 0.90, 0.98)
CASES = (30, 36, 100)


def rejection_rates(make, test, draws: int, seed: int) -> list[float]:
    rng = np.random.default_rng(seed)
    hits = np.zeros(len(STATISTICS))
    for draw in range(draws):
        result = test(make(rng), draw)
        hits += [result.p[name] <= 0.05 for name in STATISTICS]
    return (hits / draws).round(3).tolist()


def calibration(draws: int, boot: int) -> list[dict]:
    rows = []
    for n_cases in CASES:
        for t in RATES:
            rows.append({"test": "rate", "t": t, "cases": n_cases, "replicates": 1, "truth": t, **dict(zip(
                STATISTICS, rejection_rates(
                    lambda rng, t=t, n=n_cases: audit_world(rng, t, n_cases=n),
                    lambda m, draw, t=t: joint_rate_test(m, system="s0", threshold=t, boot=boot, seed=draw),
                    draws, seed=int(1000 * t) + n_cases)))})
    for t in RATES:
        rows.append({"test": "rate", "t": t, "cases": 36, "replicates": 3, "truth": t, **dict(zip(
            STATISTICS, rejection_rates(
                lambda rng, t=t: audit_world(rng, t, replicates=3),
                lambda m, draw, t=t: joint_rate_test(m, system="s0", threshold=t, boot=boot, seed=draw),
                draws, seed=7)))})
    for t in (0.02, 0.05, 0.30, 0.50):
        rows.append({"test": "difference", "t": t, "cases": 36, "replicates": 1, "truth": t, **dict(zip(
            STATISTICS, rejection_rates(
                lambda rng, t=t: audit_world(rng, t, n_systems=2),
                lambda m, draw: joint_difference_test(m, a="s0", b="s1", boot=boot, seed=draw),
                draws, seed=11)))})
    for n_cases, replicates in ((30, 1), (36, 1), (36, 3)):
        rows.append({"test": "rate (power)", "t": 0.10, "cases": n_cases, "replicates": replicates, "truth": 0.30,
                     **dict(zip(STATISTICS, rejection_rates(
                         lambda rng, n=n_cases, r=replicates: audit_world(rng, 0.30, n_cases=n, replicates=r),
                         lambda m, draw: joint_rate_test(m, system="s0", threshold=0.10, boot=boot, seed=draw),
                         draws, seed=3)))})
    return rows + hard_cells(draws, boot)


def hard_cells(draws: int, boot: int) -> list[dict]:
    """Rare rates, few cases, replicates 1-5, ICC 0-0.6; power at a rare rate."""
    rows = []
    cells = [(t, n, r, icc) for t in (0.01, 0.02) for n in (20, 30) for r in (1, 3, 5) for icc in (0.3,)]
    cells += [(t, 36, r, icc) for t in (0.02, 0.05) for r in (1, 3) for icc in (0.0, 0.6)]
    cells += [(0.98, 20, 3, 0.3), (0.5, 20, 5, 0.6), (0.1, 20, 2, 0.3)]
    for t, n_cases, replicates, icc in cells:
        rows.append({"test": "rate", "t": t, "cases": n_cases, "replicates": replicates, "icc": icc, "truth": t,
                     **dict(zip(STATISTICS, rejection_rates(
                         lambda rng, t=t, n=n_cases, r=replicates, i=icc: audit_world(
                             rng, t, n_cases=n, replicates=r, icc=i),
                         lambda m, draw, t=t: joint_rate_test(m, system="s0", threshold=t, boot=boot, seed=draw),
                         draws, seed=int(1000 * t) + 7 * n_cases + replicates)))})
    for replicates in (1, 3):
        rows.append({"test": "rate (power)", "t": 0.10, "cases": 36, "replicates": replicates, "icc": 0.3,
                     "truth": 0.01, **dict(zip(STATISTICS, rejection_rates(
                         lambda rng, r=replicates: audit_world(rng, 0.01, replicates=r),
                         lambda m, draw: joint_rate_test(m, system="s0", threshold=0.10, boot=boot, seed=draw),
                         draws, seed=5)))})
    return rows


def coverage(sims: int, n_boot: int) -> list[dict]:
    rows = []
    for ci in CI_METHODS:
        for n_cases in (36, 100):
            for replicates, icc in ((1, 0.3), (3, 0.0), (3, 0.3)):
                for p in (0.02, 0.05, 0.10, 0.30, 0.50):
                    rng = np.random.default_rng(int(p * 1000) + n_cases + replicates)
                    v = verdict_table(rng, p, n_cases=n_cases, replicates=replicates, icc=icc, sims=sims)
                    rates = compute_rates(v, axes=[], factors=["group"], ci=ci, n_boot=n_boot, seed=1)
                    covered = (rates["ci_low"] <= p + 1e-12) & (p - 1e-12 <= rates["ci_high"])
                    overall = (rates["subgroup"] == "all").to_numpy()
                    width = (rates["ci_high"] - rates["ci_low"]).to_numpy()
                    rows.append({"ci": ci, "p": p, "cases": n_cases, "replicates": replicates, "icc": icc,
                                 "coverage": round(float(covered[overall].mean()), 3),
                                 "coverage_subgroups": round(float(covered[~overall].mean()), 3),
                                 "subgroup_cases": n_cases // 6,
                                 "points": int((width <= 0).sum())})
    return rows


def anchored(sims: int) -> list[dict]:
    rows = []
    for replicates, process in ((1, "beta"), (3, "beta"), (3, "probit")):
        for judge in ("good", "biased", "noisy"):
            for p in (0.02, 0.05, 0.3, 0.7, 0.95, 0.98):
                for labels in (20, 50, 100):
                    rng = np.random.default_rng(int(p * 1000) + labels + 7 * replicates)
                    y, f, labelled, case = anchoring_world(rng, sims, p, transcripts=600, labels=labels,
                                                           judge=JUDGES[judge], replicates=replicates, icc=0.3,
                                                           process=process)
                    _, low, high, human_low, human_high = anchored_intervals(y, f, labelled, case)
                    order = np.argsort(~labelled, axis=1, kind="stable")  # labelled transcripts first
                    ys, fs = np.take_along_axis(y, order, 1), np.take_along_axis(f, order, 1)
                    _, n_low, n_high, _ = ppi_mean_batch(ys[:, :labels], fs[:, :labels], fs[:, labels:], 0.05)
                    n_low, n_high = np.clip(n_low, 0, 1), np.clip(n_high, 0, 1)
                    width, human = high - low, human_high - human_low
                    rows.append({"judge": judge, "p": p, "labels": labels, "replicates": replicates,
                                 "icc": 0.3 if replicates > 1 else 0.0, "process": process,
                                 "coverage": round(float(np.mean((low <= p) & (p <= high))), 3),
                                 "coverage_normal": round(float(np.mean((n_low <= p) & (p <= n_high))), 3),
                                 "points": int((width <= 0).sum()), "points_normal": int((n_high - n_low <= 0).sum()),
                                 "width_ratio": round(float(np.median(width / human)), 3),
                                 "wider": round(float(np.mean(width > human + 1e-12)), 3)})
    return rows


def markdown(document: dict) -> str:
    out = [f"Command: `{document['command']}`, {document['date']}.", ""]
    if "calibration" in document:
        out += _joint_markdown(document)
    if "coverage" in document:
        out += _coverage_markdown(document)
    if "anchored" in document:
        out += _anchored_markdown(document)
    out += ["", f"({document['seconds']:.0f} s)"]
    return "\n".join(out)


def _joint_markdown(document: dict) -> list[str]:
    out = [(f"False-positive rate at alpha = 0.05 ({document['draws']} simulated multiverses per row, B = "
             f"{document['boot']}; 8 universes sharing cases, intra-case correlation 0.3; Monte Carlo SE about "
             f"{np.sqrt(0.05 * 0.95 / document['draws']):.3f}). \"power\" rows: true rate 0.30 against t = 0.10."),
            ""]
    out += ["| test | truth | t | cases | replicates | ICC | median effect | n significant | Stouffer Z |",
            "|---|---|---|---|---|---|---|---|---|"]
    for r in document["calibration"]:
        out.append(f"| {r['test']} | {r['truth']:g} | {r['t']:g} | {r['cases']} | {r['replicates']} | "
                   f"{r.get('icc', 0.3):g} | {r['median_effect']:.3f} | {r['n_significant']:.3f} | "
                   f"{r['stouffer_z']:.3f} |")
    return out


def _coverage_markdown(document: dict) -> list[str]:
    out = ["", (f"Coverage at nominal 0.95 ({document['sims']} data sets per row; subgroups: 6 of them per data "
                 "set, each with a sixth of the cases; points = intervals of zero width)."), ""]
    out += ["| ci | p | cases | replicates | ICC | coverage | coverage, subgroups (cases) | points |",
            "|---|---|---|---|---|---|---|---|"]
    for r in document["coverage"]:
        out.append(f"| {r['ci']} | {r['p']:g} | {r['cases']} | {r['replicates']} | {r['icc']:g} | "
                   f"{r['coverage']:.3f} | {r['coverage_subgroups']:.3f} ({r['subgroup_cases']}) | {r['points']} |")
    return out


def _anchored_markdown(document: dict) -> list[str]:
    out = ["", (f"Anchored (PPI++) 95% intervals ({document['anchored_sims']} cells of 600 transcripts per row and "
                "judge; judges good 0.95/0.95, biased 0.6/0.95, noisy 0.7/0.7 sensitivity/specificity; replicates 3 = "
                "200 cases of 3 at intra-case correlation 0.3; process beta: Beta case effect, probit: latent case "
                "effect with a fifth of the cases hard, where the judge guesses. Coverage per judge; ppi-python's "
                "normal interval on the same data, its lowest coverage over the judges and its point intervals over "
                "all three; width: the median anchored width over the humans-only Wilson width, per judge; wider: "
                "the largest share, over the judges, of cells where the anchored interval is the wider)."), ""]
    out += ["| replicates | process | labels | p | coverage (good, biased, noisy) | ppi-python normal | points "
            "(anchored, normal) | width (good, biased, noisy) | wider |", "|---|---|---|---|---|---|---|---|---|"]
    groups: dict[tuple, list[dict]] = {}
    for r in document["anchored"]:
        groups.setdefault((r["replicates"], r["process"], r["labels"], r["p"]), []).append(r)
    for (replicates, process, labels, p), rows in groups.items():
        out.append(f"| {replicates} | {process} | {labels} | {p:g} | "
                   + ", ".join(f"{r['coverage']:.3f}" for r in rows)
                   + f" | {min(r['coverage_normal'] for r in rows):.3f} | {sum(r['points'] for r in rows)}, "
                   + f"{sum(r['points_normal'] for r in rows)} | "
                   + ", ".join(f"{r['width_ratio']:.2f}" for r in rows)
                   + f" | {max(r['wider'] for r in rows):.2f} |")
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--draws", type=int, default=400, help="simulated multiverses per calibration row")
    parser.add_argument("--boot", type=int, default=199, help="null draws per joint test")
    parser.add_argument("--sims", type=int, default=1000, help="data sets per coverage row")
    parser.add_argument("--n-boot", type=int, default=400, help="case-bootstrap replicates per interval")
    parser.add_argument("--anchored-sims", type=int, default=1000, help="cells per anchored (PPI++) coverage row")
    parser.add_argument("--part", choices=("all", "joint", "intervals", "anchored"), default="all",
                        help="run only these rows")
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    args = parser.parse_args()
    started = time.time()
    document = {
        "command": "python tests/bench/bench_calibration.py " + " ".join(sys.argv[1:]),
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "draws": args.draws, "boot": args.boot, "sims": args.sims, "n_boot": args.n_boot,
        "anchored_sims": args.anchored_sims,
        "binomial_bound_0.06": float(stats.binom.ppf(0.999, args.draws, 0.06) / args.draws),
    }
    if args.part in ("all", "joint"):
        document["calibration"] = calibration(args.draws, args.boot)
    if args.part in ("all", "intervals"):
        document["coverage"] = coverage(args.sims, args.n_boot)
    if args.part in ("all", "anchored"):
        document["anchored"] = anchored(args.anchored_sims)
    document["seconds"] = round(time.time() - started, 1)
    print(json.dumps(document, indent=2) if args.json else markdown(document))
    return 0


if __name__ == "__main__":
    sys.exit(main())
