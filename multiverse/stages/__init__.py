"""The stages that call models: draft (a rubric or test cases), rollout (a simulated user talks to a system), judge.

Each takes one work unit and a :class:`~multiverse.model.ModelClient` and
returns the record the store keeps. Scoring is no stage: it turns stored
judgments into verdicts without a call (:mod:`multiverse.analysis.rates`).
"""

from ._draft import check_draft_places, draft_case, draft_rubric, write_drafts
from ._judge import judge_transcript, score_transcript
from ._rollout import USER_ATTEMPTS, RolloutJob, run_rollout

__all__ = [
    "USER_ATTEMPTS",
    "RolloutJob",
    "check_draft_places",
    "draft_case",
    "draft_rubric",
    "judge_transcript",
    "run_rollout",
    "score_transcript",
    "write_drafts",
]
