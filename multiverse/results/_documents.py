"""The documents of the curve, agreement, variance and power analyses, as typed models (``Analysis.document``).

An analysis function returns a plain dict; ``--json`` prints that dict as it
is (``Analysis.to_dict``, ``Analysis.source``). A model here is the document
every reader reads, validated from the dict on first use, so the report, the
gate, the command line and scripts read ``doc.systems["atlas"].rate.min`` where they once read
``doc["systems"]["atlas"]["rate"]["min"]``, and a renamed key fails at the
type check instead of at a user's terminal.

The models declare the keys their readers rely on; any other key is kept as
it is (``extra="allow"``), so ``model_dump(exclude_unset=True)`` gives back
the document's content. A statistic that can be undefined is ``float | None``:
the document holds NaN (or None where the analysis wrote null), its JSON
null, and a model validates from either. ``_ranking_documents`` and
``_anchoring_documents`` hold the ranking's and the human-anchored ones.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from multiverse.core import BaseScale

__all__ = [
    "AgreementDocument", "AgreementPair", "AliasedGroup", "Aliasing", "AxisShare", "CasesNeeded", "Confound",
    "Confusion", "CriterionAgreement", "CurveDocument", "CurvePrimary", "CutAgreement", "Document", "HumanJudgePower",
    "HumanPower",
    "IntraclassCorrelation", "JointTestEntry", "MeanDifference", "Multiplicity", "NestedAxis", "NoiseFloor",
    "PowerComparison", "PowerDocument", "Scalar", "ScoreAgreement", "ScorePair", "ScoreScale", "Spread",
    "SystemCurve", "TestStatistic", "VarianceDocument", "VarianceTerm",
]

#: An option of an axis as the verdicts hold it: text, a number or a flag.
Scalar = str | int | float | bool | None


class Document(BaseModel):
    """The typed model of one analysis's document: the keys it declares, and every other key kept as it is.

    Frozen: the dict (``Analysis.source``) is what ``--json`` prints, and the
    model does not write back to it.
    """

    model_config = ConfigDict(extra="allow", frozen=True)


class Spread(Document):
    """The smallest, median and largest of a quantity over universes."""

    min: float | None
    median: float | None
    max: float | None


# -- curve ------------------------------------------------------------------------------------------------------------


class CurvePrimary(Document):
    """Where the primary universe sits on one system's curve (1 = the lowest rate)."""

    universe_id: str
    rate: float | None
    ci_low: float | None
    ci_high: float | None
    position: int
    #: The positions every universe with this same rate holds (equal when none shares it).
    position_low: int
    position_high: int
    percentile: float


class SystemCurve(Document):
    """One system's specification curve, summarised over its universes."""

    n_universes: int
    rate: Spread
    min_universe: str
    max_universe: str
    primary: CurvePrimary | None


class TestStatistic(Document):
    """One statistic of a joint test: its observed value, p-value and Holm-adjusted p-value."""

    observed: int | float | None  # n_significant's is a count of universes, and stays a whole number
    p: float | None
    share: float | None = None  # n_significant only: the share of universes significant on their own
    p_holm: float | None  # Holm-adjusted over every p-value of the curve summary (its ``multiplicity``)


class JointTestPart(Document):
    """One kind of universe's own joint test within a test of a mixed curve."""

    kind: str
    null: str
    resampling: str
    n_universes: int
    statistics: dict[str, dict[str, int | float | None]]  # observed and p (not Holm-adjusted: the combined p is)
    null_model: dict[str, str | float | dict[str, float | None] | None] | None = None


class JointTestEntry(Document):
    """A joint test as the curve summary reports it (``JointTest.to_dict`` and the primary universe's effect)."""

    kind: str  # "rate" or "difference"
    null: str
    systems: list[str]
    threshold: float | None
    estimates: str = "shares"  # what the universes estimate: "shares", "means" or both ("shares and means")
    resampling: str
    boot: int
    exact: bool
    seed: int | str | None
    alpha: float
    band_level: float
    n_universes: int
    n_cases: int
    direction: str
    effect: Spread
    statistics: dict[str, TestStatistic]
    # Which null ran ("name", the resampling's words) and the dependence it reproduces, where it models one.
    null_model: dict[str, str | float | dict[str, float | None] | None] | None = None
    # A curve of shares and means: each kind's own test, whose p-values this one combines.
    parts: list[JointTestPart] | None = None
    primary_effect: float | None = None  # the curve summary's; a test on its own (the report's table) has none


