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

from multiverse.analysis import rollout_configurations, transcript_keys
from multiverse.core import OK
from multiverse.tables import universe_ids

from ..errors import InputError
from ._identity import IDENTITY_COLUMNS, keys_digest, run_id

__all__ = ["LABEL_COLUMNS", "SHEET_COLUMNS", "draw_sample", "sheet_columns"]

#: The column people fill: ``compliant`` (0/1) for a run of compliant labels, ``score`` for a scored run.
LABEL_COLUMNS = ("compliant", "score")


def sheet_columns(label: str = "compliant") -> list[str]:
    """The sheet's fixed columns; the design factors go between ``transcript_key`` and the ``label`` column, and
    the sample's identity (``_identity.IDENTITY_COLUMNS``) comes last."""
    return ["system", "case_id", "replicate", "transcript_key", label, "note", *IDENTITY_COLUMNS]


#: The sheet's fixed columns for compliant labels (``sheet_columns``).
SHEET_COLUMNS = sheet_columns()


def draw_sample(verdicts: pd.DataFrame, transcripts: Mapping[str, Any] | None, n: int, seed: int = 0,
                factors: Sequence[str] = (), axes: Sequence[str] = (), *, label: str = "compliant") -> pd.DataFrame:
    """``n`` transcripts per system from each distinct rollout configuration, uniformly at random.

    Only transcripts that exist are drawn: not a failed rollout, and, when
    ``transcripts`` (key -> record) is given, one it holds. Where a system
    has fewer, all of them are taken and ``attrs["notes"]`` says so. Rows come
    in random order (so labellers do not meet one system in a block), with
    ``sheet_columns(label)`` and the ``factors``; ``label`` (``compliant``, or
    ``score`` for a scored run) and ``note`` are empty,
    and every row carries the sample's identity (``attrs["identity"]``: the
    run's id, ``seed``, ``n`` and the digest of the drawn keys, which are in
    ``attrs["keys"]`` as ``transcript_keys`` spells them). ``axes`` derive
    universe ids for a table without a ``universe_id`` column and name the
    rollout configurations in the notes.
    """
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise InputError(f"n: expected a whole number of transcripts per system, at least 1, got {n!r}", param="n")
    if label not in LABEL_COLUMNS:
        raise InputError(f"label: expected one of {', '.join(LABEL_COLUMNS)}, got {label!r}", param="label")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise InputError(f"seed: expected a whole number, at least 0, got {seed!r}", param="seed")
    candidates, v = _candidates(verdicts, transcripts, axes)
    names: dict[int, str] = {}
    rng = np.random.default_rng(seed)
    picked, notes = [], []
    for (rollout, system), group in candidates.groupby(["_rollout", "system"], sort=True):
        if len(group) < n:
            names = names or _rollout_names(v, [a for a in axes if a in v.columns])
            notes.append(f"system {system}{names[rollout]}: only {len(group)} transcripts, all drawn instead of {n}")
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
        label: "",
        "note": "",
    })
    identity = {"sample_run": run_id(candidates, transcripts, [*axes, *factors]), "sample_seed": int(seed),
                "sample_n": int(n), "sample_keys": keys_digest(sample["_key"])}
    out = out.assign(**identity)
    out.attrs["notes"] = notes
    out.attrs["identity"] = identity
    out.attrs["keys"] = sample["_key"].astype(str).tolist()
    return out


def _candidates(verdicts: pd.DataFrame, transcripts: Mapping[str, Any] | None,
                axes: Sequence[str]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """One row per transcript that can be drawn, in a fixed order; and every row with its rollout configuration."""
    v = verdicts.assign(_key=transcript_keys(verdicts), universe_id=universe_ids(verdicts, list(axes)))
    v["_rollout"] = v["universe_id"].map(rollout_configurations(v))
    every = v
    if "status" in v.columns:
        failed = v.loc[v["status"].eq("rollout_failed"), "_key"]
        v = v[~v["_key"].isin(set(failed))]
    if transcripts is not None:
        exists = v["_key"].map(lambda k: isinstance(transcripts.get(k), Mapping)
                               and transcripts[k].get("status") in (None, OK))
        v = v[exists.astype(bool)]
    candidates = v.drop_duplicates("_key").sort_values(["_rollout", "system", "_key"], kind="stable")
    if candidates.empty:
        raise InputError("verdicts: no transcript to label (every rollout failed, or the table is empty)",
                         param="verdicts")
    return candidates, every


def _rollout_names(v: pd.DataFrame, axes: Sequence[str]) -> dict[int, str]:
    """What sets each rollout configuration apart, as a note names it: ", setting=home, user=adv".

    The options of the axes that are fixed inside a configuration and differ
    between them (the setting, the simulated user...); where no axis does
    that (an import whose graders skipped items), its number and universes.
    Empty when there is one configuration: nothing to tell apart.
    """
    universes = v.drop_duplicates("universe_id")
    if universes["_rollout"].nunique() < 2:
        return {int(r): "" for r in universes["_rollout"].unique()}
    varying = [a for a in axes if universes[a].nunique(dropna=False) > 1]
    names = {}
    for rollout, group in universes.groupby("_rollout", sort=True):
        fixed = [f"{a}={group[a].iloc[0]}" for a in varying if group[a].nunique(dropna=False) == 1]
        if not fixed:
            ids = group["universe_id"].astype(str).tolist()
            fixed = [f"rollout configuration {int(rollout) + 1}, universe{'s' if len(ids) > 1 else ''} "
                     + " ".join(ids[:3]) + (" ..." if len(ids) > 3 else "")]
        names[int(rollout)] = ", " + ", ".join(fixed)
    return names
