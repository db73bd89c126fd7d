"""The import directory: verdicts, criteria and rates tables plus manifest.json.

An import directory holds the same tables as a run directory, each as ``.parquet`` and
``.csv``, and a manifest::

    {"schema_version": 1, "source": "assert" | "table", "axes": [...], "factors": [...],
     "universes": [universe ids], "primary": universe id | null, "warnings": [...], ...}

``primary`` is the universe the import was told is pre-registered, else null
(see :func:`resolve_primary`); ``ci`` is the interval method of the rates.

Every file is written atomically (multiverse.tables._tables); the manifest is removed first and
written last, so a directory with a manifest is complete.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import pandas as pd

from multiverse.core import CI_METHODS, SCHEMA_VERSION, ImportBudget, check_rate_direction
from multiverse.errors import InputError
from multiverse.importers._guard import check_storable, checked_transcripts, import_budget, one_name_each
from multiverse.importers._losses import ImportLosses
from multiverse.importers._unparsed import UNPARSED_AXIS, unparsed_manifest
from multiverse.results import Results
from multiverse.tables import universe_entry, with_score_column, write_run_folder

__all__ = ["check_ci", "resolve_primary", "write_import_dir"]


def check_ci(ci: str) -> str:
    """The CI method of an import's rates, checked against the methods the scorer knows."""
    if ci not in CI_METHODS:
        raise InputError(f"ci: unknown method {ci!r}; expected one of: {', '.join(CI_METHODS)}", param="ci")
    return ci


def resolve_primary(
    primary: Mapping[str, str] | None, axes: Sequence[str], options: Mapping[str, Mapping[str, Any]]
) -> str | None:
    """The universe id the declared ``primary`` ({axis: option}) names, or None when none is declared.

    Nothing is assumed: without a declaration no universe is primary, except
    that a source without axes is a single universe, the audit as given. A
    declaration must name known axes and options and pick out exactly one
    universe.
    """
    if not primary:
        return next(iter(options)) if not axes and len(options) == 1 else None
    for axis, option in primary.items():
        if axis not in axes:
            raise InputError(f"primary: {axis}: unknown axis; expected one of: {', '.join(axes) or '(no axes)'}", param="primary")
        known = list(dict.fromkeys(str(o[axis]) for o in options.values()))
        if str(option) not in known:
            shown = ", ".join(known[:10]) + (", ..." if len(known) > 10 else "")
            raise InputError(f"primary: {axis}={option}: unknown option; expected one of: {shown}", param="primary")
    hits = [uid for uid, o in options.items() if all(str(o[a]) == str(v) for a, v in primary.items())]
    label = ", ".join(f"{a}={v}" for a, v in primary.items())
    if not hits:
        raise InputError(f"primary: {label}: no imported universe has these options together", param="primary")
    if len(hits) > 1:
        missing = [a for a in axes if a not in primary]
        raise InputError(f"primary: {label}: matches {len(hits)} universes; expected an option for every axis "
                         f"(also {', '.join(missing)})", param="primary")
    return hits[0]


def write_import_dir(
    out_dir: str | os.PathLike[str],
    *,
    verdicts: pd.DataFrame,
    criteria: pd.DataFrame | None,
    rates: pd.DataFrame,
    manifest: dict[str, Any],
    transcripts: Mapping[str, Mapping[str, Any]] | None = None,
    budget: ImportBudget | None = None,
    rate: str = "compliance",
    losses: ImportLosses | None = None,
    unparsed: Sequence[str] = ("exclude",),
) -> Results:
    """Write the tables and manifest into ``out_dir`` (created if needed), each file atomically.

    Callers validate everything before calling this, so bad input writes nothing. A
    criteria table, transcripts or spec left by an earlier run or import in the same
    directory is removed, so the folder never describes two sources. ``transcripts``
    (key -> record) become ``transcripts.jsonl``, which the report and explorer show;
    each must fit the ``budget``'s ``max_transcript_bytes`` (a line the folder's reader reads back).
    ``rate`` (``compliance`` or ``violation``) is the import's ``report.rate``: which way its figures, tables and
    pages read a rate, as a run's spec says (the manifest's ``rate``); the tables stay in compliance terms.
    The manifest gets the rows per status and per kind of loss, and what ``losses`` says was
    dropped (``importers._losses``: one contract for every importer), and ``unparsed``: the
    ``scoring.unparsed`` policy the verdicts were counted by (``importers._unparsed``), or the
    options of the ``unparsed`` axis several make (a reading of the same judgments: a loss counts once).
    """
    one_name_each(verdicts, criteria, list(manifest.get("axes", [])), list(manifest.get("factors", [])))
    check_storable(verdicts)
    transcripts = checked_transcripts(transcripts, budget or import_budget(), "transcripts")
    verdicts = with_score_column(verdicts)  # the results returned hold what the folder holds
    losses = losses or ImportLosses()
    if len(unparsed) > 1:
        losses = replace(losses, readings=(*losses.readings, UNPARSED_AXIS))
    manifest = {"schema_version": SCHEMA_VERSION, **_one_shape(manifest), "rate": check_rate_direction(rate),
                "unparsed": unparsed_manifest(unparsed),
                **losses.manifest_fields(verdicts, list(manifest.get("axes", [])))}
    # One writer for run and import folders: the same atomic files, manifest last.
    out = write_run_folder(out_dir, verdicts=verdicts, criteria=criteria, rates=rates, manifest=manifest,
                           transcripts=transcripts)
    return Results.from_manifest(manifest, verdicts=verdicts, criteria=criteria, rates=rates, source=out)


def _one_shape(manifest: dict[str, Any]) -> dict[str, Any]:
    """The importer's manifest with its universes as a run lists them (``tables.universe_entry``).

    An importer names each universe's options in ``universe_options`` and lists
    the universes as ids, or as objects where one has a scale or scoring of its
    own; the folder gets one entry per universe with its id, label, options and
    primary flag, as a run's manifest has, and no map beside.
    """
    options = manifest.get("universe_options", {})
    entries = [u if isinstance(u, Mapping) else {"id": u} for u in manifest.get("universes", [])]
    universes = [universe_entry(str(u["id"]), u.get("options", options.get(u["id"], {})),
                                primary=u["id"] == manifest.get("primary"), scoring=u.get("scoring"),
                                scale=u.get("scale")) for u in entries]
    return {k: v for k, v in {**manifest, "universes": universes}.items() if k != "universe_options"}
