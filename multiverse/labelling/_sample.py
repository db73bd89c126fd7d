"""Drawing the transcripts people label: a uniform random sample per system and rollout configuration.

Universes that differ only in how transcripts are judged share their
transcripts, so one sample serves them all and is, in each, a uniform random
subset of its own transcripts: the condition prediction-powered inference
needs (``multiverse.analysis.anchoring``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from ..analysis.anchoring import rollout_configurations, transcript_keys
from ..errors import InputError
from ..tables import universe_ids

__all__ = ["SHEET_COLUMNS", "draw_sample"]

#: The sheet's fixed columns; the design factors go between ``transcript_key`` and ``compliant``.
SHEET_COLUMNS = ["system", "case_id", "replicate", "transcript_key", "compliant", "note"]


def draw_sample(verdicts: pd.DataFrame, transcripts: Mapping[str, Any] | None, n: int, seed: int = 0,
                factors: Sequence[str] = (), axes: Sequence[str] = ()) -> pd.DataFrame:
    """``n`` transcripts per system from each distinct rollout configuration, uniformly at random.

    Only transcripts that exist are drawn: not a failed rollout, and, when
    ``transcripts`` (key -> record) is given, one it holds. Where a system
    has fewer, all of them are taken and ``attrs["notes"]`` says so. Rows come
    in random order (so labellers do not meet one system in a block), with
    ``SHEET_COLUMNS`` and the ``factors``; ``compliant`` and ``note`` are empty.
    ``axes`` derive universe ids for a table without a ``universe_id`` column.
    """
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise InputError(f"n: expected a whole number of transcripts per system, at least 1, got {n!r}", param="n")
    v = verdicts.assign(_key=transcript_keys(verdicts), universe_id=universe_ids(verdicts, list(axes)))
    v["_rollout"] = v["universe_id"].map(rollout_configurations(v))
    if "status" in v.columns:
        failed = v.loc[v["status"].eq("rollout_failed"), "_key"]
        v = v[~v["_key"].isin(set(failed))]
    if transcripts is not None:
        exists = v["_key"].map(lambda k: isinstance(transcripts.get(k), Mapping)
                               and transcripts[k].get("status") in (None, "ok"))
        v = v[exists.astype(bool)]
    candidates = v.drop_duplicates("_key").sort_values(["_rollout", "system", "_key"], kind="stable")
    if candidates.empty:
        raise InputError("verdicts: no transcript to label (every rollout failed, or the table is empty)",
                         param="verdicts")
    rng = np.random.default_rng(seed)
    picked, notes = [], []
    for (rollout, system), group in candidates.groupby(["_rollout", "system"], sort=True):
        if len(group) < n:
            notes.append(f"system {system} (rollout configuration {rollout + 1}): only {len(group)} transcripts, "
                         f"all drawn instead of {n}")
        picked.append(group.iloc[rng.choice(len(group), size=min(n, len(group)), replace=False)])
    sample = pd.concat(picked)
    sample = sample.iloc[rng.permutation(len(sample))]
    factors = [f for f in factors if f in sample.columns]
    out = pd.DataFrame({
        "system": sample["system"].astype(str).to_numpy(),
        "case_id": sample["case_id"].astype(str).to_numpy(),
        "replicate": (sample["replicate"].to_numpy() if "replicate" in sample.columns else np.zeros(len(sample), int)),
        "transcript_key": (sample["transcript_key"].astype(object).where(sample["transcript_key"].notna(), "")
                           .to_numpy() if "transcript_key" in sample.columns else ""),
        **{f: sample[f].to_numpy() for f in factors},
        "compliant": "",
        "note": "",
    })
    out.attrs["notes"] = notes
    return out
