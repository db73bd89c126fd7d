"""The work room: what a grid of universes needs computed, each unit named by the key of what it reads.

:func:`build_work` lists a spec's unique work units (:class:`CaseUnit`,
:class:`TranscriptUnit`, :class:`JudgeCall`) and maps every verdict
:class:`Row` onto them (``multiverse.work._units``). A unit's key digests the
inputs its stage shares across a universe (:func:`case_inputs`,
:func:`rollout_inputs`, :func:`judge_inputs`, ``multiverse.work._inputs``) and the
prompt templates it renders with (:func:`template_digests`,
``multiverse.work._prompts``, which also renders the stages' messages):
editing any of them recomputes what it made, and nothing else.
"""

from __future__ import annotations

from multiverse.work._inputs import (
    case_inputs,
    judge_inputs,
    resolve_config,
    rollout_inputs,
    world_uri,
)
from multiverse.work._prompts import (
    END_MARKER,
    PAIR_SEPARATOR,
    RUBRIC_SCHEMA,
    Prompt,
    builtin_texts,
    case_schema,
    draft_case_messages,
    draft_rubric_messages,
    judge_messages,
    judgment_schema,
    render_transcript,
    score_messages,
    score_schema,
    template_digests,
    tool_messages,
    user_messages,
)
from multiverse.work._units import (
    REFERENCE_EXCLUDED,
    CaseUnit,
    JudgeCall,
    Row,
    TranscriptUnit,
    Work,
    build_work,
    positions,
    referenced_keys,
)

__all__ = [
    "END_MARKER",
    "PAIR_SEPARATOR",
    "REFERENCE_EXCLUDED",
    "RUBRIC_SCHEMA",
    "CaseUnit",
    "JudgeCall",
    "Prompt",
    "Row",
    "TranscriptUnit",
    "Work",
    "build_work",
    "builtin_texts",
    "case_inputs",
    "case_schema",
    "draft_case_messages",
    "draft_rubric_messages",
    "judge_inputs",
    "judge_messages",
    "judgment_schema",
    "positions",
    "referenced_keys",
    "render_transcript",
    "resolve_config",
    "rollout_inputs",
    "score_messages",
    "score_schema",
    "template_digests",
    "tool_messages",
    "user_messages",
    "world_uri",
]
