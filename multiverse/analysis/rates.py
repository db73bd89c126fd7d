"""The verdict rows that count, and the universe x system rates built from them.

Two table helpers every analysis of a verdicts table shares:

- ``included_verdicts``: the verdict rows that count towards rates (status
  ``ok``, a label present), with a ``universe_id`` and a bool ``compliant``;
- ``system_rates``: the universe x system rates table (n, n_compliant, rate).

Ranking, variance and agreement start from these, so a row that counts in one
analysis counts in all of them.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from multiverse.errors import InputError
from multiverse.tables import universe_ids

__all__ = ["included_verdicts", "system_rates"]

_KEYS = ("replicate", "transcript_key", "judgment_key")


def included_verdicts(verdicts: pd.DataFrame, *, axes: Sequence[str]) -> pd.DataFrame:
    """The verdict rows that count towards rates, with a ``universe_id`` and a bool ``compliant``.

    Keeps rows whose ``status`` is ``ok`` (all rows when there is no status
    column) and whose ``compliant`` is not missing. When ``universe_id`` is
    absent it is derived from the axis values as ``tables.universe_ids`` does,
    so ids agree with tables loaded by ``tables.load_run``.
    Returns universe_id, the axis columns, system, case_id, compliant and
    whichever of replicate, transcript_key, judgment_key the table has.
    """
    axes = list(axes)
    missing = [c for c in ("system", "case_id", "compliant", *axes) if c not in verdicts.columns]
    if missing:
        raise InputError(f"verdicts: column {missing[0]!r}: expected a column of that name")
    keep = ["system", "case_id", "compliant", *axes, *(k for k in _KEYS if k in verdicts.columns)]
    if "universe_id" in verdicts.columns:
        keep.insert(0, "universe_id")
    rows = pd.Series(True, index=verdicts.index)
    if "status" in verdicts.columns:
        rows &= (verdicts["status"] == "ok").to_numpy(dtype=bool, na_value=False)
    compliant = verdicts["compliant"]
    rows &= compliant.notna().to_numpy()
    out = verdicts.loc[rows.to_numpy(), keep]
    out["compliant"] = _as_bool(out["compliant"])
    if "universe_id" not in out.columns:
        out.insert(0, "universe_id", _derived_universe_ids(out, axes))
    return out.reset_index(drop=True)


def _as_bool(compliant: pd.Series) -> np.ndarray:
    if pd.api.types.is_bool_dtype(compliant.dtype) or pd.api.types.is_numeric_dtype(compliant.dtype):
        values = compliant.to_numpy(dtype=float)
        if np.isin(values, (0.0, 1.0)).all():
            return values.astype(bool)
    else:
        text = compliant.astype(str).str.strip().str.lower()
        mapped = text.map({"true": True, "false": False, "1": True, "0": False})
        if mapped.notna().all():
            return mapped.to_numpy(dtype=bool)
    raise InputError("verdicts: column 'compliant': expected true/false values")


def _derived_universe_ids(rows: pd.DataFrame, axes: list[str]) -> np.ndarray:
    """The ids ``tables.universe_ids`` gives."""
    return universe_ids(rows, axes).to_numpy(dtype=object)


def system_rates(verdicts: pd.DataFrame, *, axes: Sequence[str]) -> pd.DataFrame:
    """Rates per universe x system: universe_id, axes..., system, n, n_compliant, rate.

    Rows keep the order in which universes and systems first appear.
    """
    axes = list(axes)
    # Only the columns a rate needs: the rest of a big table is never copied.
    needed = [c for c in ("universe_id", "status", "system", "case_id", "compliant", *axes)
              if c in verdicts.columns]
    included = included_verdicts(verdicts[list(dict.fromkeys(needed))], axes=axes)
    universe, universes = pd.factorize(included["universe_id"])
    system, systems = pd.factorize(included["system"])
    cell = universe.astype(np.int64) * len(systems) + system
    n = np.bincount(cell, minlength=len(universes) * len(systems))
    k = np.bincount(cell, weights=included["compliant"].to_numpy(), minlength=len(n))
    present = pd.unique(cell)  # cells in order of first appearance, like groupby(sort=False)
    options = included.drop_duplicates("universe_id").set_index("universe_id")[axes]
    rates = pd.DataFrame({"universe_id": universes[present // len(systems)]})
    for axis in axes:
        rates[axis] = options[axis].reindex(rates["universe_id"]).to_numpy()
    rates["system"] = systems[present % len(systems)]
    rates["n"] = n[present]
    rates["n_compliant"] = k[present].astype(int)
    rates["rate"] = rates["n_compliant"] / rates["n"]
    return rates


def ci_settings(manifest: dict, spec_document: dict | None) -> tuple[pd.DataFrame | None, int]:
    """The CI method and level of each universe, as the run's spec set them, and n_boot.

    An import's manifest names one ``ci`` (and ``level``) for all universes. A
    run's resolved spec (``spec.yaml``) has ``scoring.ci`` and may patch it per
    axis option (``scoring.ci.method``, ``scoring.ci.level`` or
    ``scoring.ci``), so each universe of the manifest gets its options'
    patches on top of the default. Returns (universe_id, ci, level) rows, or
    None when neither says anything (a bare table: the defaults apply).
    """
    universes = manifest.get("universes") or []
    if spec_document is None and "ci" not in manifest:
        return None, 1000
    if spec_document is None:
        ids = [u["id"] if isinstance(u, dict) else u for u in universes]
        table = pd.DataFrame({"universe_id": [str(i) for i in ids], "ci": manifest["ci"],
                              "level": float(manifest.get("level", 0.95))})
        return table, 1000
    base = dict((spec_document.get("scoring") or {}).get("ci") or {})
    axes = spec_document.get("axes") or {}
    rows, n_boot = [], int(base.get("n_boot", 1000))
    for universe in universes:
        ci = dict(base)
        for axis, option in (universe.get("options") or {}).items():
            for path, value in ((axes.get(axis) or {}).get(option) or {}).items():
                if path == "scoring.ci" and isinstance(value, dict):
                    ci.update(value)
                elif path.startswith("scoring.ci."):
                    ci[path.removeprefix("scoring.ci.")] = value
        n_boot = max(n_boot, int(ci.get("n_boot", 1000)))
        rows.append({"universe_id": str(universe["id"]), "ci": ci.get("method", "wilson"),
                     "level": float(ci.get("level", 0.95))})
    return pd.DataFrame(rows, columns=["universe_id", "ci", "level"]), n_boot


def run_ci_settings(tables) -> tuple[pd.DataFrame | None, int]:
    """:func:`ci_settings` of a loaded run or import (``tables.load_run``)."""
    from pathlib import Path

    import yaml

    spec_document = None
    source = Path(tables.source) if tables.source is not None else None
    if source is not None and (source / "spec.yaml").is_file():
        try:
            spec_document = yaml.safe_load((source / "spec.yaml").read_text(encoding="utf-8"))
        except (yaml.YAMLError, UnicodeDecodeError) as exc:
            raise InputError(f"{source / 'spec.yaml'}: not valid YAML ({str(exc).splitlines()[0]})") from None
        if not isinstance(spec_document, dict):
            raise InputError(f"{source / 'spec.yaml'}: expected a mapping (the resolved spec)")
    return ci_settings(tables.manifest or {}, spec_document)
