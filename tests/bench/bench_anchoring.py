"""How long calibrate takes on a large multiverse: prints rows, universes and seconds.

    python tests/bench/bench_anchoring.py [--universes 2000] [--cases 120]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pandas as pd

from multiverse.analysis import calibrate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--universes", type=int, default=2000)
    parser.add_argument("--systems", type=int, default=4)
    parser.add_argument("--cases", type=int, default=120)
    parser.add_argument("--labels", type=int, default=30)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    u_n, s_n, c_n = args.universes, args.systems, args.cases
    u = np.repeat(np.arange(u_n), s_n * c_n)
    s = np.tile(np.repeat(np.arange(s_n), c_n), u_n)
    c = np.tile(np.arange(c_n), u_n * s_n)
    system = np.char.add("s", s.astype(str))
    case = np.char.add("c", c.astype(str))
    verdicts = pd.DataFrame({
        "universe_id": u.astype(str), "judge": (u % 50).astype(str), "scoring": (u // 50).astype(str),
        "system": system, "case_id": case, "replicate": 0, "transcript_key": np.char.add(system, case),
        "status": "ok", "compliant": pd.array(rng.random(len(u)) < 0.6, dtype="boolean"),
    })
    one = verdicts[verdicts["universe_id"] == "0"]
    human = (one.groupby("system").sample(args.labels, random_state=1)[["system", "case_id", "transcript_key"]]
             .assign(compliant=rng.integers(0, 2, s_n * args.labels)))
    start = time.perf_counter()
    result = calibrate(verdicts, human, ["judge", "scoring"])
    seconds = time.perf_counter() - start
    print(f"calibrate: {len(verdicts):,} verdict rows, {u_n:,} universes x {s_n} systems, "
          f"{len(human)} labels: {seconds:.1f} s ({len(result.rates):,} anchored rates)")


if __name__ == "__main__":
    main()
