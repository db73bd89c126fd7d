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

import copy
import itertools
import math
import random
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .bounds import (
    MAX_OPTIONS,
    MAX_UNIVERSES,
    transcripts_per_universe,
    universes_problem,
)
from .errors import SpecError
from .keys import digest
from .schema import Problems
from .spec import Spec, check_patch_path, resolve_document

__all__ = ["Universe", "expand", "grid_size", "check_axes", "axis_stages", "path_stage", "STAGES", "apply_patch"]

#: Grids up to this many combinations are listed (and exclusions counted exactly); larger ones are sampled by index.
ENUMERATE_LIMIT = MAX_UNIVERSES

#: Pipeline stages in data-flow order; an axis touches the earliest one it patches.
STAGES = ("draft", "rollout", "judge", "score")


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


def apply_patch(document: Mapping[str, Any], patch: Mapping[str, Any]) -> dict:
    """A deep copy of ``document`` with each dotted path set to its value."""
    out = copy.deepcopy(dict(document))
    for dotted, value in patch.items():
        node: Any = out
        parts = dotted.split(".")
        for i, part in enumerate(parts[:-1]):
            node = _child(node, part, create=True, default={} if not _is_index(parts[i + 1]) else [])
        last = parts[-1]
        if isinstance(node, list):
            node[_list_index(node, last)] = copy.deepcopy(value)
        else:
            node[last] = copy.deepcopy(value)
    return out


def _is_index(part: str) -> bool:
    return part.isdigit()


def _list_index(items: list, part: str) -> int:
    for i, element in enumerate(items):
        if isinstance(element, dict) and part in (element.get("name"), element.get("id")):
            return i
    return int(part)


def _child(node: Any, part: str, *, create: bool, default: Any) -> Any:
    if isinstance(node, list):
        return node[_list_index(node, part)]
    if part not in node or node[part] is None:
        node[part] = default
    return node[part]


_GRID_FIELDS = ("name", "axes", "exclude", "sample", "primary")


def _strip_axes(document: Mapping[str, Any]) -> dict:
    return {k: v for k, v in document.items() if k not in _GRID_FIELDS[1:]}


def check_axes(spec: Spec, problems: Problems) -> None:
    """Validate axes, exclusions, sampling and the primary against ``spec``."""
    document = spec.document or {}
    n_options = sum(len(options) for options in spec.axes.values())
    if n_options > MAX_OPTIONS:
        problems.add("axes", f"the axes have {n_options:,} options in all; expected at most {MAX_OPTIONS:,}")
        return
    for axis, options in spec.axes.items():
        if not options:
            problems.add(f"axes.{axis}", "expected at least one option (an axis with no options empties the grid)")
            continue
        for option, patch in options.items():
            if not patch:
                # An empty patch is the base spec itself: allowed, but say so if it is the only option.
                continue
            for dotted in patch:
                if dotted.split(".")[0] in _GRID_FIELDS:
                    problems.add(f"axes.{axis}.{option}.{dotted}", f"patches {dotted.split('.')[0]!r}, which is not a measurement choice; expected a path under concept, rubric, design, systems, rollout, judge, scoring or world")
                    continue
                wrong = check_patch_path(dotted, document)
                if wrong:
                    problems.add(f"axes.{axis}.{option}.{dotted}", f"patches a path that does not exist: {wrong}")
    if problems:
        return
    for axis, options in spec.axes.items():
        resolved: dict[str, str] = {}
        for option, patch in options.items():
            try:
                alone = resolve_document(apply_patch(_strip_axes(document), patch), path=spec.path)
            except SpecError as exc:
                problems.add(f"axes.{axis}.{option}", f"{exc.path}: {exc.expected}" if exc.path else exc.expected)
                continue
            same = resolved.get(digest(alone.measurement()))
            if same is not None:
                problems.add(f"axes.{axis}.{option}", f"measures exactly what option {same!r} measures; expected each option to change something")
            resolved.setdefault(digest(alone.measurement()), option)
    for i, rule in enumerate(spec.exclude):
        _check_selector(spec, rule, f"exclude.{i}", problems, allow_lists=True)
        if not rule:
            problems.add(f"exclude.{i}", "expected at least one axis: option pair")
    if spec.primary is not None:
        _check_selector(spec, spec.primary, "primary", problems, allow_lists=False)
    if spec.sample is not None and spec.sample.n < 1:
        problems.add("sample.n", f"expected an integer >= 1, got {spec.sample.n}")
    if problems:
        return
    primary = _primary_options(spec)
    if primary is not None and _excluded(spec, primary):
        problems.add("primary", f"{_label(primary)} is excluded; expected a universe of the grid")
        return
    total = grid_size(spec)
    if total <= ENUMERATE_LIMIT:
        kept = sum(1 for c in _combinations(spec) if not _excluded(spec, c))
        if not kept:
            problems.add("exclude", f"the exclusions remove all {total} universes; expected at least one to remain")
            return
    else:
        kept = total  # an upper bound: counting exactly would walk the whole grid
    n = min(kept, spec.sample.n) if spec.sample is not None else kept
    per_universe = transcripts_per_universe(spec)
    wrong = universes_problem(n, per_universe or 0)
    if wrong:
        problems.add("sample" if spec.sample is not None else "axes", wrong)


