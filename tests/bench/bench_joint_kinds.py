"""Calibration of the joint test of a curve for every mix of universe kinds, by simulation (issue 42).

Not collected by pytest (no test functions); the suite's fast version is
tests/analysis/test_joint_kinds.py. Run:

    python tests/bench/bench_joint_kinds.py                      # markdown table, README's cells
    python tests/bench/bench_joint_kinds.py --json               # one JSON document
    python tests/bench/bench_joint_kinds.py --draws 1000 --full  # every mix x rate x cases x replicates
    python tests/bench/bench_joint_kinds.py --cells hard         # the cells that were above 0.06, and power
    python tests/bench/bench_joint_kinds.py --cells span         # the other mixes at the corners of the range

Each row: the share of ``--draws`` simulated multiverses (``scored_world``:
4 judges scoring 1-10, one universe per judge and kind, all reading that
judge's scores; a Beta case effect at intra-case correlation 0.3, shared by
every universe) in which each statistic of ``joint_curve_test`` has p <= 0.05,
under a true null (every universe's rate t) or, in the power rows, at a
known truth. Kinds: ``shares`` (pass/fail labels), ``means`` (the rescaled
mean score), ``cuts`` (the share at or above 7), ``wins`` (a win rate).
Monte Carlo standard error at 0.05 with 200 draws: about 0.015.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "analysis"))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from test_joint_kinds import scored_world

from multiverse.analysis import joint_curve_test
from multiverse.analysis.inference import STATISTICS

RATES = (0.02, 0.05, 0.1, 0.3, 0.5)
MIXES = (("shares",), ("means",), ("cuts",), ("wins",), ("means", "cuts"), ("wins", "shares"), ("means", "cuts", "wins"))

#: The README's cells: (kinds, t, cases, replicates, truth or None).
README_CELLS = [
    *[(("means", "cuts"), t, n, 1, None) for n in (30, 60, 120) for t in RATES],
    *[(("means",), t, n, 1, None) for n in (30, 120) for t in RATES],
    (("means", "cuts"), 0.05, 36, 3, None),
    (("means", "cuts"), 0.3, 36, 3, None),
    (("means",), 0.1, 36, 3, None),
    (("wins", "shares"), 0.05, 36, 1, None),
    (("wins", "shares"), 0.3, 36, 1, None),
    (("means", "cuts", "wins"), 0.1, 60, 1, None),
    (("cuts",), 0.05, 60, 1, None),
    (("means",), 0.1, 60, 1, 0.2),
    (("means", "cuts"), 0.1, 60, 1, 0.2),
    (("cuts",), 0.1, 60, 1, 0.2),
]

#: The cells README's table of 2026-12-07 04:42 had above 0.06 or near it, beside the power rows: what the means'
#: null's confidence-distribution guard was made for (``--cells hard``).
HARD_CELLS = [
    (("means",), 0.02, 120, 1, None),
    (("means",), 0.05, 120, 1, None),
    (("means",), 0.5, 30, 1, None),
    (("means",), 0.1, 36, 3, None),
    (("means", "cuts"), 0.05, 36, 3, None),
    (("means", "cuts"), 0.3, 36, 3, None),
    (("wins", "shares"), 0.05, 36, 1, None),
    (("means",), 0.1, 60, 1, 0.2),
    (("means", "cuts"), 0.1, 60, 1, 0.2),
]

#: The corners the README's cells leave out for the other mixes: t = 0.02 and 0.5 with 30 and 120 cases, for
#: each mix not spanned there (``--cells span``), and win rates with labels with 3 replicates.
SPAN_CELLS = [
    *[(kinds, t, n, 1, None) for kinds in (("shares",), ("cuts",), ("wins",), ("wins", "shares"), ("means", "cuts", "wins"))
      for t in (0.02, 0.5) for n in (30, 120)],
    (("wins", "shares"), 0.05, 36, 3, None),
    (("wins", "shares"), 0.3, 36, 3, None),
]

#: The cells the table of 2026-12-07 19:57 read above 0.05 (200 draws), measured again at 400 (``--cells recheck``).
RECHECK_CELLS = [(("means",), 0.1, 120, 1, None), (("wins", "shares"), 0.5, 30, 1, None)]


def rejection_rates(kinds, t, n_cases, replicates, truth, draws: int, boot: int, seed: int = 0) -> list[float]:
    # Seed 0 is the README's first measurement; another seed draws other data sets and null curves.
    rng = np.random.default_rng(int(t * 1000) + 7 * n_cases + replicates + len(kinds) + 100_003 * seed)
    hits = np.zeros(len(STATISTICS))
    for draw in range(draws):
        m = scored_world(rng, t, kinds=kinds, n_cases=n_cases, replicates=replicates, truth=truth)
        test = joint_curve_test(m, system="s0", threshold=t, boot=boot, seed=draw + 100_003 * seed)
        hits += [test.p[name] <= 0.05 for name in STATISTICS]
    return (hits / draws).round(3).tolist()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--draws", type=int, default=200)
    parser.add_argument("--boot", type=int, default=79, help="null draws per test (79: Bonferroni over 2 kinds resolves 0.05)")
    parser.add_argument("--full", action="store_true", help="every mix x rate x cases (30, 60, 120) x replicates (1, 3)")
    parser.add_argument("--cells", choices=("readme", "hard", "span", "recheck"), default="readme",
                        help="readme: README's table; hard: the cells that were above 0.06, and the power rows; "
                             "span: the other mixes at the corners of rates 0.02-0.5 and 30-120 cases; "
                             "recheck: the cells of the last table above 0.05")
    parser.add_argument("--seed", type=int, default=0, help="0: the README's data sets; another: independent ones")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    cells = ([(k, t, n, r, None) for k, t, n, r in itertools.product(MIXES, RATES, (30, 60, 120), (1, 3))]
             if args.full else {"hard": HARD_CELLS, "span": SPAN_CELLS, "recheck": RECHECK_CELLS}.get(args.cells, README_CELLS))
    started = time.time()
    rows = []
    for kinds, t, n_cases, replicates, truth in cells:
        rates = rejection_rates(kinds, t, n_cases, replicates, truth, args.draws, args.boot, args.seed)
        rows.append({"kinds": " + ".join(kinds), "t": t, "truth": t if truth is None else truth, "cases": n_cases,
                     "replicates": replicates, **dict(zip(STATISTICS, rates))})
        if not args.json:
            print(f"  {rows[-1]}", file=sys.stderr, flush=True)
    meta = {"measured": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), "draws": args.draws,
            "boot": args.boot, "seed": args.seed, "seconds": round(time.time() - started)}
    if args.json:
        print(json.dumps({**meta, "rows": rows}, indent=1))
        return
    print(f"Measured {meta['measured']}, {args.draws} draws per row, B = {args.boot}, seed {args.seed}, "
          f"{meta['seconds']} s.\n")
    print("| kinds | t | truth | cases | replicates | median effect | n significant | Stouffer Z |")
    print("|---|---|---|---|---|---|---|---|")
    for row in rows:
        print(f"| {row['kinds']} | {row['t']:g} | {row['truth']:g} | {row['cases']} | {row['replicates']} | "
              + " | ".join(f"{row[name]:.3f}" for name in STATISTICS) + " |")


if __name__ == "__main__":
    main()
