"""How many universes a spec's grid makes: counted, never listed, so the answer holds for any size."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from multiverse.core import MAX_UNIVERSES

if TYPE_CHECKING:
    from multiverse.spec._models import Spec

__all__ = ["UniverseCount", "universe_count"]


@dataclass(frozen=True)
class UniverseCount:
    """The grid's combinations, how many the exclusions keep, and how many universes a run would have.

    ``kept_low``/``kept_high`` bound an estimated ``kept`` (equal to it when
    ``exact``); ``universes`` is the sample's size or the kept grid, None when
    neither is known exactly; ``max_universes`` is what one run may hold.
    """

    combinations: int
    kept: int
    exact: bool
    kept_low: int
    kept_high: int
    sample: int | None
    universes: int | None
    max_universes: int
    described: str

    def to_dict(self) -> dict[str, Any]:
        """The document ``expand`` prints with its count (``described`` is the sentence, not a field)."""
        document = asdict(self)
        document.pop("described")
        return document

    def sentence(self) -> str:
        """One line: the count, then what a run of this grid would be."""
        n, universes = self.sample, self.universes
        if universes is not None and universes <= self.max_universes:
            how = (f"a sample of {universes:,} universes" if n is not None and universes < self.kept
                   else f"{universes:,} universes")
        elif universes is not None:
            how = (f"more universes than a run may have (at most {self.max_universes:,}): run a sample of the grid, "
                   "sample: {n: ...}")
        else:
            how = "not countable exactly, so not listable: run a sample of the grid, sample: {n: ...}"
        return f"{self.described}; {how}"


def universe_count(spec: Spec) -> UniverseCount:
    """Count ``spec``'s universes without listing them (load it with ``cap_universes=False`` for huge grids)."""
    from multiverse.spec._grid import count_grid

    count = count_grid(spec)
    n = spec.sample.n if spec.sample is not None else None
    if n is not None:
        universes: int | None = min(n, count.kept) if count.exact else n
    else:
        universes = count.kept if count.exact else None
    low = count.kept if count.exact or count.low is None else count.low
    high = count.kept if count.exact or count.high is None else count.high
    return UniverseCount(count.combinations, count.kept, count.exact, low, high, n, universes, MAX_UNIVERSES,
                         count.describe())
