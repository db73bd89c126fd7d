"""Axes, exclusions, sampling and the primary, checked against the grid they make.

The combinatorics of the grid live here, beside the checks that need them,
so that the grid (which expands a spec into universes) imports the spec and
never the other way round.
"""

from __future__ import annotations

import copy
import itertools
import math
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from multiverse.core import MAX_OPTIONS, MAX_UNIVERSES, digest, universe_label, universes_problem
from multiverse.errors import SpecError
from multiverse.spec._bounds import transcripts_per_universe
from multiverse.spec._checks import MINIMA
from multiverse.spec._counting import GridCount, count_kept
from multiverse.spec._models import Spec
from multiverse.spec._problems import Problems, resolve_path

__all__ = [
    "ENUMERATE_LIMIT",
    "GRID_FIELDS",
    "apply_patch",
    "check_axes",
    "check_patch_path",
    "combinations",
    "count_grid",
    "excluded",
    "grid_size",
    "label",
    "primary_options",
    "strip_axes",
]

#: Grids up to this many combinations are listed; larger ones are sampled by index, or only their kept universes visited.
ENUMERATE_LIMIT = MAX_UNIVERSES

#: Top-level fields that are not measurement choices: an axis may not patch them.
GRID_FIELDS = ("name", "axes", "exclude", "sample", "primary", "rate_limits", "report", "batch")


def check_patch_path(dotted: str, document: Mapping[str, Any]) -> str | None:
    """``None`` if ``dotted`` addresses a spec field, else what is wrong."""
    return resolve_path(Spec, document, dotted.split("."))


def apply_patch(document: Mapping[str, Any], patch: Mapping[str, Any]) -> dict[str, Any]:
    """A deep copy of ``document`` with each dotted path set to its value."""
    out = copy.deepcopy(dict(document))
    for dotted, value in patch.items():
        node: Any = out
        parts = dotted.split(".")
        for i, part in enumerate(parts[:-1]):
            node = _child(node, part, default={} if not parts[i + 1].isdigit() else [])
        last = parts[-1]
        if isinstance(node, list):
            node[_list_index(node, last)] = copy.deepcopy(value)
        else:
            node[last] = copy.deepcopy(value)
    return out


def _list_index(items: list[Any], part: str) -> int:
    for i, element in enumerate(items):
        if isinstance(element, dict) and part in (element.get("name"), element.get("id")):
            return i
    return int(part)


def _child(node: Any, part: str, *, default: Any) -> Any:
    if isinstance(node, list):
        return node[_list_index(node, part)]
    if part not in node or node[part] is None:
        node[part] = default
    return node[part]


def strip_axes(document: Mapping[str, Any]) -> dict[str, Any]:
    """The base audit of a document: without its axes, exclusions, sample and primary."""
    return {k: v for k, v in document.items() if k not in ("axes", "exclude", "sample", "primary")}


def grid_size(spec: Spec) -> int:
    """The number of universes before exclusions: the product of the axes' option counts."""
    return math.prod(len(options) for options in spec.axes.values())


def count_grid(spec: Spec) -> GridCount:
    """How many universes the exclusions keep, without listing the grid (``_spec.counting``)."""
    return count_kept({a: list(options) for a, options in spec.axes.items()}, list(spec.exclude))


def combinations(spec: Spec) -> Iterator[dict[str, str]]:
    """Every combination of one option per axis, the last axis fastest."""
    names = list(spec.axes)
    for values in itertools.product(*(list(spec.axes[a]) for a in names)):
        yield dict(zip(names, values))


def excluded(spec: Spec, combo: Mapping[str, str]) -> bool:
    """Whether an ``exclude`` rule drops ``combo``."""
    for rule in spec.exclude:
        if all(combo[a] in (v if isinstance(v, list) else [v]) for a, v in rule.items()):
            return True
    return False


def primary_options(spec: Spec) -> dict[str, str] | None:
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


def label(options: Mapping[str, str]) -> str:
    """``axis=option · axis=option``, or ``base`` for the universe of a spec without axes (``core.universe_label``)."""
    return universe_label(options)


