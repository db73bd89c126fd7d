"""A spec's sizes against the caps: field by field, then the total the design implies.

The caps themselves are ground (:mod:`multiverse.core._bounds`): readers of
tables and folders hold to them too, without importing the spec.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from multiverse.core import CAPS, MAX_SEED, MAX_VERDICT_ROWS, universes_problem

if TYPE_CHECKING:  # pragma: no cover
    from multiverse.spec._models import Spec
    from multiverse.spec._problems import Problems

__all__ = ["check_sizes", "transcripts_per_universe", "universes_problem"]


def check_sizes(spec: Spec, problems: Problems) -> None:
    """Refuse sizes past the caps, field by field, then the total the design implies."""
    values = {
        "design.cases_per_cell": spec.design.cases_per_cell,
        "rollout.max_turns": spec.rollout.max_turns,
        "rollout.replicates": spec.rollout.replicates,
        "judge.samples": spec.judge.samples,
        "scoring.ci.n_boot": spec.scoring.ci.n_boot,
    }
    if spec.sample is not None:
        values["sample.n"] = spec.sample.n
    over = False
    for path, value in values.items():
        if value > CAPS[path]:
            problems.add(path, f"expected at most {CAPS[path]:,}, got {value:,}")
            over = True
    for i, allocation in enumerate(spec.design.allocation):
        if allocation.cases > CAPS["design.allocation.cases"]:
            problems.add(f"design.allocation.{i}.cases", f"expected at most {CAPS['design.allocation.cases']:,}, got {allocation.cases:,}")
            over = True
    # Seeds reach numpy (which refuses negatives) and providers' 64-bit seed fields: a bad one
    # would crash the scoring after every call was paid.
    seeds = {"rollout.seed": spec.rollout.seed, **({"sample.seed": spec.sample.seed} if spec.sample else {})}
    for path, seed in seeds.items():
        if not 0 <= seed < MAX_SEED:
            problems.add(path, f"expected a whole number from 0 to 2**63 - 1, got {seed}")
    if not over:
        _check_total(spec, problems)


def _check_total(spec: Spec, problems: Problems) -> None:
    rows = transcripts_per_universe(spec)
    if rows is None:
        problems.add("design.dimensions", f"the dimensions make more than {MAX_VERDICT_ROWS:,} cells; expected fewer")
    elif rows > MAX_VERDICT_ROWS:
        problems.add("design", f"cases x replicates x systems make {rows:,} transcripts per universe; "
                               f"expected at most {MAX_VERDICT_ROWS:,}")


def transcripts_per_universe(spec: Spec) -> int | None:
    """An upper bound of cases x replicates x systems; None when the cells alone pass the cap."""
    # Imported here: table importers use these bounds and need not load the spec's models.
    from multiverse.spec._models import design_levels

    # Cells multiply: ten dimensions of ten levels are 10^10 cells. Stop counting past the cap.
    cells = 1
    for d in spec.design.dimensions:
        try:
            cells *= max(1, len(design_levels(spec, d.name)))
        except KeyError:
            pass
        if cells > MAX_VERDICT_ROWS:
            return None
    per_cell = max([spec.design.cases_per_cell, *(a.cases for a in spec.design.allocation)])
    cases = len(spec.cases) if spec.cases is not None else cells * per_cell
    return cases * spec.rollout.replicates * max(1, len(spec.systems))


