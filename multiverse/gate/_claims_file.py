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

import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictFloat,
    StrictInt,
    StrictStr,
    ValidationError,
    field_validator,
    model_validator,
)

from multiverse.core import orient
from multiverse.errors import SpecError
from multiverse.spec import Problems, add_validation_errors, load_yaml

__all__ = ["RULES", "Claim", "ClaimsFile", "Share", "check_claims", "parse_claims", "read_claims"]

#: The shapes of a claim, by the key that marks each.
KINDS = ("rate", "order", "no_regression", "rank")
#: The decision rules: ``shown`` passes a claim the data show (held); ``not_refuted`` passes every claim the
#: data do not refute, and fails only on evidence against it.
Rule = Literal["shown", "not_refuted"]
RULES: tuple[str, ...] = ("shown", "not_refuted")
#: What a claim's rate counts: compliant verdicts, or violations (1 - compliance).
Direction = Literal["compliance", "violation"]
#: A rank beyond this is no place any audit has: a number that large is a typo (or an attack).
MAX_RANK = 100_000
#: The claims one file may hold.
MAX_CLAIMS = 1000


def _unit(*, gt: float | None = None, ge: float | None = None, lt: float | None = None, le: float | None = None) -> Any:
    """A number (never a boolean or text, never NaN or infinite) within the given bounds."""
    return Annotated[StrictFloat, Field(gt=gt, ge=ge, lt=lt, le=le, allow_inf_nan=False)]


Name = Annotated[StrictStr, Field(min_length=1, max_length=200)]


def _option_names(value: Any) -> tuple[str, ...]:
    """``where``'s value: an option's name, or a list of names, as text (a whole number reads as its digits)."""
    items = value if isinstance(value, list) else [value]
    if not items:
        raise ValueError("expected an option's name or a list of them, got an empty list")
    names = []
    for item in items:
        # YAML reads yes/no/on/off as booleans and 0.10 as 0.1: neither is an option's name as written.
        if isinstance(item, bool):
            # YAML 1.1 reads yes/no/on/off/true/false as booleans: the name written is lost, so ask for quotes.
            raise ValueError(f"expected an option's name as text, got the boolean {_shown(item)} "
                             "(YAML reads yes, no, on, off unquoted as booleans: quote the name)")
        if not isinstance(item, (str, int)):
            raise ValueError(f"expected an option's name as text, got {_shown(item)} (quote the name as written)")
        if not str(item):
            raise ValueError("expected an option's name, got an empty string")
        names.append(str(item))
    return tuple(names)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True, strict=True)


class Share(_Strict):
    """``in: {share: s}``: the claim holds in at least a share ``s`` of the universes."""

    share: _unit(gt=0, le=1)  # type: ignore[valid-type]


class RateBound(_Strict):
    """``rate: {at_least: b}`` or ``{at_most: b}``, on the rate's [0, 1] scale."""

    at_least: _unit(gt=0, lt=1) | None = None  # type: ignore[valid-type]
    at_most: _unit(gt=0, lt=1) | None = None  # type: ignore[valid-type]

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

    def on_compliance(self, direction: Direction = "compliance") -> tuple[float, str]:
        """The bound and side on the compliance rate the analyses compute, for a claim written in ``direction``.

        A violation rate is 1 - the compliance rate: ``at_least b`` of it is ``at_most 1 - b`` of compliance.
        Only rate bounds turn: better/worse, no regression and rank say which system is better, and a lower
        violation rate is a higher compliance rate.
        """
        if direction == "compliance":
            return self.bound, self.side
        return float(orient(self.bound, direction)), "at_most" if self.side == "at_least" else "at_least"


def _quantifier(value: Any) -> Any:
    if isinstance(value, str) and value in ("all", "primary"):
        return value
    if isinstance(value, Share):
        return value
    if isinstance(value, Mapping) and set(value) == {"share"}:
        share = value["share"]
        number = isinstance(share, (int, float)) and not isinstance(share, bool)
        if not number or not math.isfinite(share) or not 0 < share <= 1:
            raise ValueError(f"share: expected a number above 0 and at most 1, got {_shown(share)}")
        return Share(share=float(share))
    raise ValueError(f"expected 'all', 'primary' or {{share: s}}, got {_shown(value)}")


