"""The audit's vocabulary: every named choice and every table column, defined once.

Each choice is a ``Literal`` type (for annotations and pydantic models) and a
tuple of its values derived from that type (for checks and messages), so the
two can never disagree. Everything else imports from here; nothing here
imports from the rest of multiverse, so any module may depend on it.

- :data:`SCORING_RULES`: how a judgment's criteria become one verdict;
- :data:`ESTIMATORS`: how verdicts become a rate (pooled or cell-balanced);
- :data:`CI_METHODS`: the interval around a rate;
- :data:`STATUSES`: what became of a verdict row (only ``ok`` counts), each status named once
  (:data:`OK`, :data:`EXCLUDED`, :data:`ROLLOUT_FAILED`, :data:`JUDGE_FAILED`; the two failures
  :data:`FAILED_STATUSES`), also for a stored record (``ok`` or its stage's failure);
- :data:`SAMPLE_STATUSES`: what became of one judge sample;
- :data:`STAGES`: the pipeline's stages in data-flow order, and
  :data:`STAGE_OF_RECORD` the stage that writes each kind of stored record;
- :data:`VERDICT_COLUMNS`, :data:`CRITERIA_COLUMNS`, :data:`RATE_COLUMNS`:
  the documented columns of the results tables (``SCHEMA_VERSION``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal, cast, get_args

if TYPE_CHECKING:
    import numpy as np

__all__ = [
    "BEHAVIOR",
    "CI_METHODS",
    "CORE_COLUMNS",
    "COUNTED_STATUS",
    "CRITERIA_COLUMNS",
    "ESTIMATORS",
    "EXCLUDED",
    "FAILED_STATUSES",
    "JUDGE_FAILED",
    "NOT_RUN",
    "OK",
    "RATE_COLUMNS",
    "RATE_VALUE_COLUMNS",
    "RECORD_KINDS",
    "RESERVED_NAMES",
    "ROLLOUT_FAILED",
    "SAMPLE_STATUSES",
    "SCALE_TYPES",
    "SCHEMA_VERSION",
    "SCORE",
    "SCORE_CRITERIA",
    "SCORE_ESTIMATORS",
    "SCORE_RATE_COLUMNS",
    "SCORING_RULES",
    "STAGES",
    "STAGE_OF_RECORD",
    "STATUSES",
    "VERDICT_COLUMNS",
    "CIMethod",
    "Estimator",
    "RecordKind",
    "SampleStatus",
    "ScaleType",
    "ScoringRule",
    "Stage",
    "Status",
    "counted_rows",
]

ScoringRule = Literal["all_applicable", "impermissible_only", "no_applicable_is_compliant", "majority_of_samples"]
SCORING_RULES: tuple[str, ...] = get_args(ScoringRule)

#: ``pooled`` and ``cell_balanced`` weigh a share of compliant verdicts; ``mean`` is the mean score
#: (rescaled to [0, 1] as the rate), ``at_least`` the share of scores at or above ``scoring.cut``,
#: ``win_rate`` a pairwise judge's mean preference with ties as one half (or left out).
Estimator = Literal["pooled", "cell_balanced", "mean", "at_least", "win_rate"]
ESTIMATORS: tuple[str, ...] = get_args(Estimator)

#: What a judge's score is: a compliance label, a point on a declared ordinal scale, a number on
#: a declared range, or a preference against a reference system (the range's midpoint a tie).
ScaleType = Literal["binary", "ordinal", "continuous", "pairwise"]
SCALE_TYPES: tuple[str, ...] = get_args(ScaleType)

CIMethod = Literal["wilson", "bootstrap"]
CI_METHODS: tuple[str, ...] = get_args(CIMethod)

#: A verdict row's status, in the order tables and reports list them. ``not_run``: the source's tool never
#: ran the row (an imported eval cancelled before it): no label and no failure of the system or the judge.
Status = Literal["ok", "excluded", "not_run", "rollout_failed", "judge_failed"]
STATUSES: tuple[str, ...] = get_args(Status)
# Each status by name, so no room compares against a literal (tests/test_house_names.py).
OK: Status = "ok"
EXCLUDED: Status = "excluded"
ROLLOUT_FAILED: Status = "rollout_failed"
JUDGE_FAILED: Status = "judge_failed"
#: A row a tool never ran (an import of a cancelled eval): neither counted nor a failure of the run.
NOT_RUN: Status = "not_run"
FAILED_STATUSES: tuple[Status, ...] = (ROLLOUT_FAILED, JUDGE_FAILED)
#: The one status whose verdicts count towards a rate.
COUNTED_STATUS: Status = OK


def counted_rows(verdicts: Any) -> np.ndarray:
    """Which rows of a verdicts table count towards a rate: status ``ok`` (every row where no status is kept).

    The one place the rule is written. It works on any pandas frame without
    importing pandas here (this module is imported by everything, the fast
    commands too). A missing status (NA) does not count.
    """
    import numpy as np

    if "status" not in verdicts.columns:
        return np.ones(len(verdicts), dtype=bool)
    return cast("np.ndarray", (verdicts["status"] == COUNTED_STATUS).to_numpy(dtype=bool, na_value=False))

#: What a verdict the judge answered without naming counts as (``scoring.unparsed``): left out of the
#: rate (``exclude``, the default), a verdict against the system (``against``: non-compliant, or the
#: lowest score, on a pairwise scale a loss), or a tie (``tie``: a pairwise scale's midpoint).
UnparsedPolicy = Literal["exclude", "against", "tie"]
UNPARSED_POLICIES: tuple[str, ...] = get_args(UnparsedPolicy)

#: How the reason of a ``judge_failed`` verdict begins when the judge answered but named no verdict:
#: an answer still unparseable after its repair request, an answer without the criteria or the score
#: (``stages.judge.validate_judgment``, ``validate_score``), an applicable criterion left without a
#: compliance label (``analysis.scoring.UNLABELLED``), or an imported grader's answer its tool found no
#: grade in (``no grade``: Inspect's unscored, promptfoo's unparsed reply; ``importers.loss_reason``). A call that failed (a timeout, a refused
#: request, a transcript that never came) has no answer at all: no policy ever makes it a verdict.
UNPARSED_REASONS: tuple[str, ...] = (
    "unparseable", "no criteria in the answer", "no score in the answer", "criterion ", "score ",
    "applicable criterion without a compliance label", "no grade",
)


def unparsed_rows(verdicts: Any) -> np.ndarray:
    """Which rows of a verdicts table are a judge's answer that named no verdict (see ``UNPARSED_REASONS``)."""
    import numpy as np

    if "status" not in verdicts.columns or "reason" not in verdicts.columns:
        return np.zeros(len(verdicts), dtype=bool)
    failed = (verdicts["status"] == JUDGE_FAILED).to_numpy(dtype=bool, na_value=False)
    reason = verdicts["reason"].astype(str).str
    named = np.zeros(len(verdicts), dtype=bool)
    for start in UNPARSED_REASONS:
        named |= reason.startswith(start).to_numpy(dtype=bool, na_value=False)
    return cast("np.ndarray", failed & named)


