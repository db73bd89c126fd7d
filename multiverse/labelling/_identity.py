"""The sample's identity, which every row of a labelling sheet carries: the run, the seed, n and the drawn keys.

A filled sheet comes back from people and spreadsheets, so what it says about
itself is checked, not trusted: ``calibrate`` draws the sample again from the
run with the sheet's seed and n, and the sheet must name that run and those
keys. The run's id is a digest of what the draw chose from (every eligible
transcript's key, system, case, replicate, rollout configuration and
content), not of the folder's path: a copied folder keeps it, a re-run whose
transcripts changed does not.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import pandas as pd

from multiverse.core import CORE_COLUMNS, digest

__all__ = ["IDENTITY_COLUMNS", "keys_digest", "run_id"]

#: The identity columns, the same value on every row of a sheet (the sheet's last columns).
IDENTITY_COLUMNS = ["sample_run", "sample_seed", "sample_n", "sample_keys"]


def run_id(candidates: pd.DataFrame, transcripts: Mapping[str, Any] | None, hidden: Iterable[str] = ()) -> str:
    """A digest of the transcripts a sample is drawn from (``candidates``: one row per transcript, with ``_key``).

    A transcript's content is its record in ``transcripts``; for an import,
    which has none, the table's own columns for it (those the labelling page
    shows), leaving out the judges' columns and ``hidden`` (axes, factors).
    """
    skip = CORE_COLUMNS | set(hidden)
    shown = [c for c in candidates.columns if c not in skip and not str(c).startswith("_")]
    keys = candidates["_key"].astype(str).tolist()
    if transcripts is not None:
        content: list[Any] = [transcripts.get(k) for k in keys]
    else:
        content = candidates[shown].astype(str).to_numpy().tolist() if shown else [None] * len(keys)
    replicate = (candidates["replicate"].astype(str).tolist() if "replicate" in candidates.columns
                 else ["0"] * len(keys))
    rows = zip(keys, candidates["system"].astype(str), candidates["case_id"].astype(str), replicate,
               candidates["_rollout"].astype(int).tolist(), content)
    return digest([list(row) for row in rows])


def keys_digest(keys: Sequence[str]) -> str:
    """A digest of a sample's transcript keys, in any order."""
    return digest(sorted(str(k) for k in keys))
