"""What an analysis of :class:`~multiverse.results.Results` hands back, and what it needs of the results.

:class:`Analysis` is one analysis: its tidy ``frame``, its JSON-able
``document`` and ``typed`` view, and how to draw it. :class:`ResultsView` is
the part of ``Results`` the analysis chains read, so that the chains
(``_analyses``, ``_anchoring``) depend on this module and never on the
results class that calls them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import KW_ONLY, InitVar, dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Generic, Protocol, TypeVar, cast

import pandas as pd

from multiverse.core import json_ready
from multiverse.errors import InputError
from multiverse.results._anchoring_documents import CalibrationDocument
from multiverse.results._documents import CurveDocument, Document

__all__ = ["Analysis", "CalibrationAnalysis", "CurveAnalysis", "ResultsView", "rows_frame"]


class ResultsView(Protocol):
    """What the analysis chains read of :class:`~multiverse.results.Results` (its tables and cached inputs)."""

    verdicts: pd.DataFrame
    criteria: pd.DataFrame | None
    axes: list[str]
    factors: list[str]
    primary: str | None
    source: Path | None

    @property
    def simulated(self) -> bool: ...

    @property
    def rate_direction(self) -> str: ...

    @property
    def options(self) -> dict[str, list[Any]]: ...

    def rate_table(self) -> pd.DataFrame: ...

    def curve_frame(self, systems: Sequence[str] | None = None) -> pd.DataFrame: ...

    def rate_test(self, system: str, threshold: float, *, boot: int = 1000, seed: int = 0) -> Any: ...

    def difference_test(self, a: str, b: str, *, boot: int = 1000, seed: int = 0) -> Any: ...

    def difference_curve(self, a: str, b: str) -> pd.DataFrame: ...

    def system_rates(self) -> pd.DataFrame: ...

    def case_counts(self) -> Any: ...

    @property
    def scale(self) -> Any: ...

    @property
    def scales(self) -> Any: ...

    @property
    def reference(self) -> str | None: ...

    @property
    def resolved_spec(self) -> Any: ...

    def scoring_choices(self) -> pd.DataFrame | None: ...


#: The model of an analysis's document; a bare ``Analysis`` has the plain :class:`Document`.
D = TypeVar("D", bound=Document)


@dataclass(frozen=True, eq=False)
class Analysis(Generic[D]):
    """One analysis of a run: the tidy ``frame``, the typed ``document``, its JSON and how to draw it.

    ``document`` is the analysis's document as its model (``schema``, from
    ``results._documents``): readers take attributes, so a renamed key fails
    at the type check, not at a user's terminal. ``source`` is the dict the
    analysis function returned, kept as written so that :meth:`to_dict` (what
    ``--json`` prints) keeps its keys in their order, byte for byte: nothing
    reads it by key, and the analysis function writes it whole (narrowed to
    the axes asked for, the notes added), so the model and the JSON say the same.
    ``model``: the document already validated, when its builder made the frame
    or the figure from it (then ``schema`` is its class); else ``document`` is
    validated from ``source`` on first use.
    """

    name: str
    source: dict[str, Any] = field(repr=False)
    frame: pd.DataFrame
    draw: Callable[..., Any] | None = field(default=None, repr=False)
    #: Drawn from a simulated run (``sim/`` models): every figure then carries the SIMULATED stamp.
    simulated: bool = False
    # The plain Document is the default only where D is (a bare Analysis); every analysis here passes its own.
    schema: type[D] = field(default=Document, kw_only=True, repr=False)  # type: ignore[assignment]
    _: KW_ONLY
    model: InitVar[D | None] = None

    def __post_init__(self, model: D | None) -> None:
        # Every analysis's rates are compliance (core.orient flips only what is shown): the document says so,
        # so that --json read beside a violation figure cannot be misread.
        if "rate_direction" not in self.source:
            self.source["rate_direction"] = "compliance"
            model = model.model_copy(update={"rate_direction": "compliance"}) if model is not None else None
        if model is not None:  # the cached ``document``, set before anyone reads it
            object.__setattr__(self, "schema", type(model))
            object.__setattr__(self, "document", model)

    @cached_property
    def document(self) -> D:
        """The document as its typed model, validated once (``source`` is not read again)."""
        return self.schema.model_validate(self.source)

    @property
    def notes(self) -> list[str]:
        # every document's model declares its notes; a bare Document keeps them as an extra field, if it has any
        return list(getattr(self.document, "notes", None) or [])

    def to_dict(self) -> dict[str, Any]:
        """The document as JSON reads it: NaN as None and NumPy scalars as Python numbers, keys in their order."""
        return cast("dict[str, Any]", json_ready(self.source))

    def figure(self, **options: Any) -> Any:
        """The analysis's figure (a matplotlib ``Figure``), stamped SIMULATED when the run was."""
        if self.draw is None:
            raise InputError(f"{self.name}: this analysis has no figure")
        figure = self.draw(**options)
        if self.simulated:
            from multiverse.plots import stamp_simulated

            stamp_simulated(figure)
        return figure

    def _repr_html_(self) -> str:
        notes = "".join(f"<li>{_escape(n)}</li>" for n in self.notes)
        return (f"<p><b>{_escape(self.name)}</b></p>{_head_html(self.frame, _SHOWN_ROWS, 'rows')}"
                + (f"<ul>{notes}</ul>" if notes else ""))


