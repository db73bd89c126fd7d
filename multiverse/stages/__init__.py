"""The stages that call models: draft (a rubric or test cases), rollout (a simulated user talks to a system), judge.

Each takes one work unit and a :class:`~multiverse.model.ModelClient` and
returns the record the store keeps. Scoring is no stage: it turns stored
judgments into verdicts without a call (:mod:`multiverse.analysis.rates`).
"""

from .draft import draft_case, draft_rubric, write_drafts
from .judge import judge_transcript
from .rollout import RolloutJob, run_rollout

__all__ = ["RolloutJob", "draft_case", "draft_rubric", "judge_transcript", "run_rollout", "write_drafts"]