def check_axes(spec: Spec, problems: Problems, resolve: Callable[[dict[str, Any]], Spec], *, cap: bool = True) -> None:
    """Validate axes, exclusions, sampling and the primary against ``spec``.

    ``resolve`` builds and checks the spec of a patched document (raising
    ``SpecError``): every option must make a valid spec that differs from its
    axis's other options. ``cap=False`` leaves out the cap on universes per
    run (``expand --count`` counts a grid too large to run).
    """
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
            # An empty patch is the base spec itself: allowed.
            for dotted in patch:
                head = dotted.split(".")[0]
                if head in GRID_FIELDS:
                    problems.add(f"axes.{axis}.{option}.{dotted}", f"patches {head!r}, which is not a measurement choice; expected a path under concept, rubric, design, systems, rollout, judge, scoring or world")
                    continue
                wrong = check_patch_path(dotted, document)
                if wrong:
                    problems.add(f"axes.{axis}.{option}.{dotted}", f"patches a path that does not exist: {wrong}")
    if problems:
        return
    _check_options_differ(spec, problems, resolve)
    for i, rule in enumerate(spec.exclude):
        _check_selector(spec, rule, f"exclude.{i}", problems, allow_lists=True)
        if not rule:
            problems.add(f"exclude.{i}", "expected at least one axis: option pair")
    if spec.primary is not None:
        _check_selector(spec, spec.primary, "primary", problems, allow_lists=False)
    if spec.sample is not None and spec.sample.n < MINIMA["sample.n"]:
        problems.add("sample.n", f"expected an integer >= {MINIMA['sample.n']}, got {spec.sample.n}")
    if problems:
        return
    _check_grid(spec, problems, cap=cap)


def _check_options_differ(spec: Spec, problems: Problems, resolve: Callable[[dict[str, Any]], Spec]) -> None:
    base = strip_axes(spec.document or {})
    for axis, options in spec.axes.items():
        resolved: dict[str, str] = {}
        for option, patch in options.items():
            try:
                alone = resolve(apply_patch(base, patch))
            except SpecError as exc:
                problems.add(f"axes.{axis}.{option}", f"{exc.path}: {exc.expected}" if exc.path else exc.expected)
                continue
            wrong = _pairwise_change(spec, alone)
            if wrong:
                problems.add(f"axes.{axis}.{option}", wrong)
            key = digest(alone.measurement())
            if key in resolved:
                problems.add(f"axes.{axis}.{option}", f"measures exactly what option {resolved[key]!r} measures; expected each option to change something")
            resolved.setdefault(key, option)


def _pairwise_change(spec: Spec, alone: Spec) -> str | None:
    """What is wrong when an option turns a pairwise scale into another kind (or back), or moves its reference.

    A pairwise universe's rows are preferences over the reference system, which is left out of every
    ranking; a folder has one reference. The range of a pairwise scale may vary, as any scale's may.
    """
    base, own = spec.judge.scale, alone.judge.scale
    if (base.type == "pairwise") != (own.type == "pairwise"):
        return (f"judge.scale: turns a {base.type} scale into a {own.type} one; expected every universe pairwise "
                "or none (a pairwise universe's scores are preferences over a reference system)")
    if base.type == "pairwise" and own.reference != base.reference:
        return (f"judge.scale.reference: {own.reference!r}, where the base spec compares with {base.reference!r}; "
                "expected one reference system in every universe")
    return None


def _check_grid(spec: Spec, problems: Problems, *, cap: bool = True) -> None:
    primary = primary_options(spec)
    if primary is not None and excluded(spec, primary):
        problems.add("primary", f"{label(primary)} is excluded; expected a universe of the grid")
        return
    count = count_grid(spec)
    if count.exact and not count.kept:
        problems.add("exclude", f"the exclusions remove all {count.combinations:,} universes; expected at least one to remain")
        return
    if not cap:
        return
    if spec.sample is None and not count.exact:
        problems.add("axes", f"{count.describe()}; expected a grid that can be listed (run a sample of it: sample: {{n: ...}})")
        return
    n = min(count.kept, spec.sample.n) if spec.sample is not None else count.kept
    wrong = universes_problem(n, transcripts_per_universe(spec) or 0)
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
