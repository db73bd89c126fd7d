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

from typing import Any

import pandas as pd

from multiverse.tables import Manifest, SpecDocument

__all__ = ["declared_options"]


def _from_spec(spec: SpecDocument | None) -> dict[str, list[Any]]:
    axes = spec.axes if spec is not None else {}
    return {str(axis): list(options) for axis, options in axes.items()}


def _from_manifest(manifest: Manifest | None) -> dict[str, list[Any]]:
    order: dict[str, dict[str, Any]] = {}
    for universe in manifest.universes if manifest is not None else []:
        for axis, option in universe.options.items():
            order.setdefault(str(axis), {})[option] = None
    return {axis: list(options) for axis, options in order.items()}


def declared_options(verdicts: pd.DataFrame, axes: list[str], manifest: Manifest | None,
                     spec: SpecDocument | None) -> dict[str, list[Any]]:
    """Each axis's options in declared order, as the values found in the verdicts table.

    The order is ``spec``'s (a run's resolved spec), else ``manifest``'s
    universes', else the verdicts' own. Every option present in the verdicts
    is listed exactly once; declared options that no verdict uses are left out.
    """
    declared = _from_spec(spec) or _from_manifest(manifest)
    result = {}
    for axis in axes:
        if axis not in verdicts.columns:
            continue
        seen = list(dict.fromkeys(verdicts[axis].dropna()))
        by_text = {str(value): value for value in seen}
        order = [by_text.pop(str(option)) for option in declared.get(axis, []) if str(option) in by_text]
        result[axis] = order + [value for value in seen if str(value) in by_text]
    return result
