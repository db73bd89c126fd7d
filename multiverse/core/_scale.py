"""The judge's scale, modelled once: what a score is, its range, its anchors and a pairwise reference.

The spec declares it (``spec.Scale``, frozen, with what only a spec says:
whether the reference is judged against itself), a run or import folder
records it (``tables.ScaleRecord``, read strictly, its range checked, as a
folder is untrusted) and an agreement document says which scale the scores
were compared on (``results.ScoreScale``). Each of those is this type with
its room's own rules; none restates the fields.
"""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import BaseModel, Field

from multiverse.core._vocabulary import ScaleType

__all__ = ["BaseScale"]


class BaseScale(BaseModel):
    """What the judge's score is: ``binary`` (compliance labels), ``ordinal``, ``continuous`` or ``pairwise``.

    ``ordinal`` is a whole number from ``min`` to ``max`` with optional
    ``anchors`` (score -> what it means), ``continuous`` any number in
    ``[min, max]``, ``pairwise`` a preference for the row's system over the
    ``reference`` system on ``[min, max]`` (the midpoint a tie).
    """

    type: ScaleType = "binary"
    min: float = 0.0
    max: float = 1.0
    anchors: Mapping[str, str] = Field(default_factory=dict)
    reference: str | None = None

    @property
    def scored(self) -> bool:
        """True when the judge gives a score rather than compliance labels."""
        return self.type != "binary"
