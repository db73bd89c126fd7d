"""The rates table, recomputed from the verdicts; the stored one is output only, compared and never read as truth.

A folder's ``rates.parquet``/``rates.csv`` is what the writer counted from the verdicts. A user who edits the
folder with pandas (filters, relabels, drops or re-orders rows) leaves it describing other verdicts, so every
reader takes its rates from :func:`recomputed_rates` (the writer's function, with the settings the folder's
manifest and spec record), and :func:`stored_rates_note` says in one line where the stored table disagrees.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

__all__ = ["rates_note", "recomputed_rates", "stored_rates_note"]

_KEYS = ("universe_id", "system", "subgroup")
_COUNTS = ("n", "n_compliant")
_VALUES = ("rate", "ci_low", "ci_high")
# Beyond float noise: the writer and the reader run the same function on the same rows, so only a
# different summation order (re-ordered rows) can move a value, by a few ulps.
_TOLERANCE = 1e-9


def recomputed_rates(results: Any) -> pd.DataFrame:
    """The rates table of ``results`` (a ``Results``: not imported, it imports this module) as its writer counted it: estimator, cut, ties, scale ends, interval,
    level, bootstrap draws and seed per universe from the manifest and the resolved spec."""
    from multiverse.analysis import compute_rates, scoring_choices

    spec = results.resolved_spec
    document = spec.document if spec is not None else None
    # Every universe's estimator, also for labels (cell_balanced is one), not only where scores are read.
    choices = scoring_choices(results.manifest, document, scores_only=False)
    ci, n_boot = results.ci_settings()
    scoring = choices
    if ci is not None:
        scoring = ci if scoring is None else scoring.merge(ci, on="universe_id", how="outer")
    if scoring is not None and scoring.drop(columns="universe_id").isna().all().all():
        scoring = None
    scale = results.scale if results.scales.scored else None
    rollout = (document.model_extra or {}).get("rollout") if document is not None else None
    seed = rollout.get("seed") if isinstance(rollout, dict) else None
    return compute_rates(results.verdicts, axes=results.axes, factors=results.factors, scoring=scoring,
                         scale=scale, n_boot=n_boot, seed=seed if isinstance(seed, int) else 0)


def rates_note(results: Any, *, full: bool = True) -> str | None:
    """:func:`stored_rates_note` of ``results``' stored table, naming the folder's files. ``full=False``: only
    the overall rows' n and counts, against ``system_rates`` (which the analyses share and the curve's case
    matrix reads off for free), for the doors that decide on the verdicts and need no rates table (check, diff:
    a recount of every subgroup and interval there would cost a 100k-universe folder a pass it does not need)."""
    folder = results.source if results.source is not None and results.source.is_dir() else None

    def name(table: str) -> str:
        found = [f"{table}.{ext}" for ext in ("parquet", "csv") if folder is not None and (folder / f"{table}.{ext}").exists()]
        return found[0] if found else f"the {table} table"
    stored = results.rates if results.rates is not None and len(results.rates) else None
    if full or stored is None:
        return stored_rates_note(stored, results.rate_table(), rates_file=name("rates"), verdicts_file=name("verdicts")) \
            if stored is not None else None
    overall = results.system_rates().assign(subgroup="all")
    if {"subgroup", "n"} <= set(stored.columns):
        # system_rates has no row for a cell with nothing counted; the rates table has one with n = 0.
        stored = stored[(stored["subgroup"].astype(str) == "all") & (pd.to_numeric(stored["n"], errors="coerce") > 0)]
    return stored_rates_note(stored, overall, rates_file=name("rates"), verdicts_file=name("verdicts"),
                             values=())


def stored_rates_note(stored: pd.DataFrame | None, recomputed: pd.DataFrame, *, rates_file: str,
                      verdicts_file: str, values: tuple[str, ...] = _VALUES) -> str | None:
    """One line saying where the stored rates table disagrees with ``recomputed`` (rows, n, counts, and the
    ``values``: rate and interval), or None: it agrees, or the folder has none."""
    if stored is None:
        return None
    tail = (f"; the folder was edited after it was written; the rates shown are recomputed from {verdicts_file}")
    head = f"{rates_file} does not match {verdicts_file}"
    missing = [c for c in (*_KEYS, *_COUNTS, *_VALUES) if c not in stored.columns]
    if missing:
        return f"{head} ({rates_file} lacks column(s) {', '.join(missing)}){tail}"
    # The overall rows first: a difference there is the one worth naming.
    mine = _keyed(recomputed)
    mine = mine.iloc[np.argsort(mine.index.get_level_values("subgroup") != "all", kind="stable")]
    theirs = _keyed(stored)
    if theirs.index.has_duplicates:
        return f"{head} ({_where(theirs.index[theirs.index.duplicated()][0])}: {rates_file} has the row twice){tail}"
    # Values on the rows both have first (what the reader sees as wrong), then rows only one has.
    common = mine.index[mine.index.isin(theirs.index)]
    mine, theirs = mine.loc[common], theirs.loc[common]
    for column in (*_COUNTS, *values):
        a = pd.to_numeric(theirs[column], errors="coerce").to_numpy(dtype=float)
        b = pd.to_numeric(mine[column], errors="coerce").to_numpy(dtype=float)
        tolerance = 0.0 if column in _COUNTS else _TOLERANCE
        differ = ~((np.isnan(a) & np.isnan(b)) | (np.abs(a - b) <= tolerance))
        if differ.any():
            i = int(np.flatnonzero(differ)[0])
            return (f"{head} ({_where(mine.index[i])}: stored {column}={_shown(a[i])}, "
                    f"verdicts {_shown(b[i])}){tail}")
    stored_keys, mine_keys = _keyed(stored).index, _keyed(recomputed).index
    only_stored = stored_keys.difference(mine_keys)
    only_verdicts = mine_keys.difference(stored_keys)
    if len(only_stored) or len(only_verdicts):
        where, said = ((_first(only_stored), "a row the verdicts have no rows for") if len(only_stored)
                       else (_first(only_verdicts), "no row for verdicts it holds"))
        return f"{head} ({_where(where)}: {rates_file} has {said}){tail}"
    return None


def _keyed(table: pd.DataFrame) -> pd.DataFrame:
    keys = pd.MultiIndex.from_arrays([table[k].astype(str).to_numpy() for k in _KEYS], names=list(_KEYS))
    return table.set_axis(keys, axis=0)


def _first(keys: pd.Index) -> Any:
    overall = [k for k in keys if k[2] == "all"]
    return overall[0] if overall else keys[0]


def _where(key: Any) -> str:
    universe, system, subgroup = key
    return f"{system} in {universe}" + ("" if subgroup == "all" else f", {subgroup}")


def _shown(value: float) -> str:
    return "empty" if np.isnan(value) else f"{value:g}"
