"""The results of one audit: its tables, who is who in them, and every analysis of them.

:class:`Results` is what ``multiverse.load_run``, ``multiverse.run`` and the
importers return, and what the command line, the report and the case-study
script read. It holds the verdicts (and criteria and rates, when the source
has them), the axes, the design factors and the primary universe, and it
computes each analysis on first use and keeps it::

    results = mv.load_run("runs/demo")
    results.curve().frame            # one row per universe x system
    results.agreement(axis="judge")  # judges compared on the same transcripts
    mv.report(results, "report.html")

An analysis returns an :class:`Analysis`: its main table as a tidy
``frame``, the whole result as a JSON-able ``document`` (what
``multiverse <analysis> --json`` prints), the same document as a typed model
(``typed``) and its ``notes``; ``figure()`` draws it. Analyses never call a
model.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Generic, TypeVar

import pandas as pd

from multiverse.errors import InputError
from multiverse.results._anchoring_documents import AnchoredCurveDocument, AnchoredRankingDocument, CalibrationDocument
from multiverse.results._documents import AgreementDocument, CurveDocument, Document, PowerDocument, VarianceDocument
from multiverse.results._ranking_documents import RankingDocument
from multiverse.tables._tables import split_factors, universe_ids

__all__ = ["Analysis", "CalibrationAnalysis", "CurveAnalysis", "Results", "json_safe"]

_REQUIRED = ("system", "case_id", "compliant")


def json_safe(value: Any) -> Any:
    """``value`` with null for undefined statistics (NaN) and plain Python numbers, ready for ``json.dumps``."""
    import numpy as np

    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


#: The model of an analysis's document; a bare ``Analysis`` has the plain :class:`Document`.
D = TypeVar("D", bound=Document)


@dataclass(frozen=True, eq=False)
class Analysis(Generic[D]):
    """One analysis of a run: the tidy ``frame``, the JSON-able ``document``, its ``typed`` view and how to draw it.

    ``document`` is the dict the analysis function returned, and stays what
    ``--json`` prints and ``result["key"]`` reads, so code written against
    those dicts keeps working. ``typed`` validates the same dict into
    ``schema`` (``results._documents``) for attribute access.
    """

    name: str
    document: dict
    frame: pd.DataFrame
    draw: Callable[..., Any] | None = field(default=None, repr=False)
    #: Drawn from a simulated run (``sim/`` models): every figure then carries the SIMULATED stamp.
    simulated: bool = False
    # The plain Document is the default only where D is (a bare Analysis); every analysis here passes its own.
    schema: type[D] = field(default=Document, kw_only=True, repr=False)  # type: ignore[assignment]

    @cached_property
    def typed(self) -> D:
        """The document as its typed model, validated once, on first use (``document`` is not read again)."""
        return self.schema.model_validate(self.document)

    @property
    def notes(self) -> list[str]:
        return list(self.document.get("notes", []))

    def __getitem__(self, key: str) -> Any:
        return self.document[key]

    def get(self, key: str, default: Any = None) -> Any:
        return self.document.get(key, default)

    def to_dict(self) -> dict:
        """The document with NaN as None and NumPy scalars as Python numbers."""
        return json_safe(self.document)

    def figure(self, **options: Any) -> Any:
        """The analysis's figure (a matplotlib ``Figure``), stamped SIMULATED when the run was."""
        if self.draw is None:
            raise InputError(f"{self.name}: this analysis has no figure")
        figure = self.draw(**options)
        if self.simulated:
            from multiverse.plots.stamp import stamp_simulated

            stamp_simulated(figure)
        return figure

    def _repr_html_(self) -> str:
        notes = "".join(f"<li>{_escape(n)}</li>" for n in self.notes)
        return (f"<p><b>{_escape(self.name)}</b></p>{_head_html(self.frame, _SHOWN_ROWS, 'rows')}"
                + (f"<ul>{notes}</ul>" if notes else ""))


@dataclass(frozen=True, eq=False)
class CurveAnalysis(Analysis[CurveDocument]):
    """A specification curve: ``frame`` is the curve, ``tests`` its joint tests (``JointTest``)."""

    tests: tuple = ()
    schema: type[CurveDocument] = field(default=CurveDocument, kw_only=True, repr=False)


