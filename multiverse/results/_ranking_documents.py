"""The ranking's document as a typed model (``Results.ranking().document``): ranks, their uncertainty, pairs and flips.

The dict ``analysis.ranking.ranking`` returns is what
``ranking --json`` prints; :class:`RankingDocument` is the document readers read, on
the terms of ``results._documents``: declared keys typed, every other key
kept, undefined statistics ``float | None``.
"""

from __future__ import annotations

from pydantic import Field

from multiverse.results._documents import Document, Scalar

__all__ = [
    "AdjacentPair", "BootstrapRank", "BradleyTerryDocument", "BradleyTerryScore", "Flip", "Interval", "KendallTau",
    "KendallW", "PairTest", "Pairwise", "RankStability", "RankUncertainty", "RankingDocument", "TauByAxis",
]

#: A [low, high] interval; either end None (or NaN) where it is undefined.
Interval = list[float | None]


class TauByAxis(Document):
    """Kendall's tau between universes that differ only in ``axis``."""

    axis: str
    mean: float | None
    min: float | None
    n_pairs: int
    n_pairs_two_systems: int


class KendallTau(Document):
    """Kendall's tau-b between the universes' rankings: the mean, per axis, and the matrix when it is small."""

    mean: float | None
    n_pairs: int
    n_pairs_two_systems: int
    n_pairs_undefined: int
    sampled_pairs: int | None
    by_axis: list[TauByAxis]
    universes: list[str] | None
    matrix: list[list[float | None]] | None
    n_systems: list[list[int]] | None


class KendallW(Document):
    """Kendall's W over the largest block of universes x systems that are all rated."""

    w: float | None
    chi2: float | None
    df: int
    p_value: float | None
    universes: int
    systems: int
    block_systems: list[str]
    complete: bool


class Flip(Document):
    """A universe whose top system differs from the primary's, with the smallest change that gives that top."""

    universe_id: str
    top: list[str]
    changes: dict[str, Scalar]  # {axis: option}
    n_axes_differ: int
    via_universe: str


class BootstrapRank(Document):
    """A system's rank in one universe with its case-bootstrap interval."""

    universe_id: str
    system: str
    rate: float | None
    rank: int
    rank_low: float | None
    rank_high: float | None
    p_top: float | None


class AdjacentPair(Document):
    """Neighbours in the primary's order: P(a above b), its interval, and whether it excludes 1/2."""

    a: str
    b: str
    p_above: float | None
    low: float | None
    high: float | None
    separable: bool


class RankUncertainty(Document):
    """Case-bootstrap intervals of the ranking's statistics."""

    method: str
    resamples: int
    level: float
    p_top: dict[str, Interval]
    primary_rank: dict[str, Interval]
    p_above: dict[str, dict[str, Interval]]
    adjacent: list[AdjacentPair]


class PairTest(Document):
    """A paired test of rate(a) = rate(b) in the primary universe."""

    a: str
    b: str
    n_cases: int
    rate_a: float | None
    rate_b: float | None
    difference: float | None
    p: float | None
    p_holm: float | None


class Pairwise(Document):
    """The paired tests of every two systems rated in the primary universe, and their adjustment."""

    universe: str | None
    family: str
    adjustment: str
    method: str | None
    pairs: list[PairTest]


class CutRow(Document):
    """One system at one scoring choice (the mean, or a cut) among universes that differ only in it."""

    group: str
    universe_id: str
    scoring: str
    estimator: str
    cut: float | None
    system: str
    rate: float
    rank: int


class RankingDocument(Document):
    """``ranking --json``: how stable the ranking of systems is across universes (``analysis.ranking.ranking``)."""

    universes: int
    primary: str | None
    ties: str
    systems: list[str]
    primary_top: list[str]
    p_top: dict[str, float]  # P(rank 1) over all universes
    p_top_when_rated: dict[str, float | None]  # over the universes rating the system (undefined for none)
    coverage: dict[str, float]  # the share of universes rating the system
    rank_distribution: dict[str, list[float | None]]
    p_above: dict[str, dict[str, float | None]]
    kendall_tau: KendallTau
    kendall_w: KendallW
    flips: list[Flip]
    bootstrap: list[BootstrapRank]
    uncertainty: RankUncertainty | None  # None without the bootstrap
    pairwise: Pairwise
    notes: list[str]
    reference: str | None = None  # a pairwise scale's reference system: left out of the ranking
    cuts: list[CutRow] = Field(default_factory=list)  # each system's estimate and rank as the cut moves
    cut_flips: list[str] = Field(default_factory=list)  # where the top system changes as the cut moves, in words


class RankStability(Document):
    """How stable an order of the systems is across universes, read off one score per universe x system."""

    universes: int
    primary: str | None
    ties: str
    systems: list[str]
    primary_top: list[str]
    p_top: dict[str, float]
    p_top_when_rated: dict[str, float | None]
    coverage: dict[str, float]
    rank_distribution: dict[str, list[float | None]]
    p_above: dict[str, dict[str, float | None]]
    kendall_tau: KendallTau
    kendall_w: KendallW
    flips: list[Flip]


class BradleyTerryScore(Document):
    """A system's Bradley-Terry score in one universe (log-odds), its case-bootstrap interval and rank.
    The axis columns are extra keys."""

    universe_id: str
    system: str
    score: float
    low: float | None
    high: float | None
    rank: int
    rank_low: float | None
    rank_high: float | None
    p_top: float | None
    games: float
    wins: float
    resamples_fit: int


class BradleyTerryDocument(Document):
    """``ranking --method bt --json``: Bradley-Terry scores per universe and their ranking's stability
    (``analysis.ranking.bradley_terry``)."""

    method: str
    scale: str
    anchor: str | None
    prior: float
    resamples: int
    seed: int
    level: float
    scores: list[BradleyTerryScore]
    stability: RankStability
    notes: list[str]
