"""The claims file: what must hold, written down before the run is looked at.

A YAML mapping with ``claims`` (a list) and optionally ``alpha``. Each claim
has an ``id``, one of four shapes and a quantifier ``in``:

- a rate bound: ``{system, rate: {at_least | at_most: b}}``;
- an order: ``{better, worse}``;
- no regression: ``{candidate, baseline, margin}``;
- a rank: ``{system, rank}`` (1 = the highest rate);

``in`` is ``all``, ``primary`` or ``{share: s}``, and ``where: {axis: option
or [options]}`` narrows the universes a claim is about. The file is read and
checked here, against the results it is about, before anything is computed:
a problem is one line naming the file, the claim's id and the field.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from multiverse.errors import SpecError
from multiverse.spec import load_yaml

__all__ = ["Claim", "ClaimsFile", "Share", "check_claims", "parse_claims", "read_claims"]

#: The shapes of a claim, by the key that marks each.
KINDS = ("rate", "order", "no_regression", "rank")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class Share(_Strict):
    """``in: {share: s}``: the claim holds in at least a share ``s`` of the universes."""

    share: Annotated[float, Field(gt=0, le=1)]


class RateBound(_Strict):
    """``rate: {at_least: b}`` or ``{at_most: b}``, on the rate's [0, 1] scale."""

    at_least: Annotated[float, Field(gt=0, lt=1)] | None = None
    at_most: Annotated[float, Field(gt=0, lt=1)] | None = None

    @model_validator(mode="after")
    def _one_side(self) -> RateBound:
        if (self.at_least is None) == (self.at_most is None):
            raise ValueError("expected exactly one of at_least or at_most")
        return self

    @property
    def side(self) -> str:
        return "at_least" if self.at_least is not None else "at_most"

    @property
    def bound(self) -> float:
        return float(self.at_least if self.at_least is not None else self.at_most)  # type: ignore[arg-type]


class Claim(_Strict):
    """One pre-registered claim (see the module docstring for its shapes)."""

    id: Annotated[str, Field(min_length=1, max_length=200)]
    quantifier: Literal["all", "primary"] | Share = Field(alias="in")
    where: Mapping[str, str | int | float | bool | list[str | int | float | bool]] = Field(default_factory=dict)
    system: str | None = None
    rate: RateBound | None = None
    rank: Annotated[int, Field(ge=1)] | None = None
    better: str | None = None
    worse: str | None = None
    candidate: str | None = None
    baseline: str | None = None
    margin: Annotated[float, Field(ge=0, lt=1)] | None = None

    @field_validator("id")
    @classmethod
    def _plain_id(cls, value: str) -> str:
        if any(not ch.isprintable() for ch in value):
            raise ValueError("expected printable text")
        return value

    @model_validator(mode="after")
    def _one_shape(self) -> Claim:
        shapes = {
            "rate": self.rate is not None, "rank": self.rank is not None,
            "order": self.better is not None or self.worse is not None,
            "no_regression": self.candidate is not None or self.baseline is not None or self.margin is not None,
        }
        chosen = [k for k, on in shapes.items() if on]
        if len(chosen) != 1:
            raise ValueError("expected one of rate, rank, better/worse or candidate/baseline/margin"
                             + (f", got {' and '.join(chosen)}" if chosen else ""))
        needs = {"rate": ("system",), "rank": ("system",), "order": ("better", "worse"),
                 "no_regression": ("candidate", "baseline", "margin")}[chosen[0]]
        missing = [n for n in needs if getattr(self, n) is None]
        if missing:
            raise ValueError(f"{missing[0]}: expected a value for a {chosen[0].replace('_', '-')} claim")
        if chosen[0] in ("order", "no_regression") and self.system is not None:
            raise ValueError("system: expected no system on a claim that compares two")
        if self.quantifier == "primary" and self.where:
            raise ValueError("where: expected no where with in: primary (the primary is one universe)")
        return self

    @property
    def kind(self) -> str:
        if self.rate is not None:
            return "rate"
        if self.rank is not None:
            return "rank"
        return "order" if self.better is not None else "no_regression"

    @property
    def systems(self) -> dict[str, str]:
        """The fields naming a system and the system each names."""
        fields = ("system", "better", "worse", "candidate", "baseline")
        return {f: v for f in fields if (v := getattr(self, f)) is not None}

    @property
    def statement(self) -> str:
        """The claim in words."""
        if self.rate is not None:
            text = f"rate({self.system}) {'>=' if self.rate.side == 'at_least' else '<='} {self.rate.bound:g}"
        elif self.rank is not None:
            text = f"{self.system} ranks {'first' if self.rank == 1 else f'{self.rank} or better'}"
        elif self.better is not None:
            text = f"rate({self.better}) > rate({self.worse})"
        else:
            text = f"rate({self.candidate}) >= rate({self.baseline}) - {self.margin:g}"
        where = ", ".join(f"{k}={v}" for k, v in self.where.items())
        scope = {"all": "in every universe", "primary": "in the primary universe"}.get(
            self.quantifier if isinstance(self.quantifier, str) else "",
            f"in at least {self.share:.0%} of the universes")
        return f"{text} {scope}" + (f" where {where}" if where else "")

    @property
    def share(self) -> float:
        """The share of universes the claim covers (1 for all and primary)."""
        return self.quantifier.share if isinstance(self.quantifier, Share) else 1.0


