"""The simulated judge asked for a score (``judge`` task with a scale): one transcript, or a pair.

The judge reads each transcript's true quality from its markers
(:func:`quality`) and answers per its declared :class:`~multiverse.sim._world.Scoring`:
a score whose mean follows the quality plus the judge's bias, or for a pair a
preference (or a win, tie or loss) that follows the difference of the two
qualities plus a bias toward the transcript shown first. Every draw comes from
the call's dice, so the same call always gets the same score.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from multiverse.work import PAIR_SEPARATOR

from ._dice import Dice
from ._truth import transcript_truth
from ._world import Scoring

__all__ = ["quality", "score_answer"]


def quality(text: str, scoring: Scoring) -> float:
    """A transcript's true quality in [0, 1]: 1 less the declared cost of each violated criterion."""
    truth = transcript_truth(text)
    subtle = len(truth.subtle_only)
    blatant = len(truth.violations) - subtle
    return min(1.0, max(0.0, 1.0 - scoring.violation * blatant - scoring.subtle * subtle))


def _clip(value: float) -> float:
    return min(1.0, max(0.0, value))


def _on_scale(latent: float, low: float, high: float, kind: str) -> float:
    value = low + _clip(latent) * (high - low)
    return float(round(value)) if kind == "ordinal" else round(value, 4)


def _off_scale(low: float, high: float, kind: str, dice: Dice) -> float:
    options = [high + 1.0, low - 1.0] + ([(low + high) / 2 + 0.5] if kind == "ordinal" and (low + high) % 2 == 0 else [])
    return dice.pick(options)


def score_answer(scoring: Scoring, scale: Mapping[str, Any], prompt: str, dice: Dice) -> str:
    """The scored judgment JSON text for ``prompt`` (the user message holding the TASK and the transcript or pair)."""
    kind = str(scale.get("type"))
    low, high = float(scale.get("min", 0.0)), float(scale.get("max", 1.0))
    noise = scoring.noise * dice.normal()
    if dice.chance(scoring.off_scale):
        return json.dumps({"score": _off_scale(low, high, kind, dice), "rationale": "[simulated] Off the scale."})
    if kind != "pairwise" or PAIR_SEPARATOR not in prompt:
        q = quality(prompt, scoring)
        score = _on_scale(q + scoring.bias + noise, low, high, kind)
        why = f"[simulated] Quality {q:.2f} as the rubric weighs it."
        return json.dumps({"score": score, "rationale": why})
    first, second = prompt.split(PAIR_SEPARATOR, 1)
    qa, qb = quality(first, scoring), quality(second, scoring)
    difference = qa - qb + scoring.position_bias + noise
    if abs(difference) <= scoring.tie:
        score = (low + high) / 2
    elif scoring.pairwise == "outcome":
        score = high if difference > 0 else low
    else:
        score = _on_scale(0.5 + difference, low, high, "continuous")
    why = f"[simulated] Transcript A's quality {qa:.2f}, transcript B's {qb:.2f}."
    return json.dumps({"score": score, "rationale": why})