@dataclass(frozen=True, eq=False)
class CurveAnalysis(Analysis[CurveDocument]):
    """A specification curve: ``frame`` is the curve, ``tests`` its joint tests (``JointTest``)."""

    tests: tuple[Any, ...] = ()
    schema: type[CurveDocument] = field(default=CurveDocument, kw_only=True, repr=False)


@dataclass(frozen=True, eq=False)
class CalibrationAnalysis(Analysis[CalibrationDocument]):
    """Rates anchored to human labels: ``frame`` has the rates, ``judges`` each universe's judge against people."""

    calibration: Any = None  # ``multiverse.analysis.anchoring.Calibration``
    schema: type[CalibrationDocument] = field(default=CalibrationDocument, kw_only=True, repr=False)

    @property
    def judges(self) -> pd.DataFrame:
        return self.calibration.judges


def rows_frame(rows: Sequence[Document], *, first: Sequence[str] = ()) -> pd.DataFrame:
    """A document's rows (``VarianceDocument.terms``, ...) as a table: a column per key each row was given.

    A model lists its declared keys before the extra ones; ``first`` names the columns that lead (the
    extra keys an analysis wrote first, such as a Bradley-Terry score's axes).
    """
    frame = pd.DataFrame([row.model_dump(exclude_unset=True) for row in rows])
    leading = [c for c in first if c in frame.columns]
    return frame[[*leading, *(c for c in frame.columns if c not in leading)]] if leading else frame


# A notebook shows this many rows of a table; the rest stay in ``.frame`` (and the note says how many).
_SHOWN_ROWS = 50
_SHOWN_UNIVERSES = 20


def _head_html(frame: pd.DataFrame, limit: int, what: str) -> str:
    """The first ``limit`` rows of ``frame`` as HTML, with a note when that is not all of them."""
    table = frame.head(limit).to_html(index=False)
    if len(frame) <= limit:
        return cast("str", table)
    return cast("str", table + f"<p><i>showing {limit} of {len(frame)} {_escape(what)}</i></p>")


def results_html(results: Any, *, shown: int) -> str:
    """A notebook's view of a run's results: its facts, a simulated banner, and its first ``shown`` universes."""
    v = results.verdicts
    facts = (f"{len(results.universes)} universes · {len(results.systems)} systems · {v['case_id'].nunique()} cases · "
             f"{len(v)} verdict rows")
    banner = "<p><b>SIMULATED</b>: from the built-in simulated world, not real models.</p>" if results.simulated else ""
    return (f"<div><p><b>multiverse results: {_escape(results.name)}</b></p>{banner}<p>{_escape(facts)}</p>"
            f"<p>systems: {_escape(', '.join(results.systems))}</p>"
            f"<p>axes: {_escape(', '.join(results.axes) or 'none')}; design factors: "
            f"{_escape(', '.join(results.factors) or 'none')}; primary: {_escape(results.primary or 'none declared')}</p>"
            f"{_head_html(results.universes, shown, 'universes')}</div>")


def _escape(text: Any) -> str:
    import html

    return html.escape(str(text))