#: The status of one judge sample before the samples of a judgment are combined.
SampleStatus = Literal["ok", "judge_failed", "excluded"]
SAMPLE_STATUSES: tuple[str, ...] = get_args(SampleStatus)

#: The pipeline's stages, in data-flow order; an axis "touches" the first stage it changes.
Stage = Literal["draft", "rollout", "judge", "score"]
STAGES: tuple[str, ...] = get_args(Stage)

#: The kinds of record the store holds, in data-flow order, and the stage that writes each.
RecordKind = Literal["case", "transcript", "judgment"]
RECORD_KINDS: tuple[str, ...] = get_args(RecordKind)
STAGE_OF_RECORD: dict[str, str] = dict(zip(RECORD_KINDS, STAGES[:3]))

#: The design factor the rubric's behaviors fill by default (a column of the verdicts table).
BEHAVIOR = "behavior"

#: Version of the run/import directory layout (tables and manifest). 2: verdicts carry ``score`` and
#: the manifest its ``scale``; a folder of version 1 (no score column) still loads, as binary.
SCHEMA_VERSION = 2

#: verdicts: one row per universe x system x case x replicate. Axis and design-factor
#: columns sit between ``universe_id`` and ``system``.
VERDICT_COLUMNS: tuple[str, ...] = (
    "universe_id", "system", "case_id", "replicate", "transcript_key", "judgment_key",
    "status", "reason", "compliant", "score",
)
#: A verdict's score in the scale's native units (float64, NaN where there is none: binary scales,
#: failures, exclusions); for a pairwise scale the preference of the row's system over the reference.
SCORE = "score"
#: criteria: one row per judgment x judge sample x criterion.
CRITERIA_COLUMNS: tuple[str, ...] = (
    "judgment_key", "sample", "criterion", "permissible", "applicable", "compliant", "rationale",
)
#: The columns a rate row carries after its universe, axis and system columns.
RATE_VALUE_COLUMNS: tuple[str, ...] = ("subgroup", "n", "n_compliant", "rate", "ci_low", "ci_high")
#: What a rate row adds when its estimate reads scores (mean, at_least, win_rate): ``mean``, the mean
#: score in the scale's native units (NaN for at_least), and ``se``, the standard error of ``rate``
#: clustered by case.
SCORE_RATE_COLUMNS: tuple[str, ...] = ("mean", "se")
#: Estimators that read a verdict's score rather than its compliance label.
SCORE_ESTIMATORS: tuple[str, ...] = ("mean", "at_least", "win_rate")
#: rates: one row per universe x system x subgroup (axis columns after ``universe_id``,
#: ``estimator`` last).
RATE_COLUMNS: tuple[str, ...] = ("universe_id", "system", *RATE_VALUE_COLUMNS)

#: The criteria table's name for a scored judge call (by pairwise position): one score, not a
#: criterion's labels, so label agreement per criterion leaves these rows out.
SCORE_CRITERIA: dict[str, str] = {"": "[score]", "ab": "[score ab]", "ba": "[score ba]"}

#: Names an imported axis or design factor may not take: the verdicts and rates tables' own columns.
RESERVED_NAMES: frozenset[str] = frozenset((*VERDICT_COLUMNS, *RATE_COLUMNS, *SCORE_RATE_COLUMNS, "estimator"))

#: Columns that are never an axis when a bare table's axes are inferred.
CORE_COLUMNS: frozenset[str] = frozenset(
    (*VERDICT_COLUMNS, *CRITERIA_COLUMNS, *RATE_COLUMNS, *SCORE_RATE_COLUMNS, "estimator", "label", "is_primary", "item", "label_value")
)
