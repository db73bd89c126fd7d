"""The documents of a run or import folder, as models: ``manifest.json``, ``spec.yaml``, ``transcripts.jsonl``.

The models say what every reader of a folder may rely on: each field any code
reads has its type here, checked strictly (``"axes": 5``, ``"stages": [1]``
and ``"store": 12`` are refused, not coerced). Fields the models do not name
are kept as they are (``extra="allow"``): writers add facts over time, and a
folder written by any version that has loaded so far still loads.

:class:`Manifest` is versioned by ``schema_version``
(``multiverse.core._vocabulary.SCHEMA_VERSION``): a folder written by a newer
layout than this package knows is refused rather than misread.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Literal, TypeVar

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from multiverse.core import CI_METHODS, ESTIMATORS, SCHEMA_VERSION, VERDICT_COLUMNS, BaseScale, universe_label
from multiverse.errors import InputError

__all__ = ["DroppedRecord", "ImportLoss", "Manifest", "ResolvedSpec", "ScaleRecord", "ScoringChoice", "SpecDocument", "StageCounts",
           "TranscriptRecord", "UniverseEntry", "check_document"]

_Model = TypeVar("_Model", bound=BaseModel)


class _Document(BaseModel):
    # strict: a string where a number belongs is wrong input, not something to coerce.
    model_config = ConfigDict(extra="allow", strict=True)


def _scalar(value: Any) -> Any:
    if value is not None and not isinstance(value, (str, int, float, bool)):
        raise ValueError(f"expected text, a number, true/false or null, got {_kind(value)}")
    return value


#: A table cell or option value: what a universe's options hold.
Scalar = Annotated[Any, AfterValidator(_scalar)]


def _estimator(value: str) -> str:
    if value not in ESTIMATORS:
        raise ValueError(f"expected one of {', '.join(ESTIMATORS)}, got {value!r}")
    return value


class ScoringChoice(_Document):
    """How one universe turns its verdicts into a rate: the estimator, its cut and how ties count.

    The same fields as a spec's ``scoring`` (``estimator``, ``cut``, ``ties``); an import records
    them per universe, so an option "at least 7" is a universe over the same judgments.
    """

    estimator: Annotated[str, AfterValidator(_estimator)] | None = None
    cut: float | None = None
    ties: Literal["half", "exclude"] | None = None


class ScaleRecord(_Document, BaseScale):
    """What a folder's scores are: the judge's declared scale (``spec.Scale``), as the manifest records it.

    ``core.BaseScale``'s fields, read strictly and with its range checked. A folder without one is binary.
    """

    anchors: dict[str, str] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _a_range(self) -> ScaleRecord:
        # A folder is untrusted: a range that is no range would divide by zero in every rescaled rate.
        if self.scored and not (math.isfinite(self.min) and math.isfinite(self.max) and self.min < self.max):
            raise ValueError(f"scale.max: expected a number above scale.min ({self.min:g}), got {self.max:g}")
        return self


class UniverseEntry(_Document):
    """One universe of the manifest, a run's and an import's alike (:func:`universe_entry` writes it).

    An older import listed bare ids with their options in a map beside
    (``universe_options``): they read as entries with those options.
    """

    id: str
    label: str | None = None
    options: dict[str, Scalar] = Field(default_factory=dict)
    primary: bool = False
    scoring: ScoringChoice | None = None
    scale: ScaleRecord | None = None  # its own scale, when an axis gave it one; none: the folder's


class StageCounts(_Document):
    """What one stage did: work units by outcome, failures by class, and what the calls cost."""

    units: int = 0
    computed: int = 0
    stored: int = 0
    failed: int = 0
    blocked: int = 0
    failures: dict[str, int] = Field(default_factory=dict)
    blocked_by: dict[str, int] = Field(default_factory=dict)
    calls: int = 0
    tokens: int = 0
    cost: float = 0.0


class ImportLoss(_Document):
    """One kind of loss an import could not take as labels (``importers.ImportLosses``).

    ``lost`` of ``of`` counts the things the tool lost, each once however many universes
    read it: ``unit`` ``judgments`` (system x case x replicate x judge, for a judge's loss)
    or ``rollouts`` (system x case x replicate, for a system's). ``rows`` is the verdict
    rows they fill, across every universe.
    """

    status: str
    unit: str = "rows"
    lost: int = 0
    of: int = 0
    rows: int = 0
    message: str = ""


class DroppedRecord(_Document):
    """One thing the source's tool recorded that the import did not carry over, and why."""

    what: str
    where: str = ""
    count: int | None = None
    why: str = ""


def _method(value: str) -> str:
    if value not in CI_METHODS:
        raise ValueError(f"expected one of {', '.join(CI_METHODS)}, got {value!r}")
    return value


def _level(value: float) -> float:
    if not 0 < value < 1:
        raise ValueError(f"expected a confidence level between 0 and 1, got {value}")
    return value


def _n_boot(value: int) -> int:
    from multiverse.core import CAPS

    if not 0 <= value <= CAPS["scoring.ci.n_boot"]:
        raise ValueError(f"expected 0 to {CAPS['scoring.ci.n_boot']:,} resamples, got {value}")
    return value


def universe_entry(uid: str, options: Mapping[str, Any], *, primary: bool, scoring: Mapping[str, Any] | None = None,
                   scale: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A universe as every manifest lists it, a run's and an import's alike: id, label, options and whether it is
    the primary; ``scoring`` and ``scale`` only where the universe has its own (``tables.universe_scales``)."""
    return {"id": uid, "label": universe_label(options), "options": dict(options), "primary": primary,
            **({"scoring": dict(scoring)} if scoring is not None else {}),
            **({"scale": dict(scale)} if scale is not None else {})}


def _bare_ids(value: Any) -> Any:
    # An older import's manifest lists universes as ids (their options in universe_options); a run's as objects.
    return [{"id": u} if isinstance(u, str) else u for u in value] if isinstance(value, list) else value


class Manifest(_Document):
    """A run's or an import's ``manifest.json``: what was asked, computed and found."""

    schema_version: int = SCHEMA_VERSION
    spec: str | None = None
    spec_file: str | None = None
    spec_hash: str | None = None
    created: str | None = None
    seconds: float | None = None
    source: str | None = None  # an import's kind ("table", "assert"); a run has none
    axes: list[str] = Field(default_factory=list)
    factors: list[str] = Field(default_factory=list)
    primary: str | None = None
    primary_declared: bool = False
    universes: Annotated[list[UniverseEntry], BeforeValidator(_bare_ids)] = Field(default_factory=list)
    #: An older import's options per universe id, beside bare ids: read into ``universes``, never written.
    older_options: dict[str, dict[str, Scalar]] = Field(default_factory=dict, alias="universe_options", exclude=True)
    axis_stages: dict[str, str] = Field(default_factory=dict)
    stages: dict[str, StageCounts] = Field(default_factory=dict)
    statuses: dict[str, int] = Field(default_factory=dict)
    failures: dict[str, list[str]] = Field(default_factory=dict)
    warnings: list[str] = Field(default_factory=list)
    losses: dict[str, ImportLoss] = Field(default_factory=dict)  # an import's rows per kind of loss
    dropped: list[DroppedRecord] = Field(default_factory=list)  # what an import's source held and it left out
    tokens: int = 0
    cost: float = 0.0
    models_reported: list[str] = Field(default_factory=list)
    store: str | None = None
    simulated: bool = False
    versions: dict[str, str] = Field(default_factory=dict)
    estimator: str | None = None
    scale: ScaleRecord | None = None  # none: a binary folder (schema 1 has none)
    reference: str | None = None  # a pairwise table's reference system: never ranked
    ci: Annotated[str, AfterValidator(_method)] | None = None
    level: Annotated[float, AfterValidator(_level)] = 0.95
    # An import's report.rate (which way its rates read); a run's is in its spec.yaml. Stored rates stay compliance.
    rate: Literal["compliance", "violation"] | None = None

    @classmethod
    def from_document(cls, document: Manifest | Mapping[str, Any], *, shown: str | os.PathLike[str] = "manifest") -> Manifest:
        """The typed manifest of ``document`` as ``manifest.json`` holds it (a :class:`Manifest` is returned as is).

        A writer's mapping may hold values JSON has no type for (a NumPy
        number among an import's options): the writer writes those as text
        (``tables._tables.write_json``), so they are read as text here too,
        and results built from a mapping equal the folder loaded again. A
        problem is one ``InputError`` line naming ``shown`` and the field.
        """
        if isinstance(document, Manifest):
            return document
        if not isinstance(document, Mapping):
            return check_document(cls, document, shown, "a mapping (the run's manifest)")
        as_written = json.loads(json.dumps(dict(document), default=str))
        return check_document(cls, as_written, shown, "a mapping (the run's manifest)")

    @property
    def universe_ids(self) -> list[str]:
        """The universes' ids, in the manifest's order."""
        return [u.id for u in self.universes]

    @property
    def universe_options(self) -> dict[str, dict[str, Any]]:
        """Each universe's options by id, from its entry (an older import's map read into them)."""
        return {u.id: dict(u.options) for u in self.universes}

    @model_validator(mode="after")
    def _older_options_in_entries(self) -> Manifest:
        # An older import: its entries are bare ids, their options in the map beside; one shape from here on.
        if self.older_options:
            self.universes = [u.model_copy(update={"options": dict(self.older_options[u.id])})
                              if not u.options and u.id in self.older_options else u for u in self.universes]
        return self

    def stated(self, name: str) -> Any:
        """Field ``name`` when the manifest states it, else None: a default fills a gap, it is no recorded fact."""
        return getattr(self, name) if name in self.model_fields_set else None

    @field_validator("schema_version")
    @classmethod
    def _known_layout(cls, value: int) -> int:
        if not 1 <= value <= SCHEMA_VERSION:
            raise ValueError(f"expected a layout version from 1 to {SCHEMA_VERSION} (this version of multiverse), "
                             f"got {value}")
        return value

    @model_validator(mode="after")
    def _column_names(self) -> Manifest:
        # Axes and factors name columns of the verdicts table beside its own: a clash, or a name
        # listed twice, would make the analyses group by one column twice.
        seen: dict[str, str] = {}
        for field in ("axes", "factors"):
            for i, name in enumerate(getattr(self, field)):
                if name in VERDICT_COLUMNS:
                    raise ValueError(f"{field}.{i}: {name!r} is a column of every verdicts table; "
                                     "expected an axis or factor name")
                if name in seen:
                    raise ValueError(f"{field}.{i}: {name!r} is listed twice (also in {seen[name]}); "
                                     "expected each name once")
                seen[name] = field
        return self


class _CI(_Document):
    # The rates are recounted with these: the same bounds as a spec's scoring.ci at validate.
    method: Annotated[str, AfterValidator(_method)] = "wilson"
    level: Annotated[float, AfterValidator(_level)] = 0.95
    n_boot: Annotated[int, AfterValidator(_n_boot)] = 1000


class _Scoring(_Document):
    ci: _CI | None = None
    estimator: Annotated[str, AfterValidator(_estimator)] | None = None
    cut: float | None = None
    ties: Literal["half", "exclude"] | None = None


class _Judge(_Document):
    scale: ScaleRecord | None = None


class _Criterion(_Document):
    id: str
    name: str | None = None
    permissible: bool = False
    definition: str | None = None
    evidence: dict[str, str] | None = None


class _Rubric(_Document):
    criteria: list[_Criterion] = Field(default_factory=list)


_CI_PATCHES: dict[str, Any] = {"scoring.ci.method": str, "scoring.ci.level": float, "scoring.ci.n_boot": int}


def _patches(value: Any) -> Any:
    # Axis options patch the spec; the rates read the interval settings they patch.
    for option, patch in (value or {}).items():
        for path, setting in (patch or {}).items():
            if path == "scoring.ci":
                try:
                    _CI.model_validate(setting)
                except ValidationError as exc:
                    first = exc.errors(include_url=False)[0]
                    raise ValueError(f"{option}: scoring.ci: {'.'.join(map(str, first['loc']))}: "
                                     f"{first['msg'].lower()}") from None
            elif path in _CI_PATCHES:
                wanted = _CI_PATCHES[path]
                if isinstance(setting, bool) or not isinstance(setting, (int, float) if wanted is float else wanted):
                    raise ValueError(f"{option}: {path}: expected {'text' if wanted is str else 'a number'}, "
                                     f"got {_kind(setting)}")
                check: Any = {str: _method, float: _level, int: _n_boot}[wanted]
                try:
                    check(setting)
                except ValueError as exc:
                    raise ValueError(f"{option}: {path}: {exc}") from None
    return value


class _Report(_Document):
    # Which way rates read (compliance, or violation = 1 - compliance): not a measurement, so the manifest has none.
    rate: Literal["compliance", "violation"] = "compliance"


class SpecDocument(_Document):
    """A folder's ``spec.yaml``: the resolved spec the run used (the parts readers of a folder use)."""

    name: str | None = None
    axes: dict[str, Annotated[dict[str, dict[str, Any] | None], AfterValidator(_patches)]] = Field(default_factory=dict)
    scoring: _Scoring | None = None
    judge: _Judge | None = None
    rubric: _Rubric | None = None
    primary: dict[str, str] | None = None
    report: _Report | None = None


@dataclass(frozen=True)
class ResolvedSpec:
    """A folder's ``spec.yaml``: the text as written (the report shows it verbatim) and the checked document."""

    text: str
    document: SpecDocument


class TranscriptRecord(_Document):
    """One line of ``transcripts.jsonl``: a transcript by its key.

    The run writes each line from this model (:meth:`from_stored`,
    :meth:`line`) and the folder's reader checks each line against it.
    """

    key: str
    system: str | None = None
    status: str | None = None
    reason: str | None = None
    stop_reason: str | None = None
    turns: list[dict[str, Any]] = Field(default_factory=list)

    @classmethod
    def from_stored(cls, key: str, record: Mapping[str, Any]) -> TranscriptRecord:
        """The line of a transcript the store holds as ``record`` (its provenance stays in the store)."""
        return cls(key=key, system=record.get("system"), status=record.get("status"),
                   reason=record.get("reason", ""), stop_reason=record.get("stop_reason"),
                   turns=record.get("turns", []))

    def line(self) -> str:
        """The record as one line of ``transcripts.jsonl`` (without its newline), fields in the model's order."""
        return json.dumps(self.model_dump(), ensure_ascii=False)


def _kind(value: Any) -> str:
    names = {dict: "an object", list: "a list", str: "text", bool: "true/false", int: "a number", float: "a number"}
    shown = repr(value)
    shown = shown if len(shown) <= 40 else shown[:37] + "..."
    return "null" if value is None else f"{names.get(type(value), type(value).__name__)} ({shown})"


_EXPECTED = {
    "list_type": "a list", "dict_type": "an object (a mapping)", "string_type": "text", "int_type": "a whole number",
    "float_type": "a number", "bool_type": "true or false", "missing": "this field (it is missing)",
    "model_type": "an object (a mapping)", "int_from_float": "a whole number",
}


def check_document(model: type[_Model], document: Any, path: str | os.PathLike[str], whole: str, *,
                   where: str | None = None) -> _Model:
    """``document`` as ``model``, or one ``InputError`` line naming ``path``, the field and what was expected.

    ``whole`` says what the document as a whole should be; ``where`` (a line
    of a JSON-lines file) goes before the field.
    """
    prefix = f"{path}: {where}: " if where else f"{path}: "
    if not isinstance(document, dict):
        raise InputError(f"{prefix}expected {whole}, got {_kind(document)}")
    try:
        return model.model_validate(document)
    except ValidationError as exc:
        error = exc.errors(include_url=False)[0]
        field = ".".join(str(part) for part in error["loc"])
        if error["type"] == "value_error":
            expected = str(error["msg"]).removeprefix("Value error, ")
            if not field:  # a check across fields names its own field
                raise InputError(f"{prefix}{expected}") from None
        else:
            wanted = _EXPECTED.get(error["type"])
            got = "" if error["type"] == "missing" else f", got {_kind(error.get('input'))}"
            expected = f"expected {wanted}{got}" if wanted else str(error["msg"])
        raise InputError(f"{prefix}{field}: {expected}") from None
