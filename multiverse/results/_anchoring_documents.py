"""The human-anchored documents as typed models: calibrate, and the curve and ranking after it.

The dicts ``results._anchoring`` builds are what ``calibrate --json``
prints (and the ``anchored`` key of ``curve --human`` and ``ranking
--human``); these models are the documents every reader reads
(``Analysis.document``), on the terms of ``results._documents``.
"""

from __future__ import annotations

from multiverse.results._documents import Document, Spread

__all__ = [
    "AnchoredCurveDocument", "AnchoredPrimary", "AnchoredRankingDocument", "AnchoredRate", "AnchoredSystem",
    "AnchoredUniverse", "CalibrationDocument", "JudgeAccuracy", "LabelCount",
]


class AnchoredRate(Document):
    """One universe x system rate, judge alone, anchored (PPI++) and humans only. The axis columns are extra keys."""

    universe_id: str
    system: str
    n: int
    n_human: int
    judge_rate: float | None
    rate: float | None
    ci_low: float | None
    ci_high: float | None
    human_rate: float | None
    human_ci_low: float | None
    human_ci_high: float | None
    anchored_wider: bool
    # A scored run's: the universe's estimator (mean or at_least) and, for a mean, the means in the scale's units.
    estimator: str | None = None
    judge_mean: float | None = None
    mean: float | None = None
    mean_ci_low: float | None = None
    mean_ci_high: float | None = None
    human_mean: float | None = None
    human_mean_ci_low: float | None = None
    human_mean_ci_high: float | None = None


class JudgeAccuracy(Document):
    """One universe's judge against the human labels, pooled over systems. The axis columns are extra keys."""

    universe_id: str
    n_human: int
    sensitivity: float | None
    sensitivity_ci: list[float | None] | None
    specificity: float | None
    specificity_ci: list[float | None] | None
    accuracy: float | None = None  # the share of labels the judge gives as people do
    accuracy_ci: list[float | None] | None = None
    kappa: float | None = None  # Cohen's kappa of the judge's labels against people's
    # A scored run's universes of a mean: the judge's mean score minus the people's (scale units), and Pearson's r.
    mean_difference: float | None = None
    correlation: float | None = None


class LabelCount(Document):
    """The labelled transcripts of the run, each counted once however many universes share it."""

    transcripts: int
    rollout_configurations: int
    systems: dict[str, int]
    per_cell: int | None  # per system and rollout configuration, when the same in all


class CalibrationDocument(Document):
    """``calibrate --json``: every rate anchored to people, and each judge against them."""

    alpha: float
    rates: list[AnchoredRate]
    judges: list[JudgeAccuracy]
    labelled: LabelCount
    notes: list[str]


class AnchoredPrimary(Document):
    """A system in the primary universe, judge alone and anchored; where ``anchored_wider``, quote the humans-only interval."""

    judge_rate: float | None
    rate: float | None
    ci_low: float | None
    ci_high: float | None
    human_ci_low: float | None
    human_ci_high: float | None
    anchored_wider: bool


class AnchoredSystem(Document):
    """One system's rates over universes, judge alone and anchored."""

    judge_rate: Spread
    rate: Spread
    primary: AnchoredPrimary | None


class AnchoredCurveDocument(Document):
    """``Results.anchored_curve``: the anchored rates summarised per system."""

    alpha: float
    n_universes: int
    systems: dict[str, AnchoredSystem]
    notes: list[str]


class AnchoredUniverse(Document):
    """One universe's ranking of systems by the judge and anchored, highest first."""

    universe_id: str
    judge_order: list[str]
    anchored_order: list[str]
    same_top: bool
    same_order: bool
    anchored_top_separable: bool


class AnchoredRankingDocument(Document):
    """``Results.anchored_ranking``: whether each universe's ranking survives anchoring."""

    alpha: float
    universes: list[AnchoredUniverse]
    same_top: float | None  # the share of universes; None when none has two anchored rates
    same_order: float | None
    primary: AnchoredUniverse | None
    notes: list[str]
