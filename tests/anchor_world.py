"""A run folder for the anchoring tests: two systems, two users (two rollout configurations), two judges.

Each user has its own transcripts, so the four universes (judge x user)
share each user's; people's scores (``truth``) are on a 1-5 scale. With
``scored=False`` the judges give compliant labels (a score of 4 or more).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from multiverse.tables import write_run_folder

CASES = 40


def scored_folder(root: Path, *, scored: bool = True, scale: dict | None = None) -> tuple[Path, dict]:
    rng = np.random.default_rng(21)
    rows, transcripts, truth = [], {}, {}
    for user in ("coop", "adv"):
        for system, centre in (("atlas", 4.2), ("beacon", 3.1)):
            for i in range(CASES):
                key = f"k{len(truth):04d}"  # says nothing of the system: a blind page shows keys
                truth[key] = float(np.clip(np.rint(rng.normal(centre - (user == "adv"), 1.0)), 1, 5))
                transcripts[key] = {"key": key, "system": system, "status": "ok", "reason": "",
                                    "turns": [{"role": "user", "content": f"question {i} ({user})"},
                                              {"role": "assistant", "content": f"answer number {key}"}]}
                for judge, bias in (("fair", 0.0), ("generous", 1.0)):
                    score = float(np.clip(np.rint(truth[key] + bias + rng.normal(0, 0.6)), 1, 5))
                    rows.append({"universe_id": f"{judge}-{user}", "judge": judge, "user": user, "system": system,
                                 "case_id": f"c{i:03d}", "replicate": 0, "transcript_key": key,
                                 "judgment_key": f"{judge}-{key}", "status": "ok", "reason": "",
                                 "score": score if scored else np.nan,
                                 "compliant": pd.NA if scored else score >= 4})
    verdicts = pd.DataFrame(rows).assign(compliant=lambda f: f["compliant"].astype("boolean"))
    manifest = {"source": "table", "axes": ["judge", "user"], "factors": [],
                "universes": sorted(verdicts["universe_id"].unique()), "primary": "fair-coop",
                "scale": (scale or {"type": "ordinal", "min": 1, "max": 5}) if scored else None}
    if scored:
        manifest["estimator"] = "mean"
    rates = pd.DataFrame({"universe_id": ["fair-coop"], "system": ["atlas"], "subgroup": ["all"], "n": [1]})
    out = write_run_folder(root / "run", verdicts=verdicts.drop(columns=[] if scored else ["score"]), criteria=None,
                           rates=rates, manifest=manifest, transcripts=transcripts,
                           spec_document={"rubric": {"criteria": [{"id": "honest", "name": "Honest",
                                                                    "permissible": False, "definition": "Says only what it knows."}]}})
    return out, truth


