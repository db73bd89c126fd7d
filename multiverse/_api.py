"""The public functions that join rooms: a report or a labelling sheet of loaded results.

They sit above the results, the report and the labelling, so none of those
needs to know the others: ``Results`` holds tables and analyses, the report
draws a page of them, and the labelling draws a sample of them.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from multiverse.spec import Spec, Universe, UniverseCount

if TYPE_CHECKING:
    # Imported where used: validating, expanding or counting a spec needs neither pandas nor the
    # results (1 s of start-up here).
    from multiverse.results import Analysis, PowerDocument, Results
    from multiverse.store import GcReport, Migration, StoreStats

__all__ = ["Validation", "count_universes", "label", "power", "report", "store_gc", "store_migrate", "store_stats", "validate"]


def report(results: Results | str | os.PathLike[str], path: str | os.PathLike[str] | None = None, *, store: Any = None,
           threshold: float | None = None, tests: bool = True, progress: bool | None = None,
           human: Any = None, baseline: Any = None, rate: str | None = None) -> Path:
    """Write the self-contained HTML report of ``results``; return its path.

    ``results`` is a :class:`Results` or the path of a run, an import or a
    verdicts table. The default output is ``report.html`` beside the source.
    The page is the explorer (the interactive curve, universes, transcripts
    and the judges' rationales) with every analysis under it as static figures
    and tables. ``store``: a store to show transcripts from (a folder's own
    ``transcripts.jsonl`` otherwise); ``threshold``: the rate the joint tests
    test against; ``tests=False`` skips the resampling tests; ``human``:
    human labels, as :meth:`Results.calibrate` takes them, which add the
    section "Anchored to people"; ``baseline``: an earlier run of the same
    design (a path or :class:`Results`), which adds the section "Compared
    with the baseline" (what ``multiverse.gate.diff`` finds). ``rate``
    (``compliance`` or ``violation``) is which way every figure, table and
    the explorer read the rates, in place of the run's ``report.rate``
    (compliance for an import or a table); ``threshold`` is then read that
    way too (a violation rate of 0.3 tests a compliance rate of 0.7).
    """
    from multiverse.core import orient
    from multiverse.reporting import write_results_report
    from multiverse.results import Results, load_run

    loaded = results if isinstance(results, Results) else load_run(results)
    if rate is not None:
        loaded.read_as(rate)
    if threshold is not None:
        threshold = float(orient(threshold, loaded.rate_direction))  # the flip is its own inverse
    return write_results_report(loaded, path, store=store, threshold=threshold, tests=tests, progress=progress,
                                human=human, baseline=baseline)


def label(source: str | os.PathLike[str], n: int, out: str | os.PathLike[str], *, seed: int = 0,
          force: bool = False, blind_systems: bool = False, rate: str | None = None) -> tuple[Path, Path, list[str]]:
    """Draw ``n`` transcripts per system and rollout configuration for people to label.

    Writes the sheet (``out``, a ``.csv``) and its page (the same name,
    ``.html``) and returns (csv path, html path, notes). The sheet's name is
    checked before the run is read; an existing sheet is replaced only with
    ``force=True``, since people may have typed labels into it. A scored
    run's sheet asks for a score on the judge's scale. ``blind_systems=True``
    hides the systems' names on the page (blind labelling of systems as well
    as of judges); the sheet keeps them. ``rate`` (``compliance`` or
    ``violation``; None: the run's ``report.rate``) words the page's
    pass/fail question; the sheet's ``compliant`` column means the same either way.
    """
    from multiverse.labelling import check_sheet_places, label_results
    from multiverse.results import load_run

    out_csv = check_sheet_places(source, out, force=force)
    return label_results(load_run(source).read_as(rate), n, out_csv, seed=seed, blind_systems=blind_systems)


def power(spec: Spec, *, baseline_rate: float = 0.8, alpha: float = 0.05, power: float = 0.8,
          human: int | None = None) -> Analysis[PowerDocument]:
    """Design power at the cases ``spec`` plans, before anything runs, as ``Results.power`` gives it for a run.

    The smallest difference between two rates the planned cases can detect,
    and the cases a difference would need (``analysis.design_power`` at the
    spec's transcripts per system and universe, and at its smallest design
    cell): an ``Analysis`` whose ``document`` is a ``PowerDocument`` and whose
    ``frame`` has a row per comparison. ``human``: plan that many human labels
    per system too; the document then has a ``human`` key.
    """
    from multiverse.analysis import design_power, human_power
    from multiverse.results import Analysis, PowerDocument, rows_frame
    from multiverse.spec import planned_cases

    cases, per_cell = planned_cases(spec)
    document = design_power(cases=cases, cases_per_cell=per_cell, baseline_rate=baseline_rate, alpha=alpha, power=power)
    if human is not None:
        document["human"] = human_power(labels=human, transcripts=cases, baseline_rate=baseline_rate, alpha=alpha)
    typed = PowerDocument.model_validate(document)
    return Analysis("power", document, rows_frame(typed.comparisons), model=typed)


@dataclass(frozen=True)
class Validation:
    """A spec that loaded and expanded: its universes, and what a user should know before running it."""

    spec: Spec
    universes: list[Universe]
    warnings: list[str]

    @property
    def primary(self) -> Universe | None:
        return next((u for u in self.universes if u.is_primary), None)


def validate(path: str | os.PathLike[str]) -> Validation:
    """Load, check and expand the spec at ``path``, before anything is planned or paid.

    Raises ``SpecError`` with every problem (file, YAML path and line, what was
    expected). ``warnings``: for instance, sim/ models asked to rate rubric
    criteria their simulated world has no behaviour for.
    """
    from multiverse.sim import unknown_criteria_note
    from multiverse.spec import expand, load_spec

    spec = load_spec(path)
    note = unknown_criteria_note(spec)
    return Validation(spec, expand(spec), [note] if note else [])


def count_universes(spec: Spec | str | os.PathLike[str]) -> UniverseCount:
    """How many universes the spec's grid makes, counted without listing them (any size, even past a run's cap)."""
    from multiverse.spec import load_spec, universe_count

    return universe_count(spec if isinstance(spec, Spec) else load_spec(spec, cap_universes=False))


def store_stats(where: str | os.PathLike[str] | None = None, *, store: str | os.PathLike[str] | None = None) -> StoreStats:
    """What the store holds, per stage: the store a spec (beside it) or a run folder (its manifest's) uses.

    ``store`` names a store outright; with neither, the default store of a
    spec without a file of its own.
    """
    from multiverse.store import store_of
    from multiverse.store import store_stats as stats
    from multiverse.tables import read_manifest

    return stats(store_of([where] if where is not None else [], store, manifest_of=read_manifest))


def store_migrate(where: str | os.PathLike[str] | None = None, *, store: str | os.PathLike[str] | None = None) -> Migration:
    """Move the entry files of a store from before the database into it: the store a spec (beside it) or
    a run folder (its manifest's) uses; ``store`` names it outright."""
    from multiverse.store import migrate_store, store_of
    from multiverse.tables import read_manifest

    return migrate_store(store_of([where] if where is not None else [], store, manifest_of=read_manifest))


def store_gc(specs: list[str | os.PathLike[str]], *, store: str | os.PathLike[str] | None = None,
             dry_run: bool = False) -> GcReport:
    """Remove from the store every entry none of ``specs`` references (their rubric, cases, rollouts, judgments).

    The store is the one those specs use (``store`` names it outright).
    Recent entries and those of live runs are kept; ``dry_run`` counts what
    would go without removing it.
    """
    from multiverse.spec import load_spec
    from multiverse.store import store_gc as gc
    from multiverse.store import store_of
    from multiverse.tables import read_manifest
    from multiverse.work import referenced_keys

    root = store_of(list(specs), store, manifest_of=read_manifest)
    return gc(root, (referenced_keys(load_spec(path)) for path in specs), dry_run=dry_run)
