"""The results of one audit: its tables, who is who in them, and every analysis of them.

:class:`Results` is what ``load_run``, ``run`` and the importers return: the verdicts (and criteria and
rates, when the source has them), the axes, the design factors and the primary universe; it computes each
analysis on first use and keeps it (``by=``: one per group of rows, ``results._grouped``)::

    results = mv.load_run("runs/demo")
    results.curve().frame            # one row per universe x system
    results.agreement(axis="judge")  # judges compared on the same transcripts
    mv.report(results, "report.html")

An analysis returns an :class:`Analysis`: its tidy ``frame``, its JSON-able ``document`` (what ``--json``
prints), the same as a typed model (``typed``) and its ``notes``; ``figure()`` draws it.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, cast, overload

import pandas as pd

from multiverse.core import universe_label
from multiverse.errors import InputError
from multiverse.results._columns import holds, is_text
from multiverse.tables import (
    FolderScales,
    Manifest,
    ResolvedSpec,
    ScaleRecord,
    folder_scales,
    split_factors,
    universe_ids,
)

if TYPE_CHECKING:  # the documents' models are built on import (pydantic): a run that writes its tables needs none
    from multiverse.results._analysis import Analysis, CalibrationAnalysis, CurveAnalysis
    from multiverse.results._anchoring_documents import AnchoredCurveDocument, AnchoredRankingDocument
    from multiverse.results._documents import AgreementDocument, PowerDocument, VarianceDocument
    from multiverse.results._grouped import GroupedDocument
    from multiverse.results._ranking_documents import RankingDocument

__all__ = ["Results"]

_REQUIRED = ("system", "case_id", "compliant")


@dataclass(eq=False, init=False)
class Results:
    """The tables of one run, import or verdicts table, and which of their columns are axes.

    ``verdicts`` has one row per universe x system x case x replicate;
    ``criteria`` (runs and ASSERT imports) one per judgment x sample x
    criterion; ``rates`` one per universe x system x subgroup, as stored (never shown: ``rate_table()`` recounts
    it from the verdicts). ``axes`` are the columns constant inside a universe, ``factors`` the design
    factors that vary inside one (e.g. behavior); ``primary`` is the
    pre-registered universe's id, or None. ``manifest`` is the run's or
    import's :class:`~multiverse.tables.Manifest` (a mapping given here is
    read as ``manifest.json`` holds it), or None for a bare table or tables
    put together by hand. ``source`` is the directory or table file the
    results came from (or were written to). :meth:`from_manifest` builds the
    results of a run or import folder.
    """

    verdicts: pd.DataFrame
    criteria: pd.DataFrame | None = None
    rates: pd.DataFrame | None = None
    axes: list[str] = field(default_factory=list)
    factors: list[str] = field(default_factory=list)
    manifest: Manifest | None = None
    primary: str | None = None
    source: Path | None = None
    _cache: dict[Any, Any] = field(default_factory=dict, init=False, repr=False)

    def __init__(self, verdicts: pd.DataFrame, criteria: pd.DataFrame | None = None, rates: pd.DataFrame | None = None,
                 axes: Sequence[str] = (), factors: Sequence[str] = (),
                 manifest: Manifest | Mapping[str, Any] | None = None, primary: str | None = None,
                 source: str | os.PathLike[str] | None = None) -> None:
        self._cache = {}
        self.verdicts, self.criteria, self.rates = verdicts, criteria, rates
        self.axes, self.factors = list(axes), list(factors)
        # An empty mapping states nothing: the tables are then told apart as a bare table's are.
        self.manifest = Manifest.from_document(manifest) if manifest else None
        self.primary = primary
        self.source = None if source is None else Path(source)
        self._settle()

    @classmethod
    def from_manifest(cls, manifest: Manifest | Mapping[str, Any], *, verdicts: pd.DataFrame,
                      criteria: pd.DataFrame | None = None, rates: pd.DataFrame | None = None,
                      source: str | os.PathLike[str] | None = None) -> Results:
        """The results of a run or import folder (``source``; None: a run not written): axes, factors and
        primary as its manifest lists them. ``load_run``, ``run`` and the importers build their results here."""
        manifest = Manifest.from_document(manifest)
        return cls(verdicts=verdicts, criteria=criteria, rates=rates, axes=manifest.axes, factors=manifest.factors,
                   manifest=manifest, primary=manifest.primary, source=source)

    def _settle(self) -> None:
        # Check the verdicts and settle who is who: axes, factors, universe ids and the primary.
        missing = [c for c in _REQUIRED if c not in self.verdicts.columns]
        if missing:
            raise InputError(f"verdicts: {', '.join(missing)}: expected column(s) to be present")
        columns = set(self.verdicts.columns)
        axes = [a for a in self.axes if a in columns]
        factors = [f for f in self.factors if f in columns]
        more: list[str] = []
        if self.manifest is None:
            # Tables built by hand may still list a design factor (e.g. behavior) among the axes; a run's
            # or an import's manifest already tells them apart (and the check costs a pass over every row).
            axes, more = split_factors(self.verdicts, axes)
        self.axes, self.factors = axes, factors + more
        v = self.verdicts
        if "universe_id" not in columns:
            v = v.assign(universe_id=universe_ids(v, self.axes).to_numpy())
        # Ids and system names as text, so a table that stored them as numbers reads the same everywhere.
        text = {c: v[c].astype(str) for c in ("universe_id", "system") if not is_text(v[c])}
        v = v.assign(**text) if text else v
        if self.scales.scored:
            # What each row contributes to its universe's rate, read by every analysis (analysis.estimates).
            from multiverse.analysis import with_contributions

            v = with_contributions(v, self.scale, self.scoring_choices(), folder=self.out_dir)
        self.verdicts = v
        # A primary the verdicts do not hold cannot be singled out: no universe stands in for it.
        if self.primary is not None:
            self.primary = str(self.primary) if holds(self.verdicts["universe_id"], str(self.primary)) else None

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
        return list(self.manifest.warnings) if self.manifest is not None else []

    @property
    def name(self) -> str:
        spec = self.manifest.spec if self.manifest is not None else None
        return str(spec or (self.source.name if self.source is not None else "audit"))

    @property
    def rate_direction(self) -> str:
        """How figures, tables and pages read a rate (``core.orient``): :meth:`read_as`'s choice, else the run's
        ``report.rate`` (its spec.yaml's), else an import's (its manifest's ``rate``), else compliance."""
        spec = None if self.__dict__.get("_rate") else self.resolved_spec
        stated = spec.document.report.rate if spec and spec.document.report else getattr(self.manifest, "rate", None)
        return self.__dict__.get("_rate") or stated or "compliance"

    def read_as(self, direction: str | None) -> Results:
        """These results with rates read as ``direction`` (None: as the run's spec says); returns ``self``."""
        from multiverse.core import check_rate_direction

        self._rate = None if direction is None else check_rate_direction(direction)
        return self

    @property
    def simulated(self) -> bool:
        return self.manifest is not None and self.manifest.simulated

    @property
    def resolved_spec(self) -> ResolvedSpec | None:
        """The resolved spec a run wrote to its folder (``spec.yaml``), or None (an import, a table, a run not written).

        Read once, on first use, by the folder's one reader (``tables.read_spec``), which checks it again:
        a spec.yaml that changed since ``load_run`` is refused, not trusted.
        """
        def read() -> ResolvedSpec | None:
            from multiverse.tables import read_spec

            folder = self.out_dir
            return read_spec(folder) if folder is not None else None
        return cast("ResolvedSpec | None", self._memo(("resolved_spec",), read))

    @property
    def scale(self) -> ScaleRecord:
        """The folder's (base spec's) scale: the manifest's, else the run's spec's, else binary (no scores)."""
        return self.scales.base

    @property
    def scales(self) -> FolderScales:
        """The folder's scale and each universe's own, where an axis over ``judge.scale`` gave it one."""
        def find() -> FolderScales:
            spec = self.resolved_spec  # the manifest's scale first; the spec's axes say who has a scale of its own
            return folder_scales(self.manifest, spec.document if spec is not None else None,
                                 folder / "manifest.json" if (folder := self.out_dir) is not None else "manifest.json")
        return cast("FolderScales", self._memo(("scales",), find))

    def scoring_choices(self) -> pd.DataFrame | None:
        """Each universe's estimator, cut and ties (``analysis.estimates.scoring_choices``); None: no universe reads scores."""
        from multiverse.analysis import scoring_choices

        def compute() -> pd.DataFrame | None:
            spec = self.resolved_spec
            return scoring_choices(self.manifest, spec.document if spec is not None else None)
        return self._memo(("scoring_choices",), compute)

    @property
    def reference(self) -> str | None:
        """A pairwise scale's reference system: compared with, never ranked (None: no reference)."""
        if self.manifest is not None and self.manifest.reference is not None:
            return self.manifest.reference
        return self.scale.reference

    @property
    def systems(self) -> list[str]:
        """The systems, in the order the verdicts first name them."""
        return cast("list[str]", self._memo(("systems",), lambda: [str(s) for s in dict.fromkeys(self.verdicts["system"])]))

    @property
    def universes(self) -> pd.DataFrame:
        """One row per universe: ``universe_id``, the axis columns and a ``label``; the primary first."""
        return self._memo(("universes",), self._universes)

    def _universes(self) -> pd.DataFrame:
        first = self.verdicts.drop_duplicates("universe_id")[["universe_id", *self.axes]].reset_index(drop=True)
        labels = self.universe_labels()
        first["label"] = [
            labels.get(u) or universe_label({a: row[a] for a in self.axes})
            for u, (_, row) in zip(first["universe_id"], first.iterrows())
        ]
        primary = self.primary
        order = ([primary] if primary else []) + [u for u in first["universe_id"] if u != primary]
        return first.set_index("universe_id").loc[order].reset_index()

    def universe_labels(self) -> dict[str, str | None]:
        """The label the manifest gives each universe id (None: none given; a bare table has none)."""
        return {u.id: u.label for u in self.manifest.universes} if self.manifest is not None else {}

    @property
    def options(self) -> dict[str, list[Any]]:
        """Each axis's options in the order the spec (or the manifest) declared them."""
        from multiverse.results._options import declared_options

        def compute() -> dict[str, list[Any]]:
            spec = self.resolved_spec
            return declared_options(self.verdicts, self.axes, self.manifest, spec.document if spec else None)
        return cast("dict[str, list[Any]]", self._memo(("options",), compute))

    def judge_axes(self) -> list[str]:
        """Every axis whose options are judges: ``judge`` and each axis that changes the judge stage."""
        stages = self.manifest.axis_stages if self.manifest is not None else {}
        return [a for a in self.axes if a == "judge" or stages.get(a) == "judge"]

    def judge_axis(self) -> str:
        """The axis whose options are judges: ``judge``, else the first axis that changes the judge stage."""
        judges = self.judge_axes()
        if judges:
            return "judge" if "judge" in judges else judges[0]
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

    def case_matrix(self, systems: Sequence[str] | None = None) -> Any:
        """The ok verdicts counted per system x universe x case (``analysis.curve.CaseMatrix``)."""
        from multiverse.analysis import case_matrix

        key = None if systems is None else tuple(systems)
        return self._memo(("matrix", key), lambda: self._means(case_matrix(self.verdicts, axes=self.axes,
                                                                             systems=systems)))

    def _made_matrix(self) -> Any:
        """``case_matrix()`` when the curve has made it, else None: its cells hold the rates' and case counts'
        numbers, so those are read off it, but it is not made for them (counting the rows is cheaper)."""
        return self._cache.get(("matrix", None))

    def _means(self, matrix: Any) -> Any:
        # A universe whose rate is a mean of scores gets a mean's interval on the curve.
        from dataclasses import replace

        from multiverse.analysis import MEAN_ESTIMATORS

        choices = self.scoring_choices() if self.scales.scored else None
        if choices is None:
            return matrix
        estimator = choices.set_index("universe_id")["estimator"].reindex(matrix.universes["universe_id"].astype(str))
        return replace(matrix, means=estimator.isin(MEAN_ESTIMATORS).to_numpy())

    def ci_settings(self) -> tuple[pd.DataFrame | None, int]:
        """The interval each universe's rates use, as the spec asked (``analysis.rates.ci_settings``)."""
        from multiverse.analysis import ci_settings

        def compute() -> tuple[pd.DataFrame | None, int]:
            spec = self.resolved_spec
            return ci_settings(self.manifest, spec.document if spec is not None else None)
        return cast("tuple[pd.DataFrame | None, int]", self._memo(("ci",), compute))

    def rate_table(self) -> pd.DataFrame:
        """The rates table (overall and per factor level), always recomputed from the verdicts as the folder's
        writer counted it; a stored table is output only (``rates_note`` says when it disagrees)."""
        from multiverse.results._stored_rates import recomputed_rates

        def compute() -> pd.DataFrame:
            rates = recomputed_rates(self)
            return rates.assign(universe_id=rates["universe_id"].astype(str), system=rates["system"].astype(str))
        return self._memo(("rates",), compute)

    def rates_note(self, *, full: bool = True) -> str | None:
        """One line when the stored rates table disagrees with the verdicts, else None (``_stored_rates``)."""
        from multiverse.results._stored_rates import rates_note

        return cast("str | None", self._memo(("rates_note", full), lambda: rates_note(self, full=full)))

    def curve_frame(self, systems: Sequence[str] | None = None) -> pd.DataFrame:
        """The specification curve table: one row per universe x system (``analysis.curve.spec_curve``)."""
        from multiverse.analysis import spec_curve

        def compute() -> pd.DataFrame:
            ci, n_boot = self.ci_settings()  # the interval the spec asked for, per universe
            return spec_curve(self.case_matrix(), axes=self.axes, system=list(systems) if systems else None,
                              primary=self.primary, ci=ci if ci is not None else "wilson", n_boot=n_boot)
        return self._memo(("curve_frame", None if systems is None else tuple(systems)), compute)

    def rate_test(self, system: str, threshold: float, *, boot: int = 1000, seed: int = 0) -> Any:
        """The joint test that ``system``'s rate is ``threshold`` in every universe (``JointTest``): shares under
        the rate null, means of scores under the means' null, a curve of both by Bonferroni over the two
        (``analysis.joint_curve``)."""
        from multiverse.analysis import joint_curve_test

        return self._memo(("rate_test", system, threshold, boot, seed), lambda: joint_curve_test(
            self.case_matrix(), system=system, threshold=threshold, boot=boot, seed=seed))

    def difference_test(self, a: str, b: str, *, boot: int = 1000, seed: int = 0) -> Any:
        """The joint sign-flip test that systems ``a`` and ``b`` are equally compliant in every universe."""
        from multiverse.analysis import joint_difference_test

        return self._memo(("difference_test", a, b, boot, seed), lambda: joint_difference_test(
            self.case_matrix(), a=a, b=b, boot=boot, seed=seed))

    def difference_curve(self, a: str, b: str) -> pd.DataFrame:
        """rate(a) - rate(b) in every universe, on the cases both have (``analysis.curve.difference_curve``)."""
        from multiverse.analysis import difference_curve

        return self._memo(("difference_curve", a, b), lambda: difference_curve(
            self.case_matrix(), axes=self.axes, a=a, b=b, primary=self.primary))

    def system_rates(self) -> pd.DataFrame:
        """One rate per universe x system, over every counted verdict (``analysis.rates.system_rates``)."""
        from multiverse.analysis import rates_of_matrix, system_rates

        def compute() -> pd.DataFrame:
            matrix = self._made_matrix()
            rates = rates_of_matrix(matrix, self.verdicts) if matrix is not None else None
            return rates if rates is not None else system_rates(self.verdicts, axes=self.axes)
        return self._memo(("system_rates",), compute)

    def case_counts(self) -> Any:
        """Counted verdicts per universe x system cell and case, as the ranking's and the variance's case
        resamples read them (``analysis.case_resampling.CaseCounts``; cells in ``system_rates()`` order)."""
        from multiverse.analysis import counts_of_matrix, counts_of_rates

        def compute() -> Any:
            matrix = self._made_matrix()
            counts = counts_of_matrix(matrix, self.verdicts, self.system_rates()) if matrix is not None else None
            return counts if counts is not None else counts_of_rates(self.verdicts, self.axes, self.system_rates())
        return self._memo(("case_counts",), compute)

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
        return cast("CurveAnalysis", self._memo(key, lambda: _results_analyses.curve(self, systems=systems, threshold=threshold, diff=diff,
                                                        boot=boot, seed=seed)))

    @overload
    def agreement(self, axis: str | None = None, *, by: None = None) -> Analysis[AgreementDocument]: ...
    @overload
    def agreement(self, axis: str | None = None, *, by: str) -> Analysis[GroupedDocument]: ...  # type: ignore[type-arg]
    def agreement(self, axis: str | None = None, *, by: str | None = None) -> Analysis[Any]:
        """Agreement between the options of ``axis`` (default: the judge axis) on the same units; ``by``: one
        agreement per value of that axis, design factor or ``system`` (``results._grouped``)."""
        from multiverse.results import _grouped

        axis = axis or self.judge_axis()
        self.check_axes([axis])
        return cast("Analysis[Any]", self._memo(("agreement", axis, by), lambda: _grouped.agreement(self, axis, by)))

    @overload
    def ranking(self, *, axes: Sequence[str] | None = None, boot: int = 1000, method: Literal["rate"] = "rate",
                anchor: None = None, prior: float = 0.0, seed: int = 0, by: None = None) -> Analysis[RankingDocument]: ...
    @overload
    def ranking(self, *, axes: Sequence[str] | None = None, boot: int = 1000, method: str = "rate",
                anchor: str | None = None, prior: float = 0.0, seed: int = 0, by: str | None = None) -> Analysis[Any]: ...
    def ranking(self, *, axes: Sequence[str] | None = None, boot: int = 1000, method: str = "rate",
                anchor: str | None = None, prior: float = 0.0, seed: int = 0, by: str | None = None) -> Analysis[Any]:
        """How stable the ranking of systems is across universes (``axes``: only these in the per-axis summary);
        ``method="bt"``: of Bradley-Terry scores, ``anchor`` at 0, ``prior`` tied games (``analysis.bradley_terry``);
        ``by``: one ranking per value of an axis or design factor (``results._grouped``)."""
        from multiverse.results import _grouped

        axes = self.check_axes(axes)
        key = ("ranking", None if axes is None else tuple(axes), boot, method, anchor, prior, seed, by)
        return cast("Analysis[Any]", self._memo(key, lambda: _grouped.ranking(self, axes, boot, method, anchor, prior, seed, by)))

    def variance(self, *, axes: Sequence[str] | None = None) -> Analysis[VarianceDocument]:
        """The share of rate variance due to each axis; ``axes`` limits what is reported (not the model)."""
        from multiverse.results import _analyses as _results_analyses

        axes = self.check_axes(axes)
        return cast("Analysis[VarianceDocument]", self._memo(("variance", None if axes is None else tuple(axes)),
                          lambda: _results_analyses.variance(self, axes)))

    def power(self, *, baseline_rate: float = 0.8, alpha: float = 0.05, power: float = 0.8) -> Analysis[PowerDocument]:
        """Detectable differences at this run's cases per system and universe (``analysis.power``)."""
        from multiverse.results import _analyses as _results_analyses

        return cast("Analysis[PowerDocument]", self._memo(("power", baseline_rate, alpha, power),
                          lambda: _results_analyses.power(self, baseline_rate, alpha, power)))

    @overload
    def calibrate(self, human: str | os.PathLike[str] | pd.DataFrame, *, alpha: float = 0.05, by: None = None) -> CalibrationAnalysis: ...
    @overload
    def calibrate(self, human: str | os.PathLike[str] | pd.DataFrame, *, alpha: float = 0.05,
                  by: str) -> Analysis[GroupedDocument]: ...  # type: ignore[type-arg]
    def calibrate(self, human: str | os.PathLike[str] | pd.DataFrame, *, alpha: float = 0.05,
                  by: str | None = None) -> Analysis[Any]:
        """Every universe x system rate anchored to human labels (PPI++), and each judge's accuracy against them.

        ``human``: a CSV or parquet file (or a DataFrame) with ``system``, ``case_id``, ``compliant`` (0/1,
        true/false; blank = not labelled yet) and, where those do not name one transcript, ``replicate`` or
        ``transcript_key``. A sheet that names its sample must be that sample of this run
        (``labelling.check_sheet``). ``frame``: one row per universe x system; ``judges`` one per universe.
        ``by``: one calibration per value of an axis, design factor or ``system`` (``results._grouped``).
        """
        from multiverse.results import _anchoring as _results_anchoring

        if by is not None:
            return _results_anchoring.grouped_calibration(self, human, alpha, by)
        key = _results_anchoring.human_key(human)
        if key is None:
            return _results_anchoring.calibrate(self, human, alpha)
        return cast("CalibrationAnalysis", self._memo(("calibrate", key, alpha), lambda: _results_anchoring.calibrate(self, human, alpha)))

    def anchored_curve(self, human: str | os.PathLike[str] | pd.DataFrame, *, alpha: float = 0.05,
                       systems: Sequence[str] | None = None) -> Analysis[AnchoredCurveDocument]:
        """The specification curve of the human-anchored rates (of ``systems``, default all); its figure draws it
        beside the judge-raw curve."""
        from multiverse.results import _anchoring as _results_anchoring

        return _results_anchoring.anchored_curve(self, self.calibrate(human, alpha=alpha),
                                                 None if systems is None else list(systems))

    def anchored_ranking(self, human: str | os.PathLike[str] | pd.DataFrame, *,
                         alpha: float = 0.05) -> Analysis[AnchoredRankingDocument]:
        """Per universe, whether the ranking of systems survives anchoring the rates to human labels."""
        from multiverse.results import _anchoring as _results_anchoring

        return _results_anchoring.anchored_ranking(self, self.calibrate(human, alpha=alpha))

    # -- notebooks --------------------------------------------------------------------

    def _repr_html_(self) -> str:
        from multiverse.results._analysis import _SHOWN_UNIVERSES, results_html

        return results_html(self, shown=_SHOWN_UNIVERSES)

    def __repr__(self) -> str:
        return (f"Results({self.name!r}, universes={self.verdicts['universe_id'].nunique()}, "
                f"systems={len(self.systems)}, axes={self.axes}, primary={self.primary!r})")

    def _memo(self, key: Hashable, compute: Callable[[], Any]) -> Any:
        if key not in self._cache:
            self._cache[key] = compute()
        return self._cache[key]
