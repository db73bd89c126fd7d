"""How many universes a grid keeps after its exclusions, without listing the grid.

Every exclusion rule is a box of the factorial (per axis it names, a set of
options; any option on the others), so the kept universes are the factorial
minus a union of boxes. They are counted exactly by a walk over the axes
whose state is the set of rules a partial universe still matches (a bit
mask): options that keep the same rules alive are one branch, weighted by
how many there are, and axes no rule names only multiply. The walk's width
is the number of distinct alive-rule sets, which for exclusion lists people
write stays small; when it passes ``MAX_STATES`` the count is estimated from
uniform random draws instead, and says so (``GridCount.exact``), with a 95%
interval. Never a silent wrong number.

The same walk, run backwards, gives every branch its number of kept
completions (``KeptGrid``): the kept universes of a huge grid are listed
visiting only branches that lead to one (time proportional to what is kept,
not to the grid), and the kept universe of any rank is decoded in one pass
over the axes, so a uniform sample of the kept universes needs no rejection.
"""

from __future__ import annotations

import math
import random
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["ESTIMATE_DRAWS", "MAX_STATES", "GridCount", "KeptGrid", "count_kept", "decode"]

#: Widest walk (distinct alive-rule sets at one axis) counted exactly; past it the count is estimated.
MAX_STATES = 200_000
#: Uniform draws behind an estimated count.
ESTIMATE_DRAWS = 20_000


@dataclass(frozen=True)
class GridCount:
    """Combinations of the factorial and how many the exclusions keep (exactly, or estimated with a 95% interval)."""

    combinations: int
    kept: int
    exact: bool = True
    low: int | None = None
    high: int | None = None
    draws: int = 0

    def describe(self) -> str:
        """``1,000,000 combinations, 990,000 kept`` or, estimated, ``about 990,000 kept (...)``."""
        combinations = f"{self.combinations:,} combination{'s' if self.combinations != 1 else ''}"
        if self.exact:
            if self.kept == self.combinations:
                return f"{combinations}, no exclusions apply"
            return f"{combinations}, {self.combinations - self.kept:,} excluded, {self.kept:,} kept"
        return (f"{combinations}, about {self.kept:,} kept (an estimate from {self.draws:,} "
                f"random draws, 95% interval {self.low:,} to {self.high:,}: the exclusion rules overlap too much "
                "to count exactly)")


class _TooWide(Exception):
    pass


class _Walk:
    """The axes in walking order, each option's effect on the alive rules, and the layers of the walk."""

    def __init__(self, axes: Mapping[str, Sequence[str]], rules: Sequence[Mapping[str, Any]], max_states: int):
        self.names = list(axes)
        self.options = {a: list(axes[a]) for a in self.names}
        sets = [{a: set(v if isinstance(v, list) else [v]) for a, v in rule.items()} for rule in rules]
        # Rules naming fewer axes first, their axes in that order: rules close (and leave the
        # state) as early as possible, which keeps the walk narrow. Axes no rule names go last.
        order: list[str] = []
        for rule in sorted(sets, key=len):
            order += [a for a in self.names if a in rule and a not in order]
        self.order = order + [a for a in self.names if a not in order]
        position = {a: i for i, a in enumerate(self.order)}
        self.all_rules = (1 << len(sets)) - 1
        # closing[i]: rules whose last axis (in walking order) is the i-th.
        self.closing = [0] * (len(self.order) + 1)
        for r, rule in enumerate(sets):
            self.closing[max(position[a] for a in rule) if rule else 0] |= 1 << r
        # branches[i]: (rules an option kills, the options that kill exactly those) at the i-th axis.
        self.branches: list[list[tuple[int, list[str]]]] = []
        for axis in self.order:
            by_kill: dict[int, list[str]] = {}
            for option in self.options[axis]:
                kill = 0
                for r, rule in enumerate(sets):
                    if axis in rule and option not in rule[axis]:
                        kill |= 1 << r
                by_kill.setdefault(kill, []).append(option)
            self.branches.append(list(by_kill.items()))
        self.suffix = [1] * (len(self.order) + 1)
        for i in range(len(self.order) - 1, -1, -1):
            self.suffix[i] = self.suffix[i + 1] * len(self.options[self.order[i]])
        self.max_states = max_states
        self._ways: list[dict[int, int]] | None = None

    def step(self, i: int, alive: int, kill: int) -> int | None:
        """The alive rules after choosing a branch at axis ``i``, or None if that completes a rule."""
        nxt = alive & ~kill
        if nxt & self.closing[i]:
            return None
        return nxt

    def layers(self, keep: bool = True) -> list[dict[int, int]]:
        """Per axis, each alive-rule set reached and how many partial universes reach it (``keep=False``: the last only)."""
        layers = [{self.all_rules: 1}]
        stored = 1
        for i in range(len(self.order)):
            nxt: dict[int, int] = {}
            for alive, ways in layers[-1].items():
                for kill, options in self.branches[i]:
                    state = self.step(i, alive, kill)
                    if state is not None:
                        nxt[state] = nxt.get(state, 0) + ways * len(options)
            stored += len(nxt)
            # Kept layers add up over the axes: bound them all, not only the widest.
            if len(nxt) > self.max_states or (keep and stored > 4 * self.max_states):
                raise _TooWide
            if keep:
                layers.append(nxt)
            else:
                layers[-1] = nxt
        return layers

    def completions(self) -> list[dict[int, int]]:
        """ways[i][alive]: kept completions from axis ``i`` on, for every state the walk reaches."""
        if self._ways is None:
            forward = self.layers()
            ways: list[dict[int, int]] = [{} for _ in forward]
            ways[-1] = dict.fromkeys(forward[-1], 1)
            for i in range(len(self.order) - 1, -1, -1):
                for alive in forward[i]:
                    if alive == 0:
                        ways[i][alive] = self.suffix[i]
                        continue
                    total = 0
                    for kill, options in self.branches[i]:
                        state = self.step(i, alive, kill)
                        if state is not None:
                            total += len(options) * ways[i + 1].get(state, 0)
                    ways[i][alive] = total
            self._ways = ways
        return self._ways


