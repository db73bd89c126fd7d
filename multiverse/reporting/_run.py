"""The run as the report sees it: the results, plus the report's own choices (transcripts, null rates, tests).

``_prepare`` checks the report's options and reads the transcripts the page
shows (``multiverse.tables._folder.shown_transcripts``: the folder's own
``transcripts.jsonl``, else a store the caller names). Everything about the run itself (axes, factors, systems, the
ordered universes, the analyses and their caches) comes from the one
:class:`multiverse.results._results.Results`; ``_Run`` only adds which systems have a
counted verdict, the null rate each joint test holds fixed, and the top two
systems.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, cast

import pandas as pd

from multiverse.results import Results

from ..errors import InputError

__all__ = ["_Run", "_prepare"]


@dataclass
class _Run:
    """What every section needs: the results, the transcripts shown, and the report's null and test choices."""

    tables: Results
    transcripts: dict[str, dict[str, Any]] | None  # key -> record (``folder.shown_transcripts``); None: none to show
    transcripts_note: str  # why there are none, when None
    threshold: float | None  # None: each system's null rate is its own rate in the primary universe
    tests: bool  # False: no joint tests, so no null bands and no p-values
    cache: dict[str, Any] = field(default_factory=dict)
    human: Any = None  # human labels (a file or a table): adds the section "Anchored to people"
    comparison: Any = None  # the run against a baseline (``gate.Diff``): adds the section "Compared with the baseline"

    @property
    def read(self) -> str:
        """Which way every section reads a rate (``compliance`` or ``violation``; ``core.orient`` flips)."""
        return self.tables.rate_direction

    @property
    def verdicts(self) -> pd.DataFrame:
        return self.tables.verdicts

    @property
    def axes(self) -> list[str]:
        return self.tables.axes

    @property
    def factors(self) -> list[str]:
        return self.tables.factors

    @property
    def systems(self) -> list[str]:
        return self.tables.systems

    @property
    def universes(self) -> pd.DataFrame:
        """universe_id, label and the axis columns, in report order (primary first)."""
        return self.tables.universes

    @property
    def primary(self) -> str | None:
        """None: the source declares no primary universe, and none stands in for it."""
        return self.tables.primary

    @property
    def options(self) -> dict[str, Any]:
        return self.tables.options

    def label(self, universe_id: str) -> str:
        if "labels" not in self.cache:
            self.cache["labels"] = dict(zip(self.universes["universe_id"], self.universes["label"]))
        return str(self.cache["labels"].get(universe_id, universe_id))

    def memo(self, name: str, compute: Callable[[], Any]) -> Any:
        if name not in self.cache:
            self.cache[name] = compute()
        return self.cache[name]

    @property
    def matrix(self) -> Any:
        return self.tables.case_matrix()

    @property
    def systems_ok(self) -> list[str]:
        """Systems with at least one counted verdict, in report order."""
        from multiverse.analysis import included_verdicts

        def compute() -> list[str]:
            seen = set(included_verdicts(self.verdicts, axes=self.axes)["system"])
            return [s for s in self.systems if s in seen]
        return cast("list[str]", self.memo("systems_ok", compute))

    @property
    def curve(self) -> pd.DataFrame:
        return self.tables.curve_frame(self.systems_ok)

    @property
    def top_two(self) -> tuple[str, str] | None:
        """The two systems with the highest rates in the primary universe (without one: the highest median rates)."""
        if self.primary is None:
            medians = self.curve.groupby("system", sort=False)["rate"].median().dropna()
            names = list(medians.sort_values(ascending=False, kind="stable").index)
        else:
            at_primary = self.curve[self.curve["universe_id"] == self.primary]
            names = list(at_primary.sort_values("rate", ascending=False, kind="stable")["system"])
        return (names[0], names[1]) if len(names) >= 2 else None

    @property
    def difference_test(self) -> Any:
        """The joint test that the top two systems are equally compliant (None when tests are off)."""
        if not self.tests or not self.top_two:
            return None
        return self.tables.difference_test(*self.top_two)

    def null_rate(self, system: str) -> tuple[float | None, str]:
        """The rate the joint test of ``system`` holds fixed in every universe, or None and why there is none."""
        from multiverse.results import primary_null

        if self.threshold is not None:
            return self.threshold, ""
        return primary_null(self.curve, system, self.primary)

    @property
    def rate_tests(self) -> tuple[dict[str, Any], list[str]]:
        """Per system, the joint test of its null rate in every universe; and a note per system not tested."""
        def compute() -> tuple[dict[str, Any], list[str]]:
            tests: dict[str, Any] = {}
            skipped: list[str] = []
            if not self.tests:
                return tests, skipped
            for system in self.systems_ok:
                rate, why = self.null_rate(system)
                if rate is None:
                    skipped.append(f"{system}: no joint test, as {why}.")
                else:
                    tests[system] = self.tables.rate_test(system, rate)
            return tests, skipped
        return cast("tuple[dict[str, Any], list[str]]", self.memo("rate_tests", compute))

    @property
    def system_rates(self) -> pd.DataFrame:
        return self.tables.system_rates()

    @property
    def rates(self) -> pd.DataFrame:
        """The rates table (overall and per factor level); computed when the source has none."""
        return self.tables.rate_table()


def _prepare(results: Results, store: Any, threshold: float | None, tests: bool, human: Any = None,
             baseline: Any = None) -> _Run:
    if threshold is not None and not (isinstance(threshold, (int, float)) and 0 < threshold < 1):
        raise InputError(f"threshold: expected a rate strictly between 0 and 1, got {threshold!r}", param="threshold")
    # The one rule of which transcripts a page shows (never a store the manifest names). It reads the
    # folder's transcripts.jsonl before any section runs, so a line that is not a transcript is refused first.
    from multiverse.tables import shown_transcripts

    transcripts, note = shown_transcripts(results.source, results.verdicts, store)
    if human is not None:
        # Bad labels are refused before any section runs (the section would only say it could not be
        # computed); the calibration is cached on the results for the section.
        results.calibrate(human)
    comparison = None
    if baseline is not None:
        # Compared first, like the labels: a baseline of another design is refused before any section runs.
        from multiverse.gate import diff

        comparison = diff(baseline, results)
    return _Run(results, transcripts, note, threshold, bool(tests), human=human, comparison=comparison)
