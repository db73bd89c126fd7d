"""What an Inspect log's readers share: one scorer's cell, and the checks of the fields they name.

Below both ``_inspect_log`` (the samples) and ``_inspect_scores`` (scorers, graders, reducers), so that
neither imports the other back.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from multiverse.errors import InputError

__all__ = ["Cell", "field_text", "role_model", "shown_value", "text_cut"]


@dataclass
class Cell:
    """One scorer's (or one key's) score of one sample x epoch: its value, or the kind of loss."""

    status: str  # ok, excluded, or a loss's status (importers.loss_reason)
    reason: str
    value: Any  # Inspect's own value (None where there is none); what the reducers take
    rationale: str


def field_text(path: Path, name: str, value: Any) -> str:
    """``value`` as a name, stripped; one line naming the log and the field when it is none."""
    if not isinstance(value, str) or not value.strip():
        raise InputError(f"{path}: {name}: {shown_value(value)}; expected a non-empty name")
    return value.strip()


def role_model(path: Path, spec: Any, role: str, what: str) -> str:
    """The model the log's ``role`` names (the system's or the grader's); refused when it names none or several."""
    roles = spec.model_roles or {}
    if role not in roles:
        raise InputError(f"{path}: eval.model_roles: no role {role!r} for the {what}; the log has: "
                         f"{', '.join(roles) or 'no roles'}", param="system_role" if what == "system" else "judge_role")
    config = roles[role]
    config = config[0] if isinstance(config, list) and len(config) == 1 else config
    if isinstance(config, list):
        raise InputError(f"{path}: eval.model_roles.{role}: a list of {len(config)} models; expected one model")
    return field_text(path, f"eval.model_roles.{role}.model", getattr(config, "model", None))


def text_cut(text: Any, limit: int = 2_000) -> str:
    """``text`` within ``limit`` characters, an ellipsis marking a cut."""
    text = str(text or "")
    return cast("str", text if len(text) <= limit else text[: limit - 1] + "…")


def shown_value(value: Any) -> str:
    """A value as a reader is shown it in an error: its repr, cut at 40 characters."""
    shown = repr(value)
    return shown if len(shown) <= 40 else shown[:37] + "..."


