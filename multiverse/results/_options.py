"""The order in which a run's options were declared, for every table and figure that lists them.

A spec lists each axis's options in the order its author thought of them (the
conventional choice first, as a rule); tables and figures keep that order
instead of sorting option names as text. The order comes from the run's
resolved ``spec.yaml``, else from the universes recorded in the manifest,
else (a bare table, an import) from the order in which options first appear
in the verdicts. Options found in the verdicts but not declared follow the
declared ones, in order of first appearance.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pandas as pd

if TYPE_CHECKING:
    from multiverse.results._results import Results

__all__ = ["declared_options"]


def _from_spec(tables: Results) -> dict[str, list]:
    from multiverse.tables._folder import read_spec_document

    source = tables.source
    # load_run checked the folder's spec.yaml; one that changed since is refused here, not trusted.
    document = read_spec_document(source) if source is not None and source.is_dir() else None
    axes = (document or {}).get("axes") or {}
    return {str(axis): list(options) for axis, options in axes.items()}


def _from_manifest(tables: Results) -> dict[str, list]:
    order: dict[str, dict] = {}
    for universe in tables.manifest.get("universes") or []:
        options = universe.get("options") if isinstance(universe, dict) else None
        if isinstance(options, dict):
            for axis, option in options.items():
                order.setdefault(str(axis), {})[option] = None
    return {axis: list(options) for axis, options in order.items()}


def declared_options(tables: Results, axes: list[str] | None = None) -> dict[str, list[Any]]:
    """Each axis's options in declared order, as the values found in the verdicts table.

    ``axes`` defaults to ``tables.axes``. Every option present in the verdicts
    is listed exactly once; declared options that no verdict uses are left out.
    """
    axes = list(tables.axes if axes is None else axes)
    declared = _from_spec(tables) or _from_manifest(tables)
    verdicts: pd.DataFrame = tables.verdicts
    result = {}
    for axis in axes:
        if axis not in verdicts.columns:
            continue
        seen = list(dict.fromkeys(verdicts[axis].dropna()))
        by_text = {str(value): value for value in seen}
        order = [by_text.pop(str(option)) for option in declared.get(axis, []) if str(option) in by_text]
        result[axis] = order + [value for value in seen if str(value) in by_text]
    return result