def _shown(value: Any) -> str:
    text = "null" if value is None else str(value).lower() if isinstance(value, bool) else repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _shape_problems(present: Mapping[str, Any]) -> list[tuple[str, str]]:
    """What is wrong with a claim's shape, as ``(field, expected)``, from the fields it gives (not None).

    One rule for the model (its first problem) and for the file's reader (every problem at once).
    """
    shapes = {
        "rate": "rate" in present, "rank": "rank" in present,
        "order": "better" in present or "worse" in present,
        "no_regression": any(f in present for f in ("candidate", "baseline", "margin")),
    }
    chosen = [k for k, on in shapes.items() if on]
    if len(chosen) != 1:
        return [("", "expected one of rate, rank, better/worse or candidate/baseline/margin"
                 + (f", got {' and '.join(chosen)}" if chosen else ""))]
    kind = chosen[0]
    needs = {"rate": ("system",), "rank": ("system",), "order": ("better", "worse"),
             "no_regression": ("candidate", "baseline", "margin")}[kind]
    problems = [(n, f"expected a value for a {kind.replace('_', '-')} claim") for n in needs if n not in present]
    if kind in ("order", "no_regression") and "system" in present:
        problems.append(("system", "expected no system on a claim that compares two"))
    first, second = ("better", "worse") if kind == "order" else ("candidate", "baseline")
    if first in present and present[first] == present.get(second):
        problems.append((second, f"expected a system other than the {first}, got {present[second]!r} twice"))
    if present.get("quantifier") == "primary" and present.get("where"):
        problems.append(("where", "expected no where with in: primary (the primary is one universe)"))
    if kind == "no_regression" and present.get("margin") == 0 and present.get("rule", "shown") == "shown":
        problems.append(("margin", "expected a margin above 0 with rule: shown (with 0 the claim is that the "
                                   "candidate is better, which an unchanged one shows only by chance); "
                                   "use rule: not_refuted to fail only on evidence of a regression"))
    return problems


class Claim(_Strict):
    """One pre-registered claim (see the module docstring for its shapes)."""

    id: Name
    quantifier: Annotated[Literal["all", "primary"] | Share, BeforeValidator(_quantifier)] = Field(alias="in")
    where: dict[StrictStr, Annotated[tuple[str, ...], BeforeValidator(_option_names)]] = Field(default_factory=dict)
    system: Name | None = None
    rate: RateBound | None = None
    rank: Annotated[StrictInt, Field(ge=1, le=MAX_RANK)] | None = None
    better: Name | None = None
    worse: Name | None = None
    candidate: Name | None = None
    baseline: Name | None = None
    margin: _unit(ge=0, lt=1) | None = None  # type: ignore[valid-type]
    rule: Rule = "shown"

    @field_validator("id")
    @classmethod
    def _plain_id(cls, value: str) -> str:
        if any(not ch.isprintable() for ch in value):
            raise ValueError("expected printable text")
        return value

    @model_validator(mode="after")
    def _one_shape(self) -> Claim:
        present = {name: value for name in type(self).model_fields if (value := getattr(self, name)) is not None}
        problems = _shape_problems(present)
        if problems:
            field, expected = problems[0]
            raise ValueError(f"{field}: {expected}" if field else expected)
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
        where = ", ".join(f"{k}={'|'.join(v)}" for k, v in self.where.items())
        scope = {"all": "in every universe", "primary": "in the primary universe"}.get(
            self.quantifier if isinstance(self.quantifier, str) else "",
            f"in at least {self.share:.0%} of the universes")
        return f"{text} {scope}" + (f" where {where}" if where else "")

    @property
    def share(self) -> float:
        """The share of universes the claim covers (1 for all and primary)."""
        return self.quantifier.share if isinstance(self.quantifier, Share) else 1.0


class ClaimsFile(_Strict):
    """The file: its claims, the level they are decided at (Holm across the claims) and the rule a claim
    without its own ``rule`` is decided by."""

    claims: Annotated[list[Claim], Field(min_length=1, max_length=MAX_CLAIMS)]
    alpha: _unit(gt=0, lt=0.5) = 0.05  # type: ignore[valid-type]
    rule: Rule = "shown"

    @model_validator(mode="before")
    @classmethod
    def _file_rule(cls, raw: Any) -> Any:
        # The file's rule is each claim's unless the claim says its own.
        if isinstance(raw, Mapping) and "rule" in raw and isinstance(raw.get("claims"), list):
            claims = [{"rule": raw["rule"], **c} if isinstance(c, Mapping) else c for c in raw["claims"]]
            return {**raw, "claims": claims}
        return raw

    @model_validator(mode="after")
    def _distinct_ids(self) -> ClaimsFile:
        seen: set[str] = set()
        for claim in self.claims:
            if claim.id in seen:
                raise ValueError(f"id {claim.id!r}: expected each claim's id once")
            seen.add(claim.id)
        return self


class _Head(_Strict):
    """The file's own keys, checked before its claims are (each claim then on its own)."""

    claims: Annotated[list[Any], Field(min_length=1, max_length=MAX_CLAIMS)]
    alpha: _unit(gt=0, lt=0.5) = 0.05  # type: ignore[valid-type]
    rule: Rule = "shown"


def _claim_names(items: Sequence[Any]) -> list[str]:
    """How problems name each claim: ``claim <id>``, ``claim #<n>`` when its id is not usable text, and
    ``claim <id> (#<n>)`` for an id that an earlier claim has."""
    names: list[str] = []
    for index, item in enumerate(items):
        key = item.get("id") if isinstance(item, Mapping) else None
        usable = isinstance(key, str) and key and len(key) <= 200 and key.isprintable()
        name = f"claim {key}" if usable else f"claim #{index + 1}"
        names.append(f"{name} (#{index + 1})" if name in names else name)
    return names


