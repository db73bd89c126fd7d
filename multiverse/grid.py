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
import random
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .errors import SpecError
from .keys import digest
from .schema import Problems
from .spec import Spec, check_patch_path, resolve_document

__all__ = ["Universe", "expand", "check_axes", "axis_stages", "path_stage", "STAGES", "apply_patch"]

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
    combos = list(_combinations(spec))
    kept = [c for c in combos if not _excluded(spec, c)]
    if not kept:
        problems.add("exclude", f"the exclusions remove all {len(combos)} universes; expected at least one to remain")
    elif spec.primary is not None:
        primary = _primary_options(spec)
        if primary not in kept:
            problems.add("primary", f"{_label(primary)} is excluded; expected a universe of the grid")


def _check_selector(spec: Spec, rule: Mapping[str, Any], where: str, problems: Problems, *, allow_lists: bool) -> None:
    for axis, chosen in rule.items():
        if axis not in spec.axes:
            problems.add(f"{where}.{axis}", f"unknown axis; expected one of: {', '.join(spec.axes) or '(no axes declared)'}")
            continue
        values = chosen if allow_lists and isinstance(chosen, list) else [chosen]
        for value in values:
            if not isinstance(value, str) or value not in spec.axes[axis]:
                problems.add(f"{where}.{axis}", f"unknown option {value!r}; expected one of: {', '.join(spec.axes[axis])}")


def _combinations(spec: Spec):
    names = list(spec.axes)
    for values in itertools.product(*(list(spec.axes[a]) for a in names)):
        yield dict(zip(names, values))


def _excluded(spec: Spec, combo: Mapping[str, str]) -> bool:
    for rule in spec.exclude:
        if all(combo[a] in (v if isinstance(v, list) else [v]) for a, v in rule.items()):
            return True
    return False


def _primary_options(spec: Spec) -> dict[str, str]:
    """The primary universe's options: as declared, else the first option of each axis."""
    declared = dict(spec.primary or {})
    return {a: declared.get(a, next(iter(opts))) for a, opts in spec.axes.items()}


def _label(options: Mapping[str, str]) -> str:
    return " · ".join(f"{a}={o}" for a, o in options.items()) or "base"


def expand(spec: Spec) -> list[Universe]:
    """The universes of ``spec``: factorial, minus exclusions, sampled if asked.

    The primary universe comes first when it is in the grid; the rest keep the
    order of the axes' options.
    """
    combos = [c for c in _combinations(spec) if not _excluded(spec, c)]
    primary = _primary_options(spec)
    if primary not in combos:
        primary = combos[0] if spec.primary is None and combos else primary
    if spec.sample is not None and spec.sample.n < len(combos):
        combos = _sample(spec, combos, primary)
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


def _sample(spec: Spec, combos: list[dict], primary: dict) -> list[dict]:
    """``sample.n`` universes, the primary always among them.

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
    first = tuple(primary[a] for a in names)
    if sample.method == "lhs":
        chosen = _latin_hypercube(spec, names, set(valid), first, sample.n, rng)
    else:
        chosen = None
    if chosen is None:
        pool = [v for v in valid if v != first]
        chosen = [first, *rng.sample(pool, sample.n - 1)]
    keep = set(chosen)
    return [c for c, v in zip(combos, valid) if v in keep]


def _latin_hypercube(spec: Spec, names: list[str], valid: set, first: tuple, n: int, rng: random.Random):
    columns = []
    for axis, p in zip(names, first):
        options = list(spec.axes[axis])
        k = len(options)
        remainder = n % k
        if n < k:
            extra = [p] + rng.sample([o for o in options if o != p], remainder - 1)
        else:
            extra = rng.sample(options, remainder)
        column = options * (n // k) + extra
        column.remove(p)  # one copy belongs to the primary row
        columns.append(column)
    for _ in range(2000):
        for column in columns:
            rng.shuffle(column)
        rows = [first, *zip(*columns)]
        if len(set(rows)) == n and all(r in valid for r in rows):
            return rows
    return None
