"""The pairwise table README's "Comparing judges on pairwise verdicts" imports.

``analyses/data/pairwise_orders.csv``: three judges compare each of three systems with the
reference ``baseline`` on 100 questions, each pair asked in both orders (``ab``: the system's
answer shown first, ``ba``: the baseline's), and answer with a three-way verdict: ``A`` (the
answer shown first is better), ``tie`` or ``B``. Each judge sees the answers' quality difference
plus its own lean toward the first answer and its own noise: ``judge-x`` leans hard, ``judge-y``
a little, ``judge-z`` not at all. The baseline compared with itself ties, as leaderboards publish it
(``import table`` names the reference among the table's systems). Simulated, seeded, and written again identically by::

    python analyses/pairwise_orders.py
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
QUALITY = {"atlas": 0.35, "beacon": 0.15, "comet": -0.05}  # mean advantage over the baseline
JUDGES = {"judge-x": (0.45, 0.30), "judge-y": (0.12, 0.15), "judge-z": (0.0, 0.08)}  # lean to first, noise
TIE = 0.15  # a perceived difference within this is a tie


def pairwise_orders(seed: int = 44, questions: int = 100) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    rows = []
    for q in range(questions):
        for model, quality in QUALITY.items():
            difference = quality + rng.normal(0, 0.4)  # the system's answer against the baseline's, this question
            for judge, (lean, noise) in JUDGES.items():
                for order in ("ab", "ba"):
                    seen = (difference if order == "ab" else -difference) + lean + rng.normal(0, noise)
                    verdict = "A" if seen > TIE else "B" if seen < -TIE else "tie"
                    rows.append({"judge": judge, "model": model, "question": f"q{q:03d}", "order": order,
                                 "verdict": verdict})
        rows += [{"judge": judge, "model": "baseline", "question": f"q{q:03d}", "order": order, "verdict": "tie"}
                 for judge in JUDGES for order in ("ab", "ba")]
    return pd.DataFrame(rows)


if __name__ == "__main__":
    pairwise_orders().to_csv(HERE / "data" / "pairwise_orders.csv", index=False)