def decode(axes: Mapping[str, Sequence[str]], index: int) -> dict[str, str]:
    """The combination at ``index`` of the factorial, in listing order (mixed radix, last axis fastest)."""
    combo = {}
    for axis in reversed(list(axes)):
        options = list(axes[axis])
        index, digit = divmod(index, len(options))
        combo[axis] = options[digit]
    return {axis: combo[axis] for axis in axes}


def _matches(rule: Mapping[str, Any], combo: Mapping[str, str]) -> bool:
    return all(combo[a] in (v if isinstance(v, list) else [v]) for a, v in rule.items())


def count_kept(axes: Mapping[str, Sequence[str]], rules: Sequence[Mapping[str, Any]], *,
               max_states: int | None = None, draws: int = ESTIMATE_DRAWS) -> GridCount:
    """Combinations of ``axes`` (axis -> options) that no rule of ``rules`` (axis -> option or options) drops."""
    total = math.prod(len(options) for options in axes.values())
    if not rules:
        return GridCount(total, total)
    try:
        layers = _Walk(axes, rules, MAX_STATES if max_states is None else max_states).layers(keep=False)
    except _TooWide:
        return _estimate(axes, rules, total, draws)
    return GridCount(total, sum(layers[-1].values()))


def _estimate(axes: Mapping[str, Sequence[str]], rules: Sequence[Mapping[str, Any]], total: int, draws: int) -> GridCount:
    rng = random.Random(0)  # the same spec always gets the same estimate
    hits = 0
    for _ in range(draws):
        combo = decode(axes, rng.randrange(total))
        hits += not any(_matches(rule, combo) for rule in rules)
    # Wilson's 95% interval of the kept share.
    z, p = 1.959964, hits / draws
    centre = (p + z * z / (2 * draws)) / (1 + z * z / draws)
    half = z * math.sqrt(p * (1 - p) / draws + z * z / (4 * draws * draws)) / (1 + z * z / draws)
    # The interval's ends: a share of the grid, never outside 0..total (a kept hit means at least one).
    low = max(1 if hits else 0, math.floor(max(0.0, centre - half) * total))
    high = min(total, math.ceil(min(1.0, centre + half) * total))
    return GridCount(total, min(high, max(low, round(p * total))), exact=False, low=low, high=high, draws=draws)


class KeptGrid:
    """The kept universes of a grid, counted, listed and drawn by rank without listing the grid.

    Raises ``ValueError`` when the rules overlap too much to walk (``count_kept`` then estimates).
    """

    def __init__(self, axes: Mapping[str, Sequence[str]], rules: Sequence[Mapping[str, Any]], *,
                 max_states: int | None = None):
        self._walk = _Walk(axes, rules, MAX_STATES if max_states is None else max_states)
        try:
            self._ways = self._walk.completions()
        except _TooWide:
            raise ValueError("the exclusion rules overlap too much to walk the grid") from None
        self.count = self._ways[0].get(self._walk.all_rules, 0)

    def at(self, rank: int) -> dict[str, str]:
        """The kept combination of rank ``rank`` (0 <= rank < count) in walking order: a uniform
        random rank is a uniform random kept universe."""
        walk, ways = self._walk, self._ways
        chosen: dict[str, str] = {}
        alive = walk.all_rules
        for i, axis in enumerate(walk.order):
            for kill, options in walk.branches[i]:
                state = walk.step(i, alive, kill)
                each = 0 if state is None else ways[i + 1].get(state, 0)
                if rank < each * len(options):
                    chosen[axis] = options[rank // each]
                    rank %= each
                    alive = state  # type: ignore[assignment]  # each > 0, so state is not None
                    break
                rank -= each * len(options)
        return {a: chosen[a] for a in walk.names}

    def combinations(self) -> list[dict[str, str]]:
        """Every kept combination in listing order (original axes, last fastest), visiting only
        branches that lead to one: time proportional to what is kept, not to the grid."""
        walk, ways = self._walk, self._ways
        names = walk.names
        rank = {a: {o: i for i, o in enumerate(walk.options[a])} for a in names}
        found: list[dict[str, str]] = []
        chosen: dict[str, str] = {}

        def visit(i: int, alive: int) -> None:
            if i == len(walk.order):
                found.append({a: chosen[a] for a in names})
                return
            axis = walk.order[i]
            for kill, options in walk.branches[i]:
                state = walk.step(i, alive, kill)
                if state is None or not ways[i + 1].get(state, 0):
                    continue
                for option in options:
                    chosen[axis] = option
                    visit(i + 1, state)

        limit = sys.getrecursionlimit()
        sys.setrecursionlimit(max(limit, len(walk.order) + 100))
        try:
            visit(0, walk.all_rules)
        finally:
            sys.setrecursionlimit(limit)
        # The walking order is not the listing order: sort what is kept (the caller lists it).
        found.sort(key=lambda c: [rank[a][c[a]] for a in names])
        return found