class Multiplicity(Document):
    """The family the curve's p-values are adjusted over."""

    method: str
    family: str
    n_p_values: int


class CurveDocument(Document):
    """``curve --json``: each system's curve, the joint tests and their multiplicity (``analysis.curve.curve_summary``)."""

    schema_version: int
    level: float | None
    ci: str | None
    primary: str | None
    n_universes: int
    systems: dict[str, SystemCurve]
    tests: list[JointTestEntry]
    multiplicity: Multiplicity | None
    notes: list[str]


# -- agreement --------------------------------------------------------------------------------------------------------


class Confusion(Document):
    """The 2 x 2 table of two options' labels on the units both labelled."""

    both_compliant: int
    a_only_compliant: int
    b_only_compliant: int
    both_noncompliant: int


class AgreementPair(Document):
    """Two options of the axis compared on the same units."""

    a: Scalar
    b: Scalar
    n: int
    percent: float | None
    cohen_kappa: float | None
    gwet_ac1: float | None
    bias: float | None  # rate(a) - rate(b)
    small_sample: bool
    degenerate: bool
    confusion: Confusion


class Confound(Document):
    """A design column in which the options' rows for one unit differ: they did not judge the same task."""

    column: str
    share: float
    n_units: int


class CriterionAgreement(Document):
    """Agreement on one criterion's label (applicable, or compliant)."""

    criterion: str
    permissible: bool | None
    label: str
    krippendorff_alpha: float | None
    pairs: list[AgreementPair]


class ScoreScale(Document, BaseScale):
    """The scale the scores were compared on (``core.BaseScale``): declared, or read from the scores (``declared`` false)."""

    type: str  # type: ignore[assignment]  # as the document says it, not checked again
    min: float
    max: float
    declared: bool


class MeanDifference(Document):
    """The mean of a - b over the units both scored, with its case-clustered t interval."""

    mean: float | None
    se: float | None
    ci_low: float | None
    ci_high: float | None
    n: int
    n_cases: int


class ScorePair(Document):
    """Two options compared on their scores (the ordinal statistics None on a continuous or pairwise scale)."""

    a: Scalar
    b: Scalar
    n: int
    kappa_linear: float | None
    kappa_quadratic: float | None
    exact: float | None
    within_one: float | None
    icc2_1: float | None
    icc3_1: float | None
    mean_difference: MeanDifference
    small_sample: bool


class IntraclassCorrelation(Document):
    """ICC(2,1) (absolute agreement) and ICC(3,1) (consistency) over the ``n`` units every option scored."""

    icc2_1: float | None
    icc3_1: float | None
    n: int


class CutAgreement(Document):
    """Agreement on the labels score >= ``cut``, as on compliance labels."""

    cut: float
    krippendorff_alpha: float | None
    pairs: list[AgreementPair]


class ScoreAgreement(Document):
    """The options compared on their scores (``analysis.agreement_scored.score_agreement``)."""

    scale: ScoreScale
    options: list[Scalar]
    paired_on: str
    n_units: int
    level: float
    krippendorff_alpha_ordinal: float | None
    krippendorff_alpha_interval: float | None
    icc: IntraclassCorrelation
    pairs: list[ScorePair]
    cuts: list[CutAgreement]
    notes: list[str]


class VerdictPair(Document):
    """Two options compared on three-way verdicts (win, tie, loss); ``table`` rows are a's loss, tie, win."""

    a: Scalar
    b: Scalar
    n: int
    percent: float | None
    cohen_kappa: float | None
    small_sample: bool
    table: list[list[int]]


class VerdictAgreement(Document):
    """A pairwise scale's scores read as verdicts: 3-class kappa per pair, nominal alpha over all options."""

    options: list[Scalar]
    n_units: int
    pairs: list[VerdictPair]
    krippendorff_alpha: float | None
    notes: list[str]