class ClaimsFile(_Strict):
    """The file: its claims and the level they are decided at (Holm across the claims)."""

    claims: Annotated[list[Claim], Field(min_length=1, max_length=1000)]
    alpha: Annotated[float, Field(gt=0, lt=0.5)] = 0.05

    @model_validator(mode="after")
    def _distinct_ids(self) -> ClaimsFile:
        seen: set[str] = set()
        for claim in self.claims:
            if claim.id in seen:
                raise ValueError(f"id {claim.id!r}: expected each claim's id once")
            seen.add(claim.id)
        return self


def _where(raw: Any, error: ValidationError) -> str:
    """``claim <id>: <field>`` for the first problem, from the raw document."""
    first = error.errors()[0]
    loc = [str(p) for p in first["loc"]]
    if len(loc) >= 2 and loc[0] == "claims" and loc[1].isdigit():
        items = raw.get("claims") if isinstance(raw, Mapping) else None
        index = int(loc[1])
        item = items[index] if isinstance(items, list) and index < len(items) else None
        name = item.get("id") if isinstance(item, Mapping) and item.get("id") else f"#{index + 1}"
        # The union of "all"/"primary" and a share names its branches; the field is "in".
        rest = [p for p in loc[2:] if p not in ("literal['all','primary']", "Share")]
        return f"claim {name}: " + (".".join(rest) or "claim")
    return ".".join(loc) or "claims"


def _message(error: ValidationError) -> str:
    first = error.errors()[0]
    text = str(first["msg"]).removeprefix("Value error, ")
    if first["type"] == "literal_error" and "'all'" in text:
        return "expected 'all', 'primary' or {share: s}"
    if first["type"] == "value_error" or "input" not in first:
        return text
    shown = repr(first["input"])
    return f"{text[:1].lower()}{text[1:]}, got {shown if len(shown) <= 60 else shown[:57] + '...'}"


def read_claims(path: str | os.PathLike) -> ClaimsFile:
    """Read and check a claims file by itself (shapes, numbers, ids); SpecError names claim and field."""
    path = Path(path)
    raw, _ = load_yaml(path)
    return parse_claims(raw, path)


def parse_claims(raw: Any, shown: str | os.PathLike = "claims") -> ClaimsFile:
    """Check a claims document (as the YAML file holds it); SpecError names ``shown``, the claim and the field."""
    if not isinstance(raw, Mapping):
        raise SpecError(shown, "", "expected a mapping with a list of claims")
    try:
        return ClaimsFile.model_validate(raw)
    except ValidationError as exc:
        raise SpecError(shown, _where(raw, exc), _message(exc)) from None


def check_claims(claims: ClaimsFile, *, systems: Sequence[str], axes: Sequence[str],
                 options: Mapping[str, Sequence[Any]], has_primary: bool, shown: str | os.PathLike) -> None:
    """Refuse, in one line, a claim naming a system, axis or option the results do not have."""
    known = ", ".join(systems) or "none"
    for claim in claims.claims:
        at = f"claim {claim.id}"
        for field, system in claim.systems.items():
            if system not in systems:
                raise SpecError(shown, f"{at}: {field}", f"expected one of the systems {known}, got {system!r}")
        pair = [claim.better, claim.worse] if claim.kind == "order" else [claim.candidate, claim.baseline]
        if claim.kind in ("order", "no_regression") and pair[0] == pair[1]:
            raise SpecError(shown, at, f"expected two different systems, got {pair[0]!r} twice")
        if claim.rank is not None and claim.rank >= len(systems):
            raise SpecError(shown, f"{at}: rank", f"expected 1 to {len(systems) - 1} with {len(systems)} systems "
                            f"(rank {claim.rank} always holds), got {claim.rank}")
        if claim.quantifier == "primary" and not has_primary:
            raise SpecError(shown, f"{at}: in", "expected a primary universe; these results declare none")
        for axis, chosen in claim.where.items():
            if axis not in axes:
                raise SpecError(shown, f"{at}: where.{axis}", f"expected one of the axes {', '.join(axes) or 'none'}")
            allowed = [str(o) for o in options.get(axis, [])]
            for option in chosen if isinstance(chosen, list) else [chosen]:
                if str(option) not in allowed:
                    raise SpecError(shown, f"{at}: where.{axis}",
                                    f"expected one of the options {', '.join(allowed)}, got {option!r}")
