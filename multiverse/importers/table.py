"""Import a generic label table (CSV or parquet) as an import directory.

One row is one label: a system's answer to an item (a case), judged compliant or not,
under the measurement choices named in the axis columns. Each distinct combination of
axis values is a universe. The label is boolean, 0/1, or a category whose compliant
value ``positive`` names. An empty label makes the row excluded (reason ``empty label``).
universe_id is ``keys.digest({"source": "table", "axes": {axis: value}})``.

Bad input raises :class:`multiverse.errors.InputError` with one line naming the file,
the column and what was expected, and writes nothing: a missing column, a label that
is neither binary nor named by ``positive``, an empty axis/system/item value, or two
rows for the same (universe, system, item).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from multiverse.errors import InputError
from multiverse.importers.directory import ImportResult, write_import_dir
from multiverse.keys import digest
from multiverse.stages.score import compute_rates

__all__ = ["import_table", "read_label_table"]

# Columns an import writes itself; an axis or factor column may not take these names.
_RESERVED = (
    "universe_id", "system", "case_id", "replicate", "transcript_key", "judgment_key", "status",
    "reason", "compliant", "subgroup", "n", "n_compliant", "rate", "ci_low", "ci_high", "estimator",
)
_TRUE = {"true", "1", "1.0"}
_FALSE = {"false", "0", "0.0"}


def read_label_table(path: str | os.PathLike) -> pd.DataFrame:
    """Read a .csv or .parquet table; InputError when it is missing or unreadable."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in (".csv", ".parquet", ".pq"):
        raise InputError(f"{path}: expected a .csv or .parquet file")
    if not path.is_file():
        raise InputError(f"{path}: file not found")
    try:
        if suffix == ".csv":
            # Labels, items and option names are read as written ("007" stays "007").
            return pd.read_csv(path, dtype=str, keep_default_na=False, na_values=[""])
        return pd.read_parquet(path)
    except Exception as exc:  # noqa: BLE001 - any reader failure is a bad input file
        detail = " ".join(str(exc).split())[:200]
        raise InputError(f"{path}: cannot read as {suffix.lstrip('.')}: {detail}") from exc


def import_table(
    path: str | os.PathLike,
    *,
    system: str,
    item: str,
    label: str,
    axes: Sequence[str] = (),
    positive: str | None = None,
    out_dir: str | os.PathLike,
    factors: Sequence[str] = (),
) -> ImportResult:
    """Import a label table into ``out_dir``; see the module docstring.

    ``system``, ``item`` and ``label`` name the columns holding the system, the item
    (it becomes case_id) and the compliance label; every ``axes`` column is a
    measurement choice, ``factors`` are optional design-factor columns for subgroup
    rates. Returns the :class:`ImportResult` (verdicts, rates, manifest; no criteria).
    """
    path = Path(path)
    axes, factors = list(axes), list(factors)
    frame = read_label_table(path)
    _check_columns(path, frame, system, item, label, axes, factors)
    if frame.empty:
        raise InputError(f"{path}: {label}: expected at least one labelled row, the table is empty")

    compliant, empty = _compliance(path, frame[label], label, positive)
    axis_values = {axis: _names(path, frame[axis], axis) for axis in axes}
    systems = _names(path, frame[system], system)
    items = _names(path, frame[item], item)

    combos = pd.DataFrame(axis_values) if axes else pd.DataFrame(index=frame.index)
    universe_ids = _universe_ids(combos, axes)
    keyed = pd.DataFrame({"universe_id": universe_ids, "system": systems, "case_id": items})
    duplicated = keyed.duplicated(keep=False)
    if duplicated.any():
        first = keyed[duplicated].index[0]
        where = ", ".join(f"{axis}={axis_values[axis][first]}" for axis in axes)
        universe = f"universe ({where}), " if axes else ""
        raise InputError(
            f"{path}: {', '.join([*axes, system, item])}: duplicate rows for {universe}"
            f"{system}={systems[first]}, {item}={items[first]}; expected one label per universe, system and item"
        )

    verdicts = pd.DataFrame({"universe_id": universe_ids})
    for axis in axes:
        verdicts[axis] = axis_values[axis]
    verdicts["system"] = systems
    verdicts["case_id"] = items
    for factor in factors:
        verdicts[factor] = frame[factor].fillna("").astype(str).to_numpy()
    verdicts["replicate"] = 0
    # A row's transcript is the system's answer to the item; each universe labels it.
    verdicts["transcript_key"] = _row_keys(verdicts[["system", "case_id"]], "transcript")
    verdicts["judgment_key"] = _row_keys(verdicts[["universe_id", "system", "case_id"]], "judgment")
    verdicts["status"] = np.where(empty, "excluded", "ok")
    verdicts["reason"] = np.where(empty, "empty label", "")
    labels = pd.array(compliant, dtype="boolean")
    labels[empty] = pd.NA
    verdicts["compliant"] = labels

    warnings = []
    if empty.any():
        warnings.append(f"{path}: {label}: {int(empty.sum())} rows have an empty label and are excluded")
    rates = compute_rates(verdicts, axes=axes, factors=factors)
    options = (
        verdicts.drop_duplicates("universe_id").set_index("universe_id")[axes].to_dict("index")
        if axes
        else {universe_ids[0]: {}}
    )
    manifest = {
        "source": "table",
        "axes": axes,
        "factors": factors,
        "universes": list(options),
        "primary": None,
        "warnings": warnings,
        "universe_options": options,
        "input": {"file": str(path), "system": system, "item": item, "label": label, "positive": positive},
        "estimator": "pooled",
        "ci": "wilson",
        "level": 0.95,
    }
    return write_import_dir(out_dir, verdicts=verdicts, criteria=None, rates=rates, manifest=manifest)