class OrderConsistency(Document):
    """One judge (a group of universes differing only in the order) asked both ways: ``ab`` and ``ba``."""

    group: dict[str, Scalar]
    n: int
    consistency: float | None
    position_bias: float | None  # share of decisive verdicts won by the transcript shown first
    first_wins: int
    decisive: int
    favours_first: float | None
    favours_second: float | None
    ties: float | None
    cohen_kappa: float | None
    small_sample: bool


class AgreementDocument(Document):
    """``agreement --json``: the options of one axis compared on identical units (``analysis.agreement.agreement``)."""

    axis: str
    options: list[Scalar]
    paired_on: str
    n_units: int
    krippendorff_alpha: float | None
    pairs: list[AgreementPair]
    confounded: list[Confound]
    per_criterion: list[CriterionAgreement]
    scores: ScoreAgreement | None = None  # only when the options gave scores
    verdicts: VerdictAgreement | None = None  # only on a pairwise scale
    orders: list[OrderConsistency] | None = None  # only when the options are the orders ab and ba
    notes: list[str]


# -- variance ---------------------------------------------------------------------------------------------------------


class VarianceTerm(Document):
    """One term of the variance model; the noise keys are there only when the cases were resampled."""

    term: str
    kind: str
    axis: str | None
    sum_sq: float
    df: float
    share: float | None
    noise: float | None = None
    beyond_noise: float | None = None
    low: float | None = None
    high: float | None = None
    clipped: bool | None = None


class AxisShare(Document):
    """One axis's share of the variance: its main effect, its interaction with the system, and both."""

    axis: str
    main: float | None
    interaction: float | None
    total: float | None
    noise: float | None = None
    beyond_noise: float | None = None
    low: float | None = None
    high: float | None = None
    clipped: bool | None = None


class NestedAxis(Document):
    """An axis constant within each option of another (``within``: that axis, ``system`` or "the other axes")."""

    axis: str
    within: str


class Aliasing(Document):
    """Axes the grid cannot tell apart."""

    aliased: list[list[str]]
    nested: list[NestedAxis]


class AliasedGroup(Document):
    """The joint share of a group of aliased axes."""

    axes: list[str]
    main: float
    interaction: float
    total: float


class NoiseFloor(Document):
    """What resampling the cases alone gives: the share of the variance that is sampling noise."""

    method: str
    resamples: int
    level: float
    noise_floor: float | None


class VarianceDocument(Document):
    """``variance --json``: the share of rate variance due to each axis (``analysis.variance.variance``)."""

    terms: list[VarianceTerm]
    by_axis: list[AxisShare]
    balanced: bool
    aliasing: Aliasing
    aliased_groups: list[AliasedGroup]
    noise: NoiseFloor | None  # None when the cases were not resampled
    summary: list[str]
    notes: list[str]


# -- power ------------------------------------------------------------------------------------------------------------


class PowerComparison(Document):
    """The smallest detectable difference between two rates over ``n_per_group`` cases each."""

    scope: str
    n_per_group: int
    detectable_difference: float | None
    direction: str
    detectable: dict[str, float | None]  # "lower" and "higher"
    note: str | None = None  # only when no difference is detectable


class CasesNeeded(Document):
    """The cases per group a difference needs."""

    difference: float
    direction: str
    n_per_group: int


class HumanJudgePower(Document):
    """One judge's anchored interval width beside the width of the human labels alone."""

    sensitivity: float
    specificity: float
    correlation: float
    human_width: float
    anchored_width: float
    #: The human labels alone that would give the anchored width; None: more than the run's transcripts.
    effective_labels: float | None


class HumanPower(Document):
    """``power --human``: interval widths of rates anchored to that many human labels per system."""

    labels: int
    transcripts: int
    alpha: float
    baseline_rate: float
    judges: list[HumanJudgePower]
    assumption: str


class PowerDocument(Document):
    """``Results.power``: detectable differences at the run's cases (``analysis.power.design_power``)."""

    assumption: str
    alpha: float
    power: float
    baseline_rate: float
    comparisons: list[PowerComparison]
    cases_needed: list[CasesNeeded]
    human: HumanPower | None = None
