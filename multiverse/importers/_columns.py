"""The optional columns an import carries beyond the label: replicates, transcripts, rationales.

Shared by every importer, so a table, an Inspect log and a promptfoo result file give the
same tables for the same information:

- a replicate is a whole number >= 0 naming one of several runs of an item (Inspect's
  epochs); rates then cluster their intervals by item;
- a transcript is the system's answer (or its id); its key digests the system, the item,
  the replicate and the answer, so two judges pair only when they judged the same answer;
- a rationale is the judge's reason, one criteria row per verdict (the explorer shows it).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import pandas as pd

from multiverse.core import CRITERIA_COLUMNS, OK
from multiverse.errors import InputError
from multiverse.importers._guard import MAX_REPLICATE

if TYPE_CHECKING:
    from multiverse.results import Results

__all__ = ["assistant_transcript", "import_rates", "rationale_criteria", "replicate_numbers", "row_keys",
           "table_transcripts", "write_judged_import"]


def replicate_numbers(path: Path, column: pd.Series, name: str) -> np.ndarray:
    """The replicate column as whole numbers >= 0; one line naming the row otherwise."""
    text = column.astype("string").str.strip()
    number = pd.to_numeric(text, errors="coerce")
    whole = number.notna() & (number == np.floor(number.fillna(0))) & (number >= 0) & (number <= MAX_REPLICATE)
    if not whole.all():
        row = int(np.flatnonzero(~whole.to_numpy(dtype=bool, na_value=False))[0])
        raise InputError(f"{path}: {name}: {_shown(text.iloc[row])} in data row {row + 1}; expected a whole number "
                         f"from 0 to {MAX_REPLICATE:,} (the replicate, e.g. the epoch)")
    return cast("np.ndarray", number.to_numpy(dtype=np.int64))


def row_keys(columns: pd.DataFrame, kind: str) -> np.ndarray:
    """Stable 16-hex keys per row (pandas' fixed-key 64-bit hash; vectorised)."""
    hashed = pd.util.hash_pandas_object(columns.astype(str).assign(_kind=kind), index=False).to_numpy()
    return np.char.mod("%016x", hashed).astype(object)


def assistant_transcript(system: str, text: str) -> dict[str, Any]:
    """A transcript record of one answer (a table's or a result file's output)."""
    return {"system": system, "status": OK, "reason": "", "turns": [{"role": "assistant", "content": text}]}


def table_transcripts(values: pd.Series, where: pd.DataFrame, *, path: Path | None = None,
                      name: str = "transcript") -> tuple[np.ndarray, dict[str, dict[str, Any]]]:
    """(transcript_key per row, transcripts by key) from a column of answers or answer ids.

    ``where`` holds each row's system, case_id and replicate. An empty value is refused:
    a table whose rows mix keyed and unkeyed answers could not say what was paired.
    """
    text = values.astype("string")
    empty = text.isna() | (text.str.strip() == "")
    if empty.any():
        row = int(np.flatnonzero(empty.to_numpy(dtype=bool))[0])
        raise InputError(f"{path}: {name}: empty value in data row {row + 1}; expected the transcript (or its id) "
                         "in every row")
    keyed = where.reset_index(drop=True).assign(_text=text.to_numpy(dtype=object))
    keys = row_keys(keyed, "transcript")
    transcripts = {key: assistant_transcript(str(system), str(answer))
                   for key, system, answer in zip(keys, keyed["system"], keyed["_text"])}
    return keys, transcripts


def rationale_criteria(verdicts: pd.DataFrame, rationales: Sequence[Any] | pd.Series, criterion: str | Sequence[str],
                       ) -> pd.DataFrame:
    """One criteria row per verdict row: the judge's label and its reason under ``criterion``.

    ``criterion`` names the label (one name for every row, or one per row). A missing
    rationale is empty text; the row keeps its verdict's label (NA where none).
    """
    n = len(verdicts)
    reasons = pd.Series(list(rationales), dtype="string").fillna("").to_numpy(dtype=object)
    names = [criterion] * n if isinstance(criterion, str) else list(criterion)
    compliant = verdicts["compliant"].astype("boolean").to_numpy()
    frame = pd.DataFrame({
        "judgment_key": verdicts["judgment_key"].to_numpy(dtype=object),
        "sample": np.zeros(n, dtype=np.int64),
        "criterion": np.asarray(names, dtype=object),
        "permissible": pd.array([pd.NA] * n, dtype="boolean"),
        "applicable": pd.array(~verdicts["status"].isin(["excluded"]).to_numpy(dtype=bool), dtype="boolean"),
        "compliant": pd.array(compliant, dtype="boolean"),
        "rationale": reasons,
    })
    return frame[list(CRITERIA_COLUMNS)]


def _shown(value: Any) -> str:
    if value is pd.NA:  # a blank cell: 'None' was shown, which the file does not hold
        return "an empty cell"
    shown = repr(value)
    return shown if len(shown) <= 40 else shown[:37] + "..."


def import_rates(verdicts: pd.DataFrame, *, axes: Sequence[str], factors: Sequence[str], ci: str,
                 scale: Mapping[str, Any], source: str) -> pd.DataFrame:
    """The rates of an import: shares of compliant rows, or for a scored scale the mean score.

    A scored import's rate is the mean of its scores rescaled to [0, 1] (the ``mean``
    estimator of scored verdicts), never partial credit counted as a label.
    """
    from multiverse.analysis import compute_rates
    from multiverse.tables import ScaleRecord

    if scale.get("type", "binary") == "binary":
        return compute_rates(verdicts, axes=axes, factors=factors, ci=ci)
    return compute_rates(verdicts, axes=axes, factors=factors, ci=ci, estimator="mean", scale=ScaleRecord(**scale))


def write_judged_import(source: str, out_dir: str | os.PathLike[str], *, verdicts: pd.DataFrame, criteria: pd.DataFrame | None,
                        rates: pd.DataFrame, transcripts: Any, axes: list[str], factors: list[str], primary: Any,
                        warnings: list[str], input: dict[str, Any], ci: str, estimator: str | None,
                        scale: dict[str, Any] | None = None, budget: Any = None, losses: Any = None,
                        options: dict[str, dict[str, Any]] | None = None,
                        universe_scales: dict[str, dict[str, Any]] | None = None,
                        universe_scoring: dict[str, dict[str, Any]] | None = None, rate: str = "compliance",
                        unparsed: Sequence[str] = ("exclude",)) -> Results:
    """Write a harness's import (one universe per judge when there are several) and return its Results.

    Inspect's, promptfoo's and lm-eval's imports share this shape: a single judge's column is dropped,
    as a table without axes has none. ``options`` gives each universe's options where the judge is not
    the only axis (else read from the judge column); ``universe_scales`` a universe's own scale, and
    ``universe_scoring`` its own scoring (``{"estimator": ...}``, where ``estimator`` is None because
    the universes differ in it).
    """
    from multiverse.importers._directory import resolve_primary, write_import_dir

    if options is None:
        options = {uid: ({"judge": judge} if axes else {}) for uid, judge in
                   verdicts.drop_duplicates("universe_id")[["universe_id", "judge"]].itertuples(index=False)}
    manifest: dict[str, Any] = {
        "source": source,
        "axes": axes,
        "factors": factors,
        # A universe with a scale or scoring of its own says so in its entry (tables.universe_scales).
        "universes": [_universe_entry(uid, options[uid], scale=(universe_scales or {}).get(uid),
                                      scoring=(universe_scoring or {}).get(uid)) for uid in options],
        "primary": resolve_primary(primary, axes, options),
        "primary_declared": bool(primary),
        "warnings": warnings,
        "universe_options": options,
        "input": input,
        **({"scale": scale} if scale is not None else {}),
        "estimator": estimator,
        "ci": ci,
        "level": 0.95,
    }
    if "judge" in verdicts.columns and "judge" not in axes:
        verdicts = verdicts.drop(columns="judge")
    return write_import_dir(out_dir, verdicts=verdicts, criteria=criteria, rates=rates, manifest=manifest,
                            transcripts=transcripts, budget=budget, losses=losses, rate=rate, unparsed=unparsed)


def _universe_entry(uid: str, options: dict[str, Any], *, scale: dict[str, Any] | None,
                    scoring: dict[str, Any] | None) -> str | dict[str, Any]:
    """A universe in an import's manifest: its id, or an object where it has a scale or scoring of its own."""
    own = {**({"scale": scale} if scale is not None else {}), **({"scoring": scoring} if scoring is not None else {})}
    return {"id": uid, "options": options, **own} if own else uid
