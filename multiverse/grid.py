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
        # shape the test cases.
        return "judge" if ".evidence" in f".{rest}" else "draft"
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


def _strip_axes(document: Mapping[str, Any]) -> dict:
    return {k: v for k, v in document.items() if k not in ("axes", "exclude", "sample", "primary")}


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
                wrong = check_patch_path(dotted, document)
                if wrong:
                    problems.add(f"axes.{axis}.{option}.{dotted}", f"patches a path that does not exist: {wrong}")
    if problems:
        return
    for axis, options in spec.axes.items():
        for option, patch in options.items():
            try:
                resolve_document(apply_patch(_strip_axes(document), patch), path=spec.path, where=f"axes.{axis}.{option}")
            except SpecError as exc:
                problems.add(f"axes.{axis}.{option}", exc.expected if exc.path == "" else f"{exc.path}: {exc.expected}")
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
    for combo in combos:
        patch: dict[str, Any] = {}
        for axis, option in combo.items():
            patch.update(spec.axes[axis][option])
        resolved = resolve_document(apply_patch(base, patch), path=spec.path)
        uid = digest(resolved.measurement(), 12)
        universes.append(Universe(uid, _label(combo), combo, resolved, is_primary=(combo == primary)))
    universes.sort(key=lambda u: not u.is_primary)
    return universes


def _sample(spec: Spec, combos: list[dict], primary: dict) -> list[dict]:
    sample = spec.sample
    rng = random.Random(sample.seed)
    valid = {tuple(c.values()) for c in combos}
    chosen: list[tuple] = []
    if tuple(primary.values()) in valid:
        chosen.append(tuple(primary.values()))
    if sample.method == "random":
        pool = [tuple(c.values()) for c in combos if tuple(c.values()) not in chosen]
        chosen += rng.sample(pool, sample.n - len(chosen))
    else:
        # Latin hypercube over categorical axes: each axis's options appear
        # equally often (within one) across the sample; excluded or repeated
        # combinations are redrawn, then topped up at random.
        names = list(spec.axes)
        need = sample.n - len(chosen)
        for _ in range(50):
            columns = []
            for axis in names:
                options = list(spec.axes[axis])
                column = (options * (need // len(options) + 1))[:need]
                rng.shuffle(column)
                columns.append(column)
            for row in zip(*columns):
                if row in valid and row not in chosen and len(chosen) < sample.n:
                    chosen.append(row)
            need = sample.n - len(chosen)
            if need == 0:
                break
        if need:
            pool = [v for v in (tuple(c.values()) for c in combos) if v not in chosen]
            chosen += rng.sample(pool, need)
    keep = set(chosen)
    return [c for c in combos if tuple(c.values()) in keep]
