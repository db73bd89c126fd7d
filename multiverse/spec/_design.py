"""The audit's design: its cells and how many test cases each gets.

A *cell* is one combination of the design factors' levels (behaviour,
interaction condition, and any further dimensions), in declared order. Each
cell gets ``design.cases_per_cell`` cases unless an ``allocation`` entry
matching the cell says otherwise. The work units (``multiverse.work._units``), the
draft stage and the CLI's summaries all count cases from here.
"""

from __future__ import annotations

import itertools

from multiverse.spec._models import Spec, design_levels

__all__ = ["case_counts", "cells", "planned_cases"]


def cells(spec: Spec) -> list[dict[str, str]]:
    """Every design cell: the product of the dimensions' levels, in declared order."""
    factors = spec.factors
    levels = [design_levels(spec, f) for f in factors]
    return [dict(zip(factors, combo)) for combo in itertools.product(*levels)]


def case_counts(spec: Spec) -> list[tuple[dict[str, str], int]]:
    """Cells with their number of cases: ``cases_per_cell`` unless an allocation matches."""
    out = []
    for cell in cells(spec):
        n = spec.design.cases_per_cell
        for allocation in spec.design.allocation:
            if all(cell.get(k) == v for k, v in allocation.cell.items()):
                n = allocation.cases
        out.append((cell, n))
    return out


def planned_cases(spec: Spec) -> tuple[int, int | None]:
    """(transcripts per system per universe, cases in the smallest design cell or None) a spec plans.

    Fixed test cases count as given; drafted ones are the design's cells (with
    their allocations) times the replicates. The per-cell count is only known
    for drafted cases.
    """
    counts = [n for _, n in case_counts(spec)] if spec.cases is None else [len(spec.cases)]
    per_cell = min(counts) if spec.cases is None and counts else None
    return sum(counts) * spec.rollout.replicates, per_cell
