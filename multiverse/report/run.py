"""The run as the report sees it, prepared once: tables, axes, systems, universes, store.

``_prepare`` checks the verdicts table, tells axes from design factors, orders
the universes (primary first) and opens the store that holds the transcripts.
The resulting ``_Run`` is what every section takes; the analyses that several
sections share (the case matrix, the specification curve, the rates) are
computed on first use and kept.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pandas as pd

from ..errors import InputError
from ..option_order import declared_options
from ..tables import RunTables, split_factors, universe_ids

__all__ = ["_Run", "_prepare"]


@dataclass
class _Run:
    """What every section needs: the tables, who is who, and the analyses' shared inputs."""

    tables: RunTables
    verdicts: pd.DataFrame
    axes: list[str]
    factors: list[str]
    systems: list[str]
    universes: pd.DataFrame  # universe_id, label, axis columns, in report order (primary first)
    primary: str | None  # None: the source declares no primary universe, and none stands in for it
    primary_declared: bool
    store: Any
    store_note: str
    threshold: float | None  # None: each system's null rate is its own rate in the primary universe
    tests: bool  # False: no joint tests, so no null bands and no p-values
    options: dict  # axis -> options in declared order
    cache: dict = field(default_factory=dict)

    def label(self, universe_id: str) -> str:
        if "labels" not in self.cache:
            self.cache["labels"] = dict(zip(self.universes["universe_id"], self.universes["label"]))
        return str(self.cache["labels"].get(universe_id, universe_id))

    def memo(self, name: str, compute: Callable[[], Any]) -> Any:
        if name not in self.cache:
            self.cache[name] = compute()
        return self.cache[name]

    @property
    def matrix(self):
        from ..analysis.curve import case_matrix

        return self.memo("matrix", lambda: case_matrix(self.verdicts, axes=self.axes, systems=self.systems_ok))

    @property
    def systems_ok(self) -> list[str]:
        """Systems with at least one counted verdict, in report order."""
        from ..analysis.rates import included_verdicts

        def compute():
            seen = set(included_verdicts(self.verdicts, axes=self.axes)["system"])
            return [s for s in self.systems if s in seen]
        return self.memo("systems_ok", compute)

    @property
    def curve(self) -> pd.DataFrame:
        from ..analysis.curve import spec_curve
        from ..analysis.rates import run_ci_settings

        def compute():
            ci, n_boot = run_ci_settings(self.tables)  # the interval the spec asked for
            return spec_curve(self.matrix, axes=self.axes, primary=self.primary,
                              ci=ci if ci is not None else "wilson", n_boot=n_boot)
        return self.memo("curve", compute)

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
    def difference_test(self):
        """The joint test that the top two systems are equally compliant (None when tests are off)."""
        from ..analysis.inference import joint_difference_test

        if not self.tests or not self.top_two:
            return None
        a, b = self.top_two
        return self.memo("difference_test", lambda: joint_difference_test(self.matrix, a=a, b=b))

    def null_rate(self, system: str) -> tuple[float | None, str]:
        """The rate the joint test of ``system`` holds fixed in every universe, or None and why there is none."""
        if self.threshold is not None:
            return self.threshold, ""
        row = self.curve[(self.curve["system"] == system) & (self.curve["universe_id"] == self.primary)]
        if row.empty:
            return None, "it has no counted verdict in the primary universe"
        rate = float(row["rate"].iloc[0])
        if not 0 < rate < 1:
            # A rate of 0 or 1 has no sampling spread: every resample would sit on it.
            return None, f"its primary rate is {rate:g}, which leaves the null no sampling spread"
        return rate, ""

    @property
    def rate_tests(self) -> tuple[dict, list[str]]:
        """Per system, the joint test of its null rate in every universe; and a note per system not tested."""
        from ..analysis.inference import joint_rate_test

        def compute():
            tests, skipped = {}, []
            if not self.tests:
                return tests, skipped
            for system in self.systems_ok:
                rate, why = self.null_rate(system)
                if rate is None:
                    skipped.append(f"{system}: no joint test, as {why}.")
                else:
                    tests[system] = joint_rate_test(self.matrix, system=system, threshold=rate)
            return tests, skipped
        return self.memo("rate_tests", compute)

    @property
    def system_rates(self) -> pd.DataFrame:
        from ..analysis.rates import system_rates

        return self.memo("system_rates", lambda: system_rates(self.verdicts, axes=self.axes))

    @property
    def rates(self) -> pd.DataFrame:
        """The rates table (overall and per factor level); computed when the source has none."""
        def compute():
            if self.tables.rates is not None and len(self.tables.rates):
                rates = self.tables.rates
            else:
                from ..analysis.rates import compute_rates

                rates = compute_rates(self.verdicts, axes=self.axes, factors=self.factors)
            return rates.assign(universe_id=rates["universe_id"].astype(str), system=rates["system"].astype(str))
        return self.memo("rates", compute)