@dataclass(frozen=True, eq=False)
class CalibrationAnalysis(Analysis[CalibrationDocument]):
    """Rates anchored to human labels: ``frame`` has the rates, ``judges`` each universe's judge against people."""

    calibration: Any = None  # ``multiverse.analysis.anchoring.Calibration``
    schema: type[CalibrationDocument] = field(default=CalibrationDocument, kw_only=True, repr=False)

    @property
    def judges(self) -> pd.DataFrame:
        return self.calibration.judges


# A notebook shows this many rows of a table; the rest stay in ``.frame`` (and the note says how many).
_SHOWN_ROWS = 50
_SHOWN_UNIVERSES = 20


def _head_html(frame: pd.DataFrame, limit: int, what: str) -> str:
    """The first ``limit`` rows of ``frame`` as HTML, with a note when that is not all of them."""
    table = frame.head(limit).to_html(index=False)
    if len(frame) <= limit:
        return table
    return table + f"<p><i>showing {limit} of {len(frame)} {_escape(what)}</i></p>"


def _escape(text: Any) -> str:
    import html

    return html.escape(str(text))


@dataclass(eq=False)
class Results:
    """The tables of one run, import or verdicts table, and which of their columns are axes.

    ``verdicts`` has one row per universe x system x case x replicate;
    ``criteria`` (runs and ASSERT imports) one per judgment x sample x
    criterion; ``rates`` one per universe x system x subgroup. ``axes`` are
    the columns that are constant inside a universe, ``factors`` the design
    factors that vary inside one (e.g. behavior); ``primary`` is the
    pre-registered universe's id, or None. ``source`` is the directory or
    table file the results came from (or were written to).
    """

    verdicts: pd.DataFrame
    criteria: pd.DataFrame | None = None
    rates: pd.DataFrame | None = None
    axes: list[str] = field(default_factory=list)
    factors: list[str] = field(default_factory=list)
    manifest: dict = field(default_factory=dict)
    primary: str | None = None
    source: Path | None = None
    _cache: dict = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self) -> None:
        missing = [c for c in _REQUIRED if c not in self.verdicts.columns]
        if missing:
            raise InputError(f"verdicts: {', '.join(missing)}: expected column(s) to be present")
        columns = set(self.verdicts.columns)
        axes = [a for a in self.axes if a in columns]
        factors = [f for f in self.factors if f in columns]
        more: list[str] = []
        if not self.manifest:
            # Tables built by hand may still list a design factor (e.g. behavior) among the axes; a run's
            # or an import's manifest already tells them apart (and the check costs a pass over every row).
            axes, more = split_factors(self.verdicts, axes)
        self.axes, self.factors = axes, factors + more
        v = self.verdicts
        if "universe_id" not in columns:
            v = v.assign(universe_id=universe_ids(v, self.axes).to_numpy())
        # Ids and system names as text, so a table that stored them as numbers reads the same everywhere.
        text = {c: v[c].astype(str) for c in ("universe_id", "system") if not _is_text(v[c])}
        self.verdicts = v.assign(**text) if text else v
        # A primary the verdicts do not hold cannot be singled out: no universe stands in for it.
        if self.primary is not None:
            self.primary = str(self.primary) if _holds(self.verdicts["universe_id"], str(self.primary)) else None
        if self.source is not None:
            self.source = Path(self.source)

    def __setattr__(self, name: str, value: Any) -> None:
        super().__setattr__(name, value)
        # A changed table, axis list or primary makes every cached analysis stale.
        if name != "_cache" and "_cache" in self.__dict__:
            self._cache.clear()

    # -- who is who -----------------------------------------------------------

    @property
    def out_dir(self) -> Path | None:
        """The run or import directory, or None for a bare table or an unwritten run."""
        return self.source if self.source is not None and self.source.is_dir() else None

    @property
    def warnings(self) -> list[str]:
        """What an importer noticed and the user should know (from the manifest)."""
        return list(self.manifest.get("warnings", []))

    @property
    def name(self) -> str:
        return str(self.manifest.get("spec") or (self.source.name if self.source is not None else "audit"))

    @property
    def simulated(self) -> bool:
        return bool(self.manifest.get("simulated"))

    @property
    def systems(self) -> list[str]:
        """The systems, in the order the verdicts first name them."""
        return self._memo(("systems",), lambda: [str(s) for s in dict.fromkeys(self.verdicts["system"])])

    @property
    def universes(self) -> pd.DataFrame:
        """One row per universe: ``universe_id``, the axis columns and a ``label``; the primary first."""
        return self._memo(("universes",), self._universes)

    def _universes(self) -> pd.DataFrame:
        first = self.verdicts.drop_duplicates("universe_id")[["universe_id", *self.axes]].reset_index(drop=True)
        labels = {str(u["id"]): u.get("label") for u in self.manifest.get("universes", [])
                  if isinstance(u, dict) and "id" in u}
        first["label"] = [
            labels.get(u) or (" · ".join(f"{a}={row[a]}" for a in self.axes) if self.axes else u)
            for u, (_, row) in zip(first["universe_id"], first.iterrows())
        ]
        primary = self.primary
        order = ([primary] if primary else []) + [u for u in first["universe_id"] if u != primary]
        return first.set_index("universe_id").loc[order].reset_index()

    @property
    def options(self) -> dict[str, list]:
        """Each axis's options in the order the spec (or the manifest) declared them."""
        from multiverse.results._options import declared_options

        return self._memo(("options",), lambda: declared_options(self, self.axes))

    def judge_axis(self) -> str:
        """The axis whose options are judges: ``judge``, else the first axis that changes the judge stage."""
        if "judge" in self.axes:
            return "judge"
        stages = self.manifest.get("axis_stages", {})
        for axis in self.axes:
            if stages.get(axis) == "judge":
                return axis
        raise InputError(f"{self.source}: no judge axis; expected an axis naming one of: "
                         f"{', '.join(self.axes) or '(no axes)'}", param="axis")

    def check_axes(self, axes: Sequence[str] | None) -> list[str] | None:
        """``axes`` as a list, each checked to be an axis of these results."""
        if axes is None:
            return None
        axes = [axes] if isinstance(axes, str) else list(axes)
        unknown = [a for a in axes if a not in self.axes]
        if unknown:
            raise InputError(f"axis {unknown[0]}: expected one of the axes: {', '.join(self.axes) or '(none)'}",
                             param="axis")
        return axes

    # -- shared inputs of the analyses -------------------------------------------

    def case_matrix(self, systems: Sequence[str] | None = None):
        """The ok verdicts counted per system x universe x case (``analysis.curve.CaseMatrix``)."""
        from multiverse.analysis.curve import case_matrix

        key = None if systems is None else tuple(systems)
        return self._memo(("matrix", key), lambda: case_matrix(self.verdicts, axes=self.axes, systems=systems))

    def ci_settings(self) -> tuple[pd.DataFrame | None, int]:
        """The interval each universe's rates use, as the spec asked (``analysis.rates.run_ci_settings``)."""
        from multiverse.analysis.rates import run_ci_settings

        return self._memo(("ci",), lambda: run_ci_settings(self))

    def rate_table(self) -> pd.DataFrame:
        """The rates table (overall and per factor level); computed from the verdicts when the source has none."""
        def compute() -> pd.DataFrame:
            if self.rates is not None and len(self.rates):
                rates = self.rates
            else:
                from multiverse.analysis.rates import compute_rates

                rates = compute_rates(self.verdicts, axes=self.axes, factors=self.factors)
            return rates.assign(universe_id=rates["universe_id"].astype(str), system=rates["system"].astype(str))
        return self._memo(("rates",), compute)

    def curve_frame(self, systems: Sequence[str] | None = None) -> pd.DataFrame:
        """The specification curve table: one row per universe x system (``analysis.curve.spec_curve``)."""
        from multiverse.analysis.curve import spec_curve

        def compute() -> pd.DataFrame:
            ci, n_boot = self.ci_settings()  # the interval the spec asked for, per universe
            return spec_curve(self.case_matrix(), axes=self.axes, system=list(systems) if systems else None,
                              primary=self.primary, ci=ci if ci is not None else "wilson", n_boot=n_boot)
        return self._memo(("curve_frame", None if systems is None else tuple(systems)), compute)

    def rate_test(self, system: str, threshold: float, *, boot: int = 1000, seed: int = 0):
        """The joint test that ``system``'s rate is ``threshold`` in every universe (``JointTest``)."""
        from multiverse.analysis.inference import joint_rate_test

        return self._memo(("rate_test", system, threshold, boot, seed), lambda: joint_rate_test(
            self.case_matrix(), system=system, threshold=threshold, boot=boot, seed=seed))

    def difference_test(self, a: str, b: str, *, boot: int = 1000, seed: int = 0):
        """The joint sign-flip test that systems ``a`` and ``b`` are equally compliant in every universe."""
        from multiverse.analysis.inference import joint_difference_test

        return self._memo(("difference_test", a, b, boot, seed), lambda: joint_difference_test(
            self.case_matrix(), a=a, b=b, boot=boot, seed=seed))

    def difference_curve(self, a: str, b: str) -> pd.DataFrame:
        """rate(a) - rate(b) in every universe, on the cases both have (``analysis.curve.difference_curve``)."""
        from multiverse.analysis.curve import difference_curve

        return self._memo(("difference_curve", a, b), lambda: difference_curve(
            self.case_matrix(), axes=self.axes, a=a, b=b, primary=self.primary))

    def system_rates(self) -> pd.DataFrame:
        """One rate per universe x system, over every counted verdict (``analysis.rates.system_rates``)."""
        from multiverse.analysis.rates import system_rates

        return self._memo(("system_rates",), lambda: system_rates(self.verdicts, axes=self.axes))

    # -- the analyses ---------------------------------------------------------------

    def curve(self, *, systems: Sequence[str] | None = None, threshold: float | str | None = None,
              diff: tuple[str, str] | None = None, boot: int = 1000, seed: int = 0) -> CurveAnalysis:
        """The specification curve of every system (or of ``systems``) with its joint tests.

        ``threshold`` tests each system's rate against that rate in every
        universe; ``"primary"`` against the system's own rate in the primary
        universe (sampling noise alone). ``diff=(a, b)`` adds the sign-flip
        test that ``a`` and ``b`` are equally compliant. ``boot`` and
        ``seed`` set the tests' resampling.
        """
        from multiverse.results import _analyses as _results_analyses

        key = ("curve", None if systems is None else tuple(systems), threshold, tuple(diff) if diff else None,
               boot, seed)
        return self._memo(key, lambda: _results_analyses.curve(self, systems=systems, threshold=threshold, diff=diff,
                                                        boot=boot, seed=seed))

    def agreement(self, axis: str | None = None) -> Analysis[AgreementDocument]:
        """Agreement between the options of ``axis`` (default: the judge axis) on the same units."""
        from multiverse.results import _analyses as _results_analyses

        axis = axis or self.judge_axis()
        self.check_axes([axis])
        return self._memo(("agreement", axis), lambda: _results_analyses.agreement(self, axis))

    def ranking(self, *, axes: Sequence[str] | None = None, boot: int = 1000) -> Analysis[RankingDocument]:
        """How stable the ranking of systems is across universes; ``axes`` limits the per-axis summary."""
        from multiverse.results import _analyses as _results_analyses

        axes = self.check_axes(axes)
        key = ("ranking", None if axes is None else tuple(axes), boot)
        return self._memo(key, lambda: _results_analyses.ranking(self, axes, boot))

    def variance(self, *, axes: Sequence[str] | None = None) -> Analysis[VarianceDocument]:
        """The share of rate variance due to each axis; ``axes`` limits what is reported (not the model)."""
        from multiverse.results import _analyses as _results_analyses

        axes = self.check_axes(axes)
        return self._memo(("variance", None if axes is None else tuple(axes)),
                          lambda: _results_analyses.variance(self, axes))

    def power(self, *, baseline_rate: float = 0.8, alpha: float = 0.05, power: float = 0.8) -> Analysis[PowerDocument]:
        """Detectable differences at this run's cases per system and universe (``analysis.power``)."""
        from multiverse.results import _analyses as _results_analyses

        return self._memo(("power", baseline_rate, alpha, power),
                          lambda: _results_analyses.power(self, baseline_rate, alpha, power))

    def calibrate(self, human: str | os.PathLike | pd.DataFrame, *, alpha: float = 0.05) -> CalibrationAnalysis:
        """Every universe x system rate anchored to human labels (PPI++), and each judge's accuracy against them.

        ``human``: a CSV or parquet file (or a DataFrame) with ``system``,
        ``case_id``, ``compliant`` (0/1, true/false; blank = not labelled yet)
        and, where those do not name one transcript, ``replicate`` or
        ``transcript_key`` (the labelling sheet has them all). A sheet names
        its sample (``labelling.IDENTITY_COLUMNS``) and is refused unless it
        is that sample of this run (``labelling.check_sheet``). ``frame`` is
        one row per universe x system; ``judges`` one per universe; the
        figure puts judge, anchored and humans-only rates side by side.
        """
        from multiverse.results import _anchoring as _results_anchoring

        key = _results_anchoring.human_key(human)
        if key is None:
            return _results_anchoring.calibrate(self, human, alpha)
        return self._memo(("calibrate", key, alpha), lambda: _results_anchoring.calibrate(self, human, alpha))

    def anchored_curve(self, human: str | os.PathLike | pd.DataFrame, *, alpha: float = 0.05,
                       systems: Sequence[str] | None = None) -> Analysis[AnchoredCurveDocument]:
        """The specification curve of the human-anchored rates (of ``systems``, default all); its figure draws it
        beside the judge-raw curve."""
        from multiverse.results import _anchoring as _results_anchoring

        return _results_anchoring.anchored_curve(self, self.calibrate(human, alpha=alpha),
                                                 None if systems is None else list(systems))

    def anchored_ranking(self, human: str | os.PathLike | pd.DataFrame, *,
                         alpha: float = 0.05) -> Analysis[AnchoredRankingDocument]:
        """Per universe, whether the ranking of systems survives anchoring the rates to human labels."""
        from multiverse.results import _anchoring as _results_anchoring

        return _results_anchoring.anchored_ranking(self, self.calibrate(human, alpha=alpha))

    # -- notebooks --------------------------------------------------------------------

    def _repr_html_(self) -> str:
        v = self.verdicts
        facts = (f"{len(self.universes)} universes · {len(self.systems)} systems · {v['case_id'].nunique()} cases · "
                 f"{len(v)} verdict rows")
        banner = "<p><b>SIMULATED</b>: from the built-in simulated world, not real models.</p>" if self.simulated else ""
        primary = self.primary
        return (f"<div><p><b>multiverse results: {_escape(self.name)}</b></p>{banner}<p>{_escape(facts)}</p>"
                f"<p>systems: {_escape(', '.join(self.systems))}</p>"
                f"<p>axes: {_escape(', '.join(self.axes) or 'none')}; design factors: "
                f"{_escape(', '.join(self.factors) or 'none')}; primary: {_escape(primary or 'none declared')}</p>"
                f"{_head_html(self.universes, _SHOWN_UNIVERSES, 'universes')}</div>")

    def __repr__(self) -> str:
        return (f"Results({self.name!r}, universes={self.verdicts['universe_id'].nunique()}, "
                f"systems={len(self.systems)}, axes={self.axes}, primary={self.primary!r})")

    def _memo(self, key: Hashable, compute: Callable[[], Any]) -> Any:
        if key not in self._cache:
            self._cache[key] = compute()
        return self._cache[key]


def _holds(column: pd.Series, value: str) -> bool:
    if isinstance(column.dtype, pd.CategoricalDtype):  # no pass over millions of strings
        code = column.cat.categories.get_indexer([value])[0]
        return bool(code >= 0 and (column.cat.codes.to_numpy() == code).any())
    return value in set(column)


def _is_text(series: pd.Series) -> bool:
    dtype = series.dtype
    if isinstance(dtype, pd.CategoricalDtype):  # load_run's text columns
        dtype = dtype.categories.dtype
    return pd.api.types.is_object_dtype(dtype) or pd.api.types.is_string_dtype(dtype)
