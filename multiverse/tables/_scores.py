"""A folder's scores: the scale they are on, and the ``score`` column checked against it.

A verdicts table of layout 2 carries ``score`` (float64, the scale's native
units, NaN where there is none); a table of layout 1 has no such column and
reads as binary, its scores all NaN. The cells are untrusted like every
other: a score off the declared scale is refused with one line naming the
file, the field and the scale, never clipped into it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from multiverse.core import SCORE
from multiverse.errors import InputError
from multiverse.tables._folder_models import Manifest, ScaleRecord, SpecDocument

__all__ = ["BINARY", "FolderScales", "check_scores", "folder_scale", "folder_scales", "universe_scales",
           "with_score_column"]

#: The scale of a folder that declares none: compliance labels, no scores.
BINARY = ScaleRecord()


def folder_scale(manifest: Manifest | None, spec: SpecDocument | None = None) -> ScaleRecord:
    """The scale a folder's scores are on: the manifest's, else the run's spec's ``judge.scale``, else binary."""
    if manifest is not None and manifest.scale is not None:
        return manifest.scale
    if spec is not None and spec.judge is not None and spec.judge.scale is not None:
        return spec.judge.scale
    return BINARY


@dataclass(frozen=True)
class FolderScales:
    """The scales of a folder's scores: the folder's own (``base``, the base spec's) and each universe's (``of``).

    ``of`` maps every universe the manifest lists to its scale (its own, where an axis over
    ``judge.scale`` gave it one, else ``base``); a bare table lists none, and ``base`` is every one's.
    """

    base: ScaleRecord
    of: Mapping[str, ScaleRecord] = field(default_factory=dict)

    @property
    def scored(self) -> bool:
        """True when some universe's verdicts carry scores (its scale is not binary)."""
        return self.base.scored or any(s.scored for s in self.of.values())

    @property
    def common(self) -> ScaleRecord | None:
        """The one scale every universe reading scores is on; None when an axis gave them different ones."""
        scored = {s.model_dump_json(): s for s in self.of.values() if s.scored}
        if not scored:
            return self.base if self.base.scored else None
        return next(iter(scored.values())) if len(scored) == 1 else None


def folder_scales(manifest: Manifest | None, spec: SpecDocument | None = None,
                  shown: str | os.PathLike[str] = "manifest.json") -> FolderScales:
    """The folder's scale (:func:`folder_scale`) and each universe's (:func:`universe_scales`)."""
    return FolderScales(folder_scale(manifest, spec), universe_scales(manifest, spec, shown))


def universe_scales(manifest: Manifest | None, spec: SpecDocument | None = None,
                    shown: str | os.PathLike[str] = "manifest.json") -> dict[str, ScaleRecord]:
    """Each universe's scale (id -> scale): its own, where an axis over ``judge.scale`` gave it one, else the folder's.

    A run records a universe's scale in its manifest entry when it is not the
    base spec's; every score of the universe is on it, and only on it.
    """
    folder = folder_scale(manifest, spec)
    universes = manifest.universes if manifest else []
    if spec is not None and spec.axes and not any(u.scale is not None for u in universes):
        _unrecorded_scales(universes, spec, folder, shown)
    return {u.id: u.scale if u.scale is not None else folder for u in universes}


#: The fields of a scale that say where its scores lie; an axis may patch each (``judge.scale.max``).
_RANGE = ("type", "min", "max", "reference")


def _unrecorded_scales(universes: list[Any], spec: SpecDocument, folder: ScaleRecord, shown: str | os.PathLike[str]) -> None:
    """Refuse a run folder whose axes gave a universe another scale that its manifest does not record.

    A run written before each universe's scores were read on its own scale rescaled them all on the
    base spec's, rates file included: it is refused, never read as if it were right.
    """
    touched = any(path == "judge" or path.startswith("judge.scale") for options in spec.axes.values()
                  for patch in options.values() for path in (patch or {}))
    if not touched:
        return
    base = folder.model_dump()
    for universe in universes:
        scale = dict(base)
        for axis, option in universe.options.items():
            for path, value in ((spec.axes.get(axis) or {}).get(str(option)) or {}).items():
                if path == "judge" and isinstance(value, Mapping):
                    scale = {**ScaleRecord().model_dump(), **dict(value.get("scale") or {})}
                elif path == "judge.scale" and isinstance(value, Mapping):
                    scale = {**ScaleRecord().model_dump(), **dict(value)}
                elif path.removeprefix("judge.scale.") in _RANGE and path.startswith("judge.scale."):
                    scale[path.removeprefix("judge.scale.")] = value
        if any(scale.get(k) != base.get(k) for k in _RANGE):
            # shown as the record it patches (construct: the patch's values as written, not checked again)
            own = ScaleRecord.model_construct(**scale)
            raise InputError(f"{shown}: universes: universe {universe.id} ({universe.label or universe.id}) "
                             f"has its own judge.scale ({own.type} {own.min}..{own.max}) "
                             "that the manifest does not record: written before each universe's scores were read on "
                             "its own scale, its rates are on the base scale; expected the run made again (every "
                             "judgment is reused from the store)")


def with_score_column(verdicts: pd.DataFrame) -> pd.DataFrame:
    """``verdicts`` with a ``score`` column (all NaN when it had none), placed after ``compliant``."""
    if SCORE in verdicts.columns:
        return verdicts
    out = verdicts.copy()
    at = list(out.columns).index("compliant") + 1 if "compliant" in out.columns else len(out.columns)
    out.insert(at, SCORE, np.full(len(out), np.nan))
    return out


def check_scores(verdicts: pd.DataFrame, scale: ScaleRecord, shown: str | os.PathLike[str],
                 scales: Mapping[str, ScaleRecord] | None = None) -> pd.DataFrame:
    """``verdicts`` with its ``score`` column as float64, or one ``InputError`` naming ``shown``.

    A table without the column (layout 1) is returned as it is. Every score
    present must be a finite number on its universe's scale (``scales``: id ->
    scale, :func:`universe_scales`; a universe not listed, or no ``scales``:
    ``scale``), a whole number on an ordinal one; a binary scale has no
    scores, so any number there is refused too: it would be silently ignored
    by every rate.
    """
    own = {u: s for u, s in (scales or {}).items() if s != scale}
    if own and SCORE in verdicts.columns and "universe_id" in verdicts.columns:
        ids = verdicts["universe_id"].astype(str).to_numpy()
        rest = ~np.isin(ids, list(own))
        for universe, its in own.items():
            _check_scores(verdicts[ids == universe], its, shown, f"universe {universe} ")
        _check_scores(verdicts[rest], scale, shown)
        return verdicts if verdicts[SCORE].dtype == np.float64 else verdicts.assign(
            **{SCORE: pd.to_numeric(verdicts[SCORE].astype(object), errors="coerce").astype(np.float64)})
    return _check_scores(verdicts, scale, shown)


def _check_scores(verdicts: pd.DataFrame, scale: ScaleRecord, shown: str | os.PathLike[str],
                  whose: str = "the folder ") -> pd.DataFrame:
    if SCORE not in verdicts.columns:
        return verdicts
    column = verdicts[SCORE]
    values = pd.to_numeric(column.astype(object) if isinstance(column.dtype, pd.CategoricalDtype) else column,
                           errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)
    unreadable = np.isnan(values) & column.notna().to_numpy()
    if unreadable.any():
        raise InputError(f"{shown}: {SCORE}: expected a number, got {column[unreadable].iloc[0]!r}")
    present = ~np.isnan(values)
    if not present.any():
        return verdicts if column.dtype == np.float64 else verdicts.assign(**{SCORE: values})
    if not scale.scored:
        raise InputError(f"{shown}: {SCORE}: {whose}declares no scale (binary labels), yet a row holds "
                         f"score {values[present][0]:g}; expected the manifest to record the scale")
    found = values[present]
    off = ~np.isfinite(found) | (found < scale.min) | (found > scale.max)
    if scale.type == "ordinal":
        off |= np.isfinite(found) & (found != np.round(found))
    if off.any():
        kind = "a whole number" if scale.type == "ordinal" else "a number"
        of = "" if whose == "the folder " else f" of {whose.strip()}"
        raise InputError(f"{shown}: {SCORE}: expected {kind} from {scale.min:g} to {scale.max:g} "
                         f"(the {scale.type} scale{of}), got {found[off][0]:g}")
    return verdicts if column.dtype == np.float64 else verdicts.assign(**{SCORE: values})

