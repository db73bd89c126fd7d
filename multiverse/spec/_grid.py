"""Axes -> universes.

An axis is a named measurement choice whose options patch dotted spec paths.
The grid is the full factorial of options, minus ``exclude`` rules, optionally
sampled (random or Latin hypercube); the pre-registered ``primary`` universe is
always kept. A universe's id hashes its resolved measurement choices, so it
does not depend on key order, YAML formatting or the axis names used to reach
it.

Which pipeline stage an axis touches is read off the paths its options patch:
an axis that patches only ``judge.*`` leaves every transcript reusable.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from multiverse.core import STAGES, digest, universe_id, universes_problem
from multiverse.errors import SpecError
from multiverse.spec._axes import (
    ENUMERATE_LIMIT,
    apply_patch,
    combinations,
    count_grid,
    excluded,
    grid_size,
    label,
    primary_options,
    strip_axes,
)
from multiverse.spec._bounds import transcripts_per_universe
from multiverse.spec._counting import GridCount, KeptGrid, decode
from multiverse.spec._models import Spec
from multiverse.spec._parse import resolve_document

__all__ = [
    "ENUMERATE_LIMIT", "STAGES", "GridCount", "Universe", "apply_patch", "axis_stages", "count_grid", "expand", "grid_size",
    "path_stage",
]

#: Below this share of kept universes a huge grid's random sample is drawn by rank among the
#: kept ones: drawing indices of the whole grid would mostly hit excluded universes.
SPARSE_SHARE = 0.01


@dataclass(frozen=True)
class Universe:
    """The base spec plus one option per axis."""

    id: str
    label: str
    options: Mapping[str, str]
    spec: Spec = field(repr=False, compare=False)
    is_primary: bool = False


def path_stage(dotted: str) -> str:
    """The earliest pipeline stage whose output depends on spec path ``dotted``."""
    head, _, rest = dotted.partition(".")
    if head == "scoring":
        return "score"
    if head == "judge":
        return "judge"
    if head == "rubric":
        # Evidence-standard texts only reach the judge; the criteria themselves
        # shape the test cases. rubric.criteria.<id>.evidence[.level]
        parts = rest.split(".")
        return "judge" if len(parts) >= 3 and parts[2] == "evidence" else "draft"
    if head in ("systems", "rollout"):
        return "rollout"
    return "draft"  # concept, design, world


def axis_stages(spec: Spec) -> dict[str, str]:
    """Axis name -> the earliest stage any of its options patches."""
    out = {}
    for axis, options in spec.axes.items():
        stages = {path_stage(p) for patch in options.values() for p in patch}
        out[axis] = min(stages, key=STAGES.index) if stages else "score"
    return out


def expand(spec: Spec) -> list[Universe]:
    """The universes of ``spec``: factorial, minus exclusions, sampled if asked.

    The primary universe comes first when one is declared; the rest keep the
    order of the axes' options. A grid too large to list (more than
    ``ENUMERATE_LIMIT`` combinations) is never materialised: its sample is
    drawn by index (see ``_sample_by_index``), and without a sample (or with
    one at least as large as what the exclusions keep) only its kept
    universes are visited (``_spec.counting``).
    """
    primary = primary_options(spec)
    total = grid_size(spec)
    if total <= ENUMERATE_LIMIT:
        combos = [c for c in combinations(spec) if not excluded(spec, c)]
        if spec.sample is not None and spec.sample.n < len(combos):
            combos = _sample(spec, combos, primary)
    else:
        combos = _huge(spec, primary, count_grid(spec))
    problem = universes_problem(len(combos), transcripts_per_universe(spec) or 0)
    if problem:
        raise SpecError(spec.path or "<spec>", "axes", problem)
    base = strip_axes(spec.document or {})
    universes = []
    seen: dict[str, str] = {}
    for combo in combos:
        patch: dict[str, Any] = {}
        for axis, option in combo.items():
            patch.update(spec.axes[axis][option])
        # A spec loaded to be drafted resolves its universes so too: the cases file it names may not be written yet.
        resolved = resolve_document(apply_patch(base, patch), path=spec.path, drafting=spec.drafting)
        measurement = digest(resolved.measurement(), 12)
        if measurement in seen:
            raise SpecError(
                spec.path or "<spec>", "axes",
                f"{label(combo)} resolves to the same measurement as {seen[measurement]}; expected every option to change something",
            )
        seen[measurement] = label(combo)
        universes.append(Universe(universe_id(combo), label(combo), combo, resolved, is_primary=(combo == primary)))
    universes.sort(key=lambda u: not u.is_primary)
    return universes


def _sample(spec: Spec, combos: list[dict[str, Any]], primary: dict[str, Any] | None) -> list[dict[str, Any]]:
    """``sample.n`` universes of a listed grid, the primary (if any) always among them.

    ``lhs`` is a Latin hypercube over categorical axes: each axis's options
    appear equally often (within one) across the sample. Columns are
    reshuffled until every row is a distinct, non-excluded universe; if the
    exclusions make that impossible after many tries, the sample falls back
    to random (balance is then approximate).
    """
    sample = spec.sample
    assert sample is not None  # called only when the spec asks for a sample
    rng = random.Random(sample.seed)
    names = list(spec.axes)
    valid = [tuple(c[a] for a in names) for c in combos]
    first = tuple(primary[a] for a in names) if primary is not None else None
    chosen = None
    if sample.method == "lhs":
        listed = set(valid)
        chosen = _latin_hypercube(spec, names, listed.__contains__, first, sample.n, rng)
    if chosen is None:
        pool = [v for v in valid if v != first]
        chosen = ([first] if first else []) + rng.sample(pool, sample.n - (1 if first else 0))
    keep = set(chosen)
    return [c for c, v in zip(combos, valid) if v in keep]


def _huge(spec: Spec, primary: dict[str, Any] | None, count: GridCount) -> list[dict[str, Any]]:
    """The combinations of a grid too large to list: sampled by index, or its kept universes when they are few."""
    where = spec.path or "<spec>"
    if spec.sample is not None and (not count.exact or count.kept > spec.sample.n):
        return _sample_by_index(spec, primary, count)
    if not count.exact:
        raise SpecError(where, "axes", f"{count.describe()}; expected a grid that can be listed (run a sample of it: sample: {{n: ...}})")
    # Refused before any universe is listed (validate says the same; a spec loaded with
    # cap_universes=False reaches here).
    problem = universes_problem(count.kept, transcripts_per_universe(spec) or 0)
    if problem:
        raise SpecError(where, "axes", problem)
    kept = _kept(spec)
    if kept is None:
        raise SpecError(where, "axes", f"{count.describe()}, but the exclusion rules overlap too much to list them; "
                        "expected a sample of the grid (sample: {n: ...})")
    return kept.combinations()


def _kept(spec: Spec) -> KeptGrid | None:
    """The kept universes, walkable; None when the rules overlap too much to keep the whole walk."""
    try:
        return KeptGrid({a: list(o) for a, o in spec.axes.items()}, list(spec.exclude))
    except ValueError:
        return None


def _sample_by_index(spec: Spec, primary: dict[str, Any] | None, count: GridCount) -> list[dict[str, Any]]:
    """``sample.n`` universes of a grid too large to list, in constant memory per universe.

    ``random`` draws indices of the factorial uniformly (``rng.randrange``),
    decodes each as a mixed-radix number (one digit per axis) and rejects
    excluded or repeated universes; when the exclusions keep less than
    ``SPARSE_SHARE`` of the grid (counted exactly), it draws ranks among the
    kept universes instead (``KeptGrid.at``), which is as uniform and never
    runs out of tries. ``lhs`` builds the Latin hypercube by strata of each
    axis's options, exactly as for a listed grid, checking exclusions row by
    row. All depend only on the seed. The result is in factorial (index)
    order, like a listed grid.
    """
    sample = spec.sample
    assert sample is not None  # called only when the spec asks for a sample
    rng = random.Random(sample.seed)
    names = list(spec.axes)
    first = tuple(primary[a] for a in names) if primary is not None else None
    chosen = None
    if sample.method == "lhs":
        chosen = _latin_hypercube(spec, names, lambda row: not excluded(spec, dict(zip(names, row))), first, sample.n, rng)
    kept = _kept(spec) if chosen is None and count.exact and count.kept < SPARSE_SHARE * count.combinations else None
    if kept is not None:
        ranked: set[tuple[Any, ...]] = {first} if first else set()
        while len(ranked) < sample.n:  # sample.n < count.kept (else every kept universe is listed)
            combo = kept.at(rng.randrange(kept.count))
            ranked.add(tuple(combo[a] for a in names))
        chosen = list(ranked)
    if chosen is None:
        total = count.combinations
        axes = {a: list(o) for a, o in spec.axes.items()}
        picked: set[tuple[Any, ...]] = {first} if first else set()
        tries = 0
        while len(picked) < sample.n:
            tries += 1
            if tries > 100 * sample.n + 10_000:
                raise SpecError(spec.path or "<spec>", "sample", f"found only {len(picked)} universes the exclusions keep "
                                f"after {tries - 1:,} random draws; expected sample.n = {sample.n} of them (fewer exclusions or a smaller n)")
            combo = decode(axes, rng.randrange(total))
            if not excluded(spec, combo):
                picked.add(tuple(combo[a] for a in names))
        chosen = list(picked)
    order = {a: {o: i for i, o in enumerate(spec.axes[a])} for a in names}
    rows = sorted(set(chosen), key=lambda row: [order[a][o] for a, o in zip(names, row)])
    return [dict(zip(names, row)) for row in rows]


def _latin_hypercube(spec: Spec, names: list[str], valid: Callable[[tuple[Any, ...]], bool], first: tuple[Any, ...] | None,
                     n: int, rng: random.Random) -> list[tuple[Any, ...]] | None:
    columns = []
    for i, axis in enumerate(names):
        options = list(spec.axes[axis])
        k = len(options)
        p = first[i] if first else None
        remainder = n % k
        if p is not None and n < k:
            extra = [p] + rng.sample([o for o in options if o != p], remainder - 1)
        else:
            extra = rng.sample(options, remainder)
        column = options * (n // k) + extra
        if p is not None:
            column.remove(p)  # one copy belongs to the primary row
        columns.append(column)
    for _ in range(2000):
        for column in columns:
            rng.shuffle(column)
        rows = ([first] if first else []) + list(zip(*columns))
        if len(set(rows)) == n and all(valid(r) for r in rows):
            return rows
    return None