def _check_selector(spec: Spec, rule: Mapping[str, Any], where: str, problems: Problems, *, allow_lists: bool) -> None:
    for axis, chosen in rule.items():
        if axis not in spec.axes:
            problems.add(f"{where}.{axis}", f"unknown axis; expected one of: {', '.join(spec.axes) or '(no axes declared)'}")
            continue
        values = chosen if allow_lists and isinstance(chosen, list) else [chosen]
        for value in values:
            if not isinstance(value, str) or value not in spec.axes[axis]:
                problems.add(f"{where}.{axis}", f"unknown option {value!r}; expected one of: {', '.join(spec.axes[axis])}")


def grid_size(spec: Spec) -> int:
    """The number of universes before exclusions: the product of the axes' option counts."""
    return math.prod(len(options) for options in spec.axes.values())


def _combinations(spec: Spec):
    names = list(spec.axes)
    for values in itertools.product(*(list(spec.axes[a]) for a in names)):
        yield dict(zip(names, values))


def _decode(spec: Spec, index: int) -> dict[str, str]:
    """The universe at ``index`` of the factorial, in ``_combinations`` order (mixed radix, last axis fastest)."""
    combo = {}
    for axis in reversed(list(spec.axes)):
        options = list(spec.axes[axis])
        index, digit = divmod(index, len(options))
        combo[axis] = options[digit]
    return {axis: combo[axis] for axis in spec.axes}


def _excluded(spec: Spec, combo: Mapping[str, str]) -> bool:
    for rule in spec.exclude:
        if all(combo[a] in (v if isinstance(v, list) else [v]) for a, v in rule.items()):
            return True
    return False


def _primary_options(spec: Spec) -> dict[str, str] | None:
    """The primary universe's options: as declared (axes it leaves out take their first option).

    None when the spec declares no primary: no universe is then silently
    treated as pre-registered. A spec without axes is one universe, the
    audit as written, and that is its primary.
    """
    if not spec.axes:
        return {}
    if spec.primary is None:
        return None
    declared = dict(spec.primary)
    return {a: declared.get(a, next(iter(opts))) for a, opts in spec.axes.items()}


def _label(options: Mapping[str, str]) -> str:
    return " · ".join(f"{a}={o}" for a, o in options.items()) or "base"