def _prepare(tables: RunTables, store: Any, threshold: float | None, tests: bool) -> _Run:
    if threshold is not None and not (isinstance(threshold, (int, float)) and 0 < threshold < 1):
        raise InputError(f"threshold: expected a rate strictly between 0 and 1, got {threshold!r}")
    verdicts = tables.verdicts
    missing = [c for c in ("system", "case_id", "compliant") if c not in verdicts.columns]
    if missing:
        raise InputError(f"verdicts: {', '.join(missing)}: expected column(s) to be present")
    axes = [a for a in tables.axes if a in verdicts.columns]
    factors = [f for f in tables.factors if f in verdicts.columns]
    # Tables built by hand may still list a design factor (e.g. behavior) among the axes.
    axes, more_factors = split_factors(verdicts, axes)
    factors += more_factors
    if "universe_id" not in verdicts.columns:
        verdicts = verdicts.assign(universe_id=universe_ids(verdicts, axes).to_numpy())
    # Ids and system names as text, so a table that stored them as numbers reads the same everywhere.
    verdicts = verdicts.assign(universe_id=verdicts["universe_id"].astype(str), system=verdicts["system"].astype(str))
    systems = [str(s) for s in dict.fromkeys(verdicts["system"])]

    first = verdicts.drop_duplicates("universe_id")[["universe_id", *axes]].reset_index(drop=True)
    labels = {}
    for entry in tables.manifest.get("universes", []):
        if isinstance(entry, dict) and "id" in entry:
            labels[str(entry["id"])] = entry.get("label")
    first["label"] = [
        labels.get(u) or (" · ".join(f"{a}={row[a]}" for a in axes) if axes else u)
        for u, (_, row) in zip(first["universe_id"], first.iterrows())
    ]
    primary = tables.primary if tables.primary in set(first["universe_id"]) else None
    declared = primary is not None
    order = ([primary] if primary else []) + [u for u in first["universe_id"] if u != primary]
    universes = first.set_index("universe_id").loc[order].reset_index()
    store_obj, note = _open_store(tables, store)
    options = declared_options(replace(tables, verdicts=verdicts), axes)
    return _Run(tables, verdicts, axes, factors, systems, universes, primary, declared, store_obj, note, threshold,
                bool(tests), options)


def _open_store(tables: RunTables, store: Any) -> tuple[Any, str]:
    from ..store import Store

    if store is not None and not isinstance(store, (str, os.PathLike)):
        return store, ""
    candidates = []
    if store is not None:
        candidates.append(Path(store))
    elif tables.manifest.get("store"):
        recorded = Path(tables.manifest["store"])
        candidates.append(recorded)
        if not recorded.is_absolute() and tables.source is not None:
            candidates.append(tables.source / recorded)
    for root in candidates:
        if root.is_dir():
            return Store(root), ""
    if candidates:
        return None, f"the store ({candidates[0]}) is not available here"
    return None, "this source has no store (imported data or a bare table)"