def _claim_lines(lines: Mapping[str, int], names: Sequence[str]) -> dict[str, int]:
    """The YAML's ``claims.<i>.<field>`` lines under the names problems show: ``claim <id>: <field>``."""
    out = {k: v for k, v in lines.items() if not k.startswith("claims.")}
    for key, line in lines.items():
        parts = key.split(".", 2)
        if key.startswith("claims.") and len(parts) >= 2 and parts[1].isdigit() and int(parts[1]) < len(names):
            out[names[int(parts[1])] + (f": {parts[2]}" if len(parts) == 3 else "")] = line
    return out


def _shown_field(field: str) -> str:
    return field.replace("quantifier", "in")


def read_claims(path: str | os.PathLike[str]) -> ClaimsFile:
    """Read and check a claims file by itself (shapes, numbers, ids); SpecError lists every problem."""
    path = Path(path)
    raw, lines = load_yaml(path)
    return parse_claims(raw, path, lines=lines)


def parse_claims(raw: Any, shown: str | os.PathLike[str] = "claims", *, lines: Mapping[str, int] | None = None) -> ClaimsFile:
    """Check a claims document (as the YAML file holds it); one SpecError lists every problem.

    Each problem is one line, ``<shown>: claim <id>: <field> (line N): expected ...``
    (``lines``: the YAML path of each key and its line, as ``load_yaml`` gives them).
    """
    if not isinstance(raw, Mapping):
        raise SpecError(shown, "", "expected a mapping with a list of claims")
    listed = raw.get("claims")
    # Too many claims is one problem, not one per claim.
    items: list[Any] = listed if isinstance(listed, list) and len(listed) <= MAX_CLAIMS else []
    names = _claim_names(items)
    problems = Problems(_claim_lines(lines or {}, names))
    try:
        _Head.model_validate(raw)
    except ValidationError as exc:
        add_validation_errors(_Head, exc, problems)
    rule = str(raw["rule"]) if raw.get("rule") in RULES else "shown"
    for item, name in zip(items, names):
        _claim_problems(item, name, rule, problems)
    _repeated_ids(items, names, problems)
    for path, _ in problems.items:
        # A missing key has no line of its own: its claim's line stands for it.
        owner = next((n for n in names if path == n or path.startswith(n + ": ")), None)
        if owner is not None and path not in problems.lines and owner in problems.lines:
            problems.lines[path] = problems.lines[owner]
    problems.raise_if_any(shown)
    return ClaimsFile.model_validate(raw)


def _claim_problems(item: Any, name: str, rule: str, problems: Problems) -> None:
    """Add every problem of one claim (``item`` as the file holds it) under ``name``."""
    if not isinstance(item, Mapping):
        problems.add(name, "expected a mapping (id, what is claimed, in)")
        return
    item = {"rule": rule, **item}
    found = Problems()
    try:
        Claim.model_validate(item)
    except ValidationError as exc:
        add_validation_errors(Claim, exc, found)
    for field, expected in found.items:
        if field:
            problems.add(f"{name}: {_shown_field(field)}", expected)
            continue
        # The claim's shape: every problem of it, not only the first the model met.
        present = {("quantifier" if k == "in" else k): v for k, v in item.items() if v is not None}
        for f, e in _shape_problems(present) or [("", expected)]:
            problems.add(f"{name}: {_shown_field(f)}" if f else name, e)


def _repeated_ids(items: Sequence[Any], names: Sequence[str], problems: Problems) -> None:
    first: dict[str, int] = {}
    for index, (item, name) in enumerate(zip(items, names)):
        key = item.get("id") if isinstance(item, Mapping) else None
        if not isinstance(key, str):
            continue
        if key in first:
            problems.add(f"{name}: id", f"expected each claim's id once (also claim #{first[key] + 1})")
        first.setdefault(key, index)


def check_claims(claims: ClaimsFile, *, systems: Sequence[str], axes: Sequence[str],
                 options: Mapping[str, Sequence[Any]], has_primary: bool, shown: str | os.PathLike[str]) -> None:
    """Refuse every claim naming a system, axis or option the results do not have: one SpecError, one line each."""
    problems = Problems()
    known = ", ".join(systems) or "none"
    for claim in claims.claims:
        at = f"claim {claim.id}"
        for field, system in claim.systems.items():
            if system not in systems:
                problems.add(f"{at}: {field}", f"expected one of the systems {known}, got {system!r}")
        if claim.rank is not None and claim.rank >= len(systems):
            problems.add(f"{at}: rank", f"expected 1 to {len(systems) - 1} with {len(systems)} systems "
                         f"(rank {claim.rank} always holds), got {claim.rank}")
        if claim.quantifier == "primary" and not has_primary:
            problems.add(f"{at}: in", "expected a primary universe; these results declare none")
        for axis, chosen in claim.where.items():
            if axis not in axes:
                problems.add(f"{at}: where.{axis}", f"expected one of the axes {', '.join(axes) or 'none'}")
                continue
            allowed = [str(o) for o in options.get(axis, [])]
            for option in chosen:
                if option not in allowed:
                    problems.add(f"{at}: where.{axis}", f"expected one of the options {', '.join(allowed)}, "
                                 f"got {option!r}")
    problems.raise_if_any(shown)