def expand(spec: Spec) -> list[Universe]:
    """The universes of ``spec``: factorial, minus exclusions, sampled if asked.

    The primary universe comes first when one is declared; the rest keep the
    order of the axes' options. A grid too large to list (more than
    ``ENUMERATE_LIMIT`` combinations) is never materialised: its sample is
    drawn by index (see ``_sample_by_index``).
    """
    primary = _primary_options(spec)
    total = grid_size(spec)
    if spec.sample is not None and total > ENUMERATE_LIMIT:
        combos = _sample_by_index(spec, primary, total)
    else:
        combos = [c for c in _combinations(spec) if not _excluded(spec, c)]
        if spec.sample is not None and spec.sample.n < len(combos):
            combos = _sample(spec, combos, primary)
    problem = universes_problem(len(combos), transcripts_per_universe(spec) or 0)
    if problem:
        raise SpecError(spec.path or "<spec>", "axes", problem)
    base = _strip_axes(spec.document or {})
    universes = []
    seen: dict[str, str] = {}
    for combo in combos:
        patch: dict[str, Any] = {}
        for axis, option in combo.items():
            patch.update(spec.axes[axis][option])
        resolved = resolve_document(apply_patch(base, patch), path=spec.path)
        uid = digest(resolved.measurement(), 12)
        if uid in seen:
            raise SpecError(
                spec.path or "<spec>", "axes",
                f"{_label(combo)} resolves to the same measurement as {seen[uid]}; expected every option to change something",
            )
        seen[uid] = _label(combo)
        universes.append(Universe(uid, _label(combo), combo, resolved, is_primary=(combo == primary)))
    universes.sort(key=lambda u: not u.is_primary)
    return universes


def _sample(spec: Spec, combos: list[dict], primary: dict | None) -> list[dict]:
    """``sample.n`` universes of a listed grid, the primary (if any) always among them.

    ``lhs`` is a Latin hypercube over categorical axes: each axis's options
    appear equally often (within one) across the sample. Columns are
    reshuffled until every row is a distinct, non-excluded universe; if the
    exclusions make that impossible after many tries, the sample falls back
    to random (balance is then approximate).
    """
    sample = spec.sample
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


def _sample_by_index(spec: Spec, primary: dict | None, total: int) -> list[dict]:
    """``sample.n`` universes of a grid too large to list, in constant memory per universe.

    ``random`` draws indices of the factorial uniformly (``rng.randrange``),
    decodes each as a mixed-radix number (one digit per axis) and rejects
    excluded or repeated universes. ``lhs`` builds the Latin hypercube by
    strata of each axis's options, exactly as for a listed grid, checking
    exclusions row by row. Both depend only on the seed. The result is in
    factorial (index) order, like a listed grid.
    """
    sample = spec.sample
    rng = random.Random(sample.seed)
    names = list(spec.axes)
    first = tuple(primary[a] for a in names) if primary is not None else None
    chosen = None
    if sample.method == "lhs":
        chosen = _latin_hypercube(spec, names, lambda row: not _excluded(spec, dict(zip(names, row))), first, sample.n, rng)
    if chosen is None:
        picked: set[tuple] = {first} if first else set()
        tries = 0
        while len(picked) < sample.n:
            tries += 1
            if tries > 100 * sample.n + 10_000:
                raise SpecError(spec.path or "<spec>", "sample", f"found only {len(picked)} universes the exclusions keep "
                                f"after {tries - 1:,} random draws; expected sample.n = {sample.n} of them (fewer exclusions or a smaller n)")
            combo = _decode(spec, rng.randrange(total))
            if not _excluded(spec, combo):
                picked.add(tuple(combo[a] for a in names))
        chosen = list(picked)
    order = {a: {o: i for i, o in enumerate(spec.axes[a])} for a in names}
    rows = sorted(set(chosen), key=lambda row: [order[a][o] for a, o in zip(names, row)])
    return [dict(zip(names, row)) for row in rows]


def _latin_hypercube(spec: Spec, names: list[str], valid, first: tuple | None, n: int, rng: random.Random):
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
