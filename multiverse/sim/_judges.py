"""The simulated judge: labels a transcript per criterion (``judge`` task).

The judge reads the truth from the transcript's markers (see
:func:`multiverse.sim._truth.transcript_truth`), then errs with its declared
rates at the task's evidence standard: it sees a real opportunity with chance
``applicability`` (and an absent one with ``false_applicability``), and flags
an applicable criterion with :meth:`JudgeLevel.flag_probability`. It answers
JSON per the ``judgment`` schema, each rationale tagged ``[simulated]`` and
quoting the sentence that acted the criterion out.

Asked for a score (the TASK names a scale), it scores instead
(:mod:`multiverse.sim._scores`). With chance ``failure`` it answers something unparseable instead. That draw
depends only on the conversation up to the message carrying the TASK, so a
repair turn appended after a failure fails again: the failure rate is the
``judge_failed`` rate.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ..errors import SpecError
from ._dice import Dice
from ._truth import NOT_APPLICABLE, transcript_truth
from ._world import Judge, World

__all__ = ["judge_transcript"]

_QUOTE = 160


def _quote(text: str | None) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= _QUOTE else text[: _QUOTE - 1].rstrip() + "…"


def _unparseable(task: Mapping[str, Any], dice: Dice) -> str:
    first = next((str(c.get("id") if isinstance(c, Mapping) else c) for c in task.get("criteria") or []), "criterion")
    return dice.pick(
        (
            "I'm sorry, but I can't evaluate this transcript.",
            '{"criteria": {"' + first + '": {"applicable": tr',
            f"Here is my judgment:\n- {first}: compliant, the assistant behaved well.",
        )
    )


def judge_transcript(world: World, judge: Judge, task: Mapping[str, Any], prompt: str, dice: Dice) -> str:
    """The judgment JSON text for ``prompt`` (the user message holding the TASK and transcript)."""
    if dice.chance(judge.failure):
        return _unparseable(task, dice)
    scale = task.get("scale")
    if isinstance(scale, Mapping) and scale.get("type", "binary") != "binary":
        from multiverse.work import PAIR_SEPARATOR

        from ._scores import score_answer

        if scale.get("type") == "pairwise" and PAIR_SEPARATOR not in prompt:
            # A declared judge.template without the built-in line between the two transcripts: the world
            # cannot tell them apart, and a guess would be a preference nobody stated.
            raise SpecError(world.source, f"models.{judge.name}", "a pairwise judge prompt whose second transcript "
                            f"follows the line {PAIR_SEPARATOR.strip()!r} (a judge.template for a simulated pairwise "
                            "judge puts it before {second})")
        return score_answer(judge.scores, scale, prompt, dice)
    truth = transcript_truth(prompt)
    standard = str(task.get("evidence_standard") or "")
    level = judge.level(standard)
    named = f"the {standard} standard" if standard else "the evidence standard"
    rows = []
    for item in task.get("criteria") or []:
        cid = str(item.get("id") if isinstance(item, Mapping) else item)
        crit = world.criteria.get(cid)
        label = crit.name.lower() if crit else cid.replace("_", " ")
        state = truth.state(cid)
        if state == NOT_APPLICABLE:
            applicable = dice.chance(level.false_applicability)
        else:
            applicable = dice.chance(level.applicability)
        if not applicable:
            rows.append(
                {
                    "id": cid,
                    "applicable": False,
                    "compliant": None,
                    "rationale": f"[simulated] Not applicable: no turn created an opportunity for {label}.",
                }
            )
            continue
        flagged = dice.chance(level.flag_probability("compliant" if state == NOT_APPLICABLE else state))
        quote = truth.evidence.get(cid)
        if flagged:
            why = f'the assistant wrote "{_quote(quote)}"' if quote else f"the conversation leaves {label} unaddressed."
            rationale = f"[simulated] Non-compliant under {named}: {why}"
        elif quote:
            rationale = f'[simulated] Compliant under {named}: where it mattered the assistant wrote "{_quote(quote)}"'
        else:
            rationale = f"[simulated] Compliant under {named}: the conversation touches on {label} and nothing breaches it."
        rows.append({"id": cid, "applicable": True, "compliant": not flagged, "rationale": rationale})
    # The judgment schema keys criteria by id.
    return json.dumps({"criteria": {row.pop("id"): row for row in rows}}, ensure_ascii=False)
