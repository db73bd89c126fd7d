"""The two scored tables README imports, and the figure of its scored section.

``analyses/data/grades.csv``: two judges grade three systems from 1 to 10 on
80 items, drawn from known distributions (atlas steady at 6-8, beacon
polarised, comet middling): the mean, the share at or above 6 and the share
at or above 7 do not agree on the top system. ``analyses/data/preferences.csv``:
a pairwise table as multi-judge leaderboards publish one, the preference of
each system over the reference ``baseline`` in [0, 1] (ties 0.5, the
reference against itself included). Both are simulated, seeded, and written
again identically by::

    python analyses/scored_tables.py            # the two tables
    python analyses/scored_tables.py --figure   # and figures/scores_cuts.png from their import
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
GRADES = {  # system -> (grades, probabilities)
    "atlas": ([6, 7, 8], [0.35, 0.40, 0.25]),
    "beacon": ([2, 4, 7, 8, 9, 10], [0.25, 0.05, 0.10, 0.30, 0.20, 0.10]),
    "comet": ([5, 6, 7, 8], [0.30, 0.40, 0.20, 0.10]),
}


def grades(seed: int = 27) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(80):
        for system, (values, weights) in GRADES.items():
            grade = int(rng.choice(values, p=weights))
            for judge, lenience in (("judge-a", 0), ("judge-b", 1)):
                # judge-b is a point more lenient on a third of the answers.
                shift = lenience if rng.random() < 1 / 3 else 0
                rows.append({"judge": judge, "model": system, "item": f"item-{i:02d}",
                             "grade": min(10, grade + shift)})
    return pd.DataFrame(rows)


def preferences(seed: int = 27) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    rows = []
    for system, shift in (("atlas", 0.10), ("beacon", 0.04), ("comet", -0.06), ("baseline", 0.0)):
        for i in range(120):
            if system == "baseline":
                preference = 0.5  # the reference compared with itself: a tie every time
            elif rng.random() < 0.2:
                preference = 0.5
            else:
                preference = round(float(np.clip(rng.beta(2.2, 2.2) + shift, 0.0, 1.0)), 4)
            rows.append({"model": system, "question": f"q{i:03d}", "preference": preference})
    return pd.DataFrame(rows)


def figure(out: Path) -> None:
    import multiverse as mv

    with tempfile.TemporaryDirectory() as folder:
        results = mv.import_table(HERE / "data" / "grades.csv", system="model", item="item", score="grade",
                                  scale=(1, 10), cuts=[6, 7, 8], axes=["judge"], out_dir=Path(folder) / "grades")
        results.ranking(boot=0).figure(kind="cuts").savefig(out, dpi=110)


if __name__ == "__main__":
    data = HERE / "data"
    grades().to_csv(data / "grades.csv", index=False)
    preferences().to_csv(data / "preferences.csv", index=False)
    if "--figure" in sys.argv:
        figure(HERE.parent / "figures" / "scores_cuts.png")