def _check_columns(path, frame, system, item, label, axes, factors) -> None:
    named = {"--system": system, "--item": item, "--label": label}
    named.update({f"--axis {axis}": axis for axis in axes})
    for flag, column in named.items():
        if column not in frame.columns:
            have = ", ".join(map(str, frame.columns[:12])) + (", ..." if len(frame.columns) > 12 else "")
            raise InputError(f"{path}: {column}: column not found (given as {flag}; the table has: {have})")
    for factor in factors:
        if factor not in frame.columns:
            raise InputError(f"{path}: {factor}: factor column not found")
    roles = [system, item, label, *axes, *factors]
    for column in roles:
        if roles.count(column) > 1:
            raise InputError(f"{path}: {column}: column used twice; expected distinct system, item, label and axis columns")
    for column in [*axes, *factors]:
        if column in _RESERVED:
            raise InputError(f"{path}: {column}: axis column name is reserved for the verdicts table; rename the column")


def _names(path: Path, column: pd.Series, name: str) -> np.ndarray:
    """A column of names (systems, items, options) as strings; no empty values."""
    text = column.astype("string").str.strip()
    empty = text.isna() | (text == "")
    if empty.any():
        row = int(np.flatnonzero(empty.to_numpy())[0])
        raise InputError(f"{path}: {name}: empty value in data row {row + 1}; expected a name in every row")
    return text.to_numpy(dtype=object)


def _compliance(path: Path, column: pd.Series, name: str, positive: str | None) -> tuple[np.ndarray, np.ndarray]:
    """(compliant, empty) boolean arrays from the label column."""
    text = column.astype("string").str.strip()
    empty = (text.isna() | (text == "")).to_numpy()
    present = text[~empty]
    if positive is not None:
        wanted = str(positive).strip()
        if pd.api.types.is_bool_dtype(column) or set(present.str.lower()) <= _TRUE | _FALSE:
            # Booleans and 0/1 compare by meaning: --positive true matches True, 1 matches 1.0.
            meaning = _binary(present.str.lower())
            if wanted.lower() not in _TRUE | _FALSE:
                raise InputError(f"{path}: {name}: --positive {positive!r} is not a value of the binary label column")
            matches = meaning == (wanted.lower() in _TRUE)
        else:
            matches = (present == wanted).to_numpy(dtype=bool)
            if not matches.any():
                raise InputError(
                    f"{path}: {name}: --positive {positive!r} is not a value of the column (values: {_some(present)})"
                )
    else:
        lowered = present.str.lower()
        if not set(lowered) <= _TRUE | _FALSE:
            raise InputError(
                f"{path}: {name}: expected a binary label (true/false or 0/1), found {_some(present)}; "
                "name the compliant value with --positive"
            )
        matches = _binary(lowered)
    compliant = np.zeros(len(column), dtype=bool)
    compliant[~empty] = matches
    return compliant, empty


def _binary(lowered: pd.Series) -> np.ndarray:
    return lowered.isin(_TRUE).to_numpy(dtype=bool)


def _some(values: pd.Series) -> str:
    distinct = list(dict.fromkeys(values.tolist()))
    shown = ", ".join(map(str, distinct[:5]))
    return shown + (f", ... ({len(distinct)} distinct)" if len(distinct) > 5 else "")


def _universe_ids(combos: pd.DataFrame, axes: list[str]) -> np.ndarray:
    """Universe id = digest of the source and the universe's axis values."""
    if not axes:
        return np.full(len(combos), digest({"source": "table", "axes": {}}), dtype=object)
    distinct = combos.drop_duplicates()
    ids = {
        tuple(row): digest({"source": "table", "axes": dict(zip(axes, row))})
        for row in distinct.itertuples(index=False)
    }
    return np.array([ids[tuple(row)] for row in combos.itertuples(index=False)], dtype=object)


def _row_keys(columns: pd.DataFrame, kind: str) -> np.ndarray:
    """Stable 16-hex keys per row (pandas' fixed-key 64-bit hash; vectorised)."""
    hashed = pd.util.hash_pandas_object(columns.assign(_kind=kind), index=False).to_numpy()
    return np.char.mod("%016x", hashed).astype(object)
