"""Counted verdicts -> rates: the one path from a verdicts table to rates.

A *rate* is the share of compliant transcripts among the included ones, per
universe x system, overall and per design-factor level, with a confidence
interval (:func:`compute_rates`, the ``rates`` table of a run or an import).

Estimators (``vocabulary.ESTIMATORS``) and intervals (``vocabulary.CI_METHODS``) for :func:`compute_rates`:

``pooled`` (default)
    unweighted share of compliant transcripts among included ones. Its ``wilson``
    interval is statsmodels' Wilson score interval on (n_compliant, n).
``cell_balanced``
    the mean of per-cell rates, a cell being one combination of all design factors
    (cells with no included transcript are left out of the mean). This is the rate a
    balanced allocation would report when exclusions unbalance the cells. Its
    ``wilson`` interval is the Wilson score interval at the cell-balanced rate with
    Kish's effective sample size ``n_eff = C**2 / sum_c(1 / n_c)`` for C cells of
    n_c included transcripts (the weighting's design effect). It equals the pooled
    Wilson interval when cells are balanced, and unlike the stratified Wald interval
    it does not collapse to zero width when every cell sits at 0 or 1.
``bootstrap`` (either estimator)
    cluster bootstrap over cases: each replicate draws case ids with replacement (the
    same draw for every universe and system, so paired comparisons stay paired) and
    keeps all rows of a drawn case together, replicates included; the interval is the
    percentile interval of the replicate rates, widened to contain the ``wilson``
    interval (a percentile interval over a few dozen cases is too narrow, and a cell
    where no case varies would give a single point).

Clustering: when the table has ``case_id``, every ``wilson`` interval uses Kish's
effective sample size divided by the design effect of the case clusters,
``1 + (m - 1) * icc`` (:mod:`multiverse.analysis._kernel`), with the intra-case
correlation estimated once per universe x system (pooled over all of them when
one's own is not estimable) and reused for its subgroups. With one transcript per
case the design effect is 1 and the intervals are unchanged.

Two table helpers every analysis of a verdicts table shares:

- ``included_verdicts``: the verdict rows that count towards rates (status
  ``ok``, a label present), with a ``universe_id`` and a bool ``compliant``
  (scored verdicts: the float ``contribution`` of :mod:`.estimates` as ``compliant``);
- ``system_rates``: the universe x system rates table (n, n_compliant, rate).
Ranking, variance and agreement start from these, so a row counts alike in all.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import pandas as pd

from multiverse.core import (
    CI_METHODS,
    ESTIMATORS,
    RATE_VALUE_COLUMNS,
    SCORE_ESTIMATORS,
    SCORE_RATE_COLUMNS,
    counted_rows,
)
from multiverse.errors import InputError
from multiverse.tables import check_choice, require_columns, universe_ids

from .._kernel import (
    CONTRIBUTION,
    codes,
    codes_and_first_rows,
    combine,
    count,
    first_rows,
    included_rows,
    included_verdicts,
    require_verdict_columns,
    sorted_codes,
    target_blocks,
)

if TYPE_CHECKING:
    from multiverse.tables import Manifest, ScaleRecord, SpecDocument

__all__ = ["ci_settings", "compute_rates", "included_rows", "included_verdicts", "require_verdict_columns", "system_rates"]

def system_rates(verdicts: pd.DataFrame, *, axes: Sequence[str]) -> pd.DataFrame:
    """Rates per universe x system: universe_id, axes..., system, n, n_compliant, rate.

    Rows keep the order in which universes and systems first appear.
    """
    axes = list(axes)
    require_verdict_columns(verdicts, axes)
    # Only the columns a rate needs: the rest of a big table is never copied, and the axes (one
    # option per universe) are read at each universe's first counted row only.
    by_id = "universe_id" in verdicts.columns
    needed = [c for c in ("universe_id", "status", "system", "case_id", "compliant", CONTRIBUTION,
                          *([] if by_id else axes)) if c in verdicts.columns]
    included = included_verdicts(verdicts[list(dict.fromkeys(needed))], axes=[] if by_id else axes)
    universe, n_universes, first = codes_and_first_rows(included["universe_id"])
    system, n_systems, first_system = codes_and_first_rows(included["system"])
    # The values in order of first appearance, with their dtype, as factorize's uniques.
    universes = pd.Index(included["universe_id"].iloc[first])
    systems = pd.Index(included["system"].iloc[first_system])
    cell = combine(universe, n_systems, system)
    del universe, system
    n = count(cell, np.ones(len(cell), dtype=bool), n_universes * n_systems)
    labels = included["compliant"].to_numpy()
    k = count(cell, labels, len(n)) if labels.dtype == bool else np.bincount(cell, weights=labels, minlength=len(n))
    present = pd.unique(cell)  # cells in order of first appearance, like groupby(sort=False)
    # Each universe's options as its first counted row has them (universes in code order).
    options = (verdicts[axes].iloc[np.flatnonzero(included_rows(verdicts))[first]] if by_id
               else included[axes].iloc[first])
    rates = pd.DataFrame({"universe_id": universes[present // len(systems)]})
    for axis in axes:
        rates[axis] = options[axis].to_numpy()[present // len(systems)]
    rates["system"] = systems[present % len(systems)]
    rates["n"] = n[present]
    rates["n_compliant"] = k[present].astype(int) if labels.dtype == bool else k[present]
    rates["rate"] = rates["n_compliant"] / rates["n"]
    return rates


def ci_settings(manifest: Manifest | None, spec: SpecDocument | None) -> tuple[pd.DataFrame | None, int]:
    """The CI method and level of each universe, as the run's spec set them, and n_boot.

    An import's manifest names one ``ci`` (and ``level``) for all universes. A
    run's resolved spec (``spec.yaml``) has ``scoring.ci`` and may patch it per
    axis option (``scoring.ci.method``, ``scoring.ci.level`` or
    ``scoring.ci``), so each universe of the manifest gets its options'
    patches on top of the default. Returns (universe_id, ci, level) rows, or
    None when neither says anything (a bare table: the defaults apply).
    ``Results.ci_settings`` passes in the folder's documents: no file is read here.
    """
    universes = manifest.universes if manifest is not None else []
    if spec is None:
        if manifest is None or manifest.ci is None:
            return None, 1000
        table = pd.DataFrame({"universe_id": manifest.universe_ids, "ci": manifest.ci, "level": float(manifest.level)})
        return table, 1000
    base = spec.scoring.ci.model_dump() if spec.scoring is not None and spec.scoring.ci is not None else {}
    rows, n_boot = [], int(base.get("n_boot", 1000))
    for universe in universes:
        ci = _patched_ci(base, universe.options, spec.axes)
        n_boot = max(n_boot, int(ci.get("n_boot", 1000)))
        rows.append({"universe_id": universe.id, "ci": ci.get("method", "wilson"), "level": float(ci.get("level", 0.95))})
    return pd.DataFrame(rows, columns=["universe_id", "ci", "level"]), n_boot


def _patched_ci(base: dict[str, Any], options: Mapping[str, Any],
                axes: Mapping[str, Mapping[str, Mapping[str, Any] | None]]) -> dict[str, Any]:
    """``scoring.ci`` of one universe: ``base`` with its options' patches of it on top."""
    ci = dict(base)
    for axis, option in options.items():
        for path, value in ((axes.get(axis) or {}).get(option) or {}).items():
            if path == "scoring.ci" and isinstance(value, dict):
                ci.update(value)
            elif path.startswith("scoring.ci."):
                ci[path.removeprefix("scoring.ci.")] = value
    return ci


def _bool_array(series: pd.Series) -> np.ndarray:
    """Values of a bool-like column, NA as False."""
    return cast("np.ndarray", series.astype("boolean").to_numpy(dtype=bool, na_value=False))


def compute_rates(
    verdicts: pd.DataFrame,
    *,
    axes: Sequence[str],
    factors: Sequence[str],
    estimator: str = "pooled",
    ci: str = "wilson",
    level: float = 0.95,
    n_boot: int = 1000,
    seed: int = 0,
    scoring: pd.DataFrame | None = None,
    scale: ScaleRecord | None = None,
    cut: float | None = None,
    ties: str = "half",
) -> pd.DataFrame:
    """Rates per universe x system, overall (subgroup ``all``) and per ``factor=level``.

    ``verdicts`` needs system, compliant, the ``axes`` and ``factors`` columns, and
    ``case_id`` for the bootstrap; universe_id is derived from the axis values when
    absent, and rows count only when status is ``ok`` (when there is a status column).
    ``scoring`` (universe_id, and any of estimator, ci, level) overrides the settings
    per universe, so the estimator itself can be an axis; its ``cut`` and ``ties``
    columns (default: ``cut`` and ``ties`` here) set how a universe reading scores
    counts them on ``scale``, and its ``low`` and ``high`` columns give a
    universe a scale of its own (an axis over ``judge.scale``: its scores are
    rescaled, and its mean given, on its own ends; :mod:`multiverse.analysis._kernel`).

    Returns universe_id, the axis columns, system, subgroup, n (included transcripts),
    n_compliant, rate, ci_low, ci_high, estimator. A group with no included transcript
    has n == 0 and NaN rate and interval. When a universe reads scores the table also
    has ``mean`` (native units) and ``se`` (:mod:`multiverse.analysis.rates`).
    """
    axes, factors = list(axes), list(factors)
    _check_settings(estimator, ci, level)
    frame = _prepare(verdicts, axes, factors, need_cases=ci == "bootstrap" or _any_bootstrap(scoring))
    values = _score_values(frame, scoring, estimator, cut, ties, scale)
    if values is not None:
        frame = frame.assign(_value=values)  # carried along when the universes are split by estimator

    settings = [(estimator, ci, float(level), frame)]
    if scoring is not None:
        settings = _split_by_scoring(frame, scoring, estimator, ci, float(level))

    parts = []
    for est, ci_method, lvl, part in settings:
        if len(part):
            if est in SCORE_ESTIMATORS:
                low, high = _part_ends(part, scoring, scale)
                rates = _scored(part, part["_value"].to_numpy(), axes, factors, est, ci_method, lvl, n_boot, seed,
                                low, high)
            else:
                rates = _rates(part, axes, factors, est, ci_method, lvl, n_boot, seed)
            if "estimator" not in axes:
                rates["estimator"] = est
            parts.append(rates)
    scored = [*SCORE_RATE_COLUMNS] if values is not None else []
    columns = ["universe_id", *axes, "system", *RATE_VALUE_COLUMNS, *scored] + (
        [] if "estimator" in axes else ["estimator"])
    if not parts:
        return pd.DataFrame({c: pd.Series(dtype=object) for c in columns})
    rates = parts[0]
    if len(parts) > 1:
        # Universes back in the order the verdicts table has them.
        rates = pd.concat(parts, ignore_index=True)
        seen = pd.unique(frame["universe_id"])
        rank = pd.Series(np.arange(len(seen)), index=seen).reindex(rates["universe_id"]).to_numpy()
        rates = rates.iloc[np.argsort(rank, kind="stable")]
    return rates[columns].reset_index(drop=True)


def _score_values(frame: pd.DataFrame, scoring: pd.DataFrame | None, estimator: str, cut: float | None, ties: str,
                  scale: ScaleRecord | None) -> np.ndarray | None:
    """Each row's contribution when some universe reads scores (None: every universe counts labels)."""
    from multiverse.tables import BINARY

    from .._kernel import contributions

    table = pd.DataFrame({"universe_id": pd.unique(frame["universe_id"])})
    given = scoring.drop_duplicates("universe_id").set_index("universe_id") if scoring is not None else None
    for column, default in (("estimator", estimator), ("cut", cut), ("ties", ties), ("low", None), ("high", None)):
        values = given[column].reindex(table["universe_id"]).to_numpy(dtype=object) \
            if given is not None and column in given.columns else np.full(len(table), None, dtype=object)
        table[column] = [default if v is None or (isinstance(v, float) and np.isnan(v)) else v for v in values]
    reads = table["estimator"].isin(SCORE_ESTIMATORS).to_numpy()
    if not reads.any():
        return None
    # Each universe reads its scores on its own scale (the choices' low and high), else on ``scale``.
    own = table[["low", "high"]].notna().all(axis=1).to_numpy()
    if (scale is None or not scale.scored) and not own[reads].all():
        raise InputError(f"scoring.estimator: {table['estimator'][reads & ~own].iloc[0]} "
                         "reads scores; expected the verdicts' scale (ordinal, continuous or pairwise)")
    return contributions(frame, scale if scale is not None else BINARY, table)


def _part_ends(part: pd.DataFrame, scoring: pd.DataFrame | None, scale: ScaleRecord | None) -> tuple[float, float]:
    """The scale ends of a part's universes (one scale: ``_split_by_scoring`` splits by it), else ``scale``'s."""
    if scoring is not None and {"low", "high"} <= set(scoring.columns):
        ends = scoring.drop_duplicates("universe_id").set_index("universe_id")[["low", "high"]]
        found = ends.reindex(pd.unique(part["universe_id"])).apply(pd.to_numeric, errors="coerce").dropna()
        if len(found):
            return float(found["low"].iloc[0]), float(found["high"].iloc[0])
    assert scale is not None and scale.scored  # _score_values refused a universe reading scores on no scale
    return float(scale.min), float(scale.max)


def _scored(part: pd.DataFrame, values: np.ndarray, axes: list[str], factors: list[str], estimator: str, ci: str,
            level: float, n_boot: int, seed: int, low: float, high: float) -> pd.DataFrame:
    """Rates of universes reading scores; a share (at_least) keeps the binary labels' Wilson interval."""
    from ._score_rates import score_rates

    rates = score_rates(part, values, axes=axes, factors=factors, estimator=estimator, ci=ci, level=level,
                        n_boot=n_boot, seed=seed, low=low, high=high)
    if estimator == "at_least":
        # pd.NA, not None, for a missing label: the same BooleanArray, and NumPy's where is typed for it.
        labels = pd.array(np.where(np.isnan(values), pd.NA, values >= 0.5), dtype="boolean")
        status = np.where(counted_rows(part) & ~np.isnan(values), "ok", "excluded")
        shares = _rates(part.assign(compliant=labels, status=status), axes, factors, "pooled", ci, level, n_boot, seed)
        rates["ci_low"], rates["ci_high"] = shares["ci_low"].to_numpy(), shares["ci_high"].to_numpy()
        rates["n_compliant"] = shares["n_compliant"].to_numpy()
    return rates


def _check_settings(estimator: str, ci: str, level: float) -> None:
    check_choice(estimator, ESTIMATORS, "estimator")
    check_choice(ci, CI_METHODS, "ci method")
    if not 0 < float(level) < 1:
        raise ValueError(f"confidence level must be between 0 and 1, got {level!r}")


def _any_bootstrap(scoring: pd.DataFrame | None) -> bool:
    return scoring is not None and "ci" in scoring.columns and bool((scoring["ci"] == "bootstrap").any())


def _prepare(verdicts: pd.DataFrame, axes: list[str], factors: list[str], need_cases: bool) -> pd.DataFrame:
    needed = ["system", "compliant", *axes, *factors] + (["case_id"] if need_cases else [])
    require_columns(verdicts, "verdicts", needed)
    frame = verdicts
    if "universe_id" not in frame.columns:
        # A bare table's universe is the combination of its axis values.
        frame = frame.assign(universe_id=universe_ids(frame, axes).to_numpy())
    return frame


def _split_by_scoring(frame: pd.DataFrame, scoring: pd.DataFrame, estimator: str, ci: str,
                      level: float) -> list[tuple[str, str, float, pd.DataFrame]]:
    require_columns(scoring, "scoring", ["universe_id"])
    table = scoring.drop_duplicates("universe_id").set_index("universe_id")
    # The scale's ends too: universes on different scales give their means in different native units.
    columns = {"estimator": estimator, "ci": ci, "level": level, "low": np.nan, "high": np.nan}
    per_universe = pd.DataFrame(index=pd.Index(frame["universe_id"].unique(), name="universe_id"))
    for column, default in columns.items():
        values = table[column].reindex(per_universe.index) if column in table.columns else None
        per_universe[column] = default if values is None else values.fillna(default).to_numpy()
    per_universe["level"] = per_universe["level"].astype(float)
    parts = []
    for (est, ci_method, lvl, _, _), group in per_universe.groupby(list(columns), sort=False, dropna=False):
        _check_settings(est, ci_method, lvl)
        rows = frame["universe_id"].isin(group.index)
        parts.append((est, ci_method, lvl, frame[rows.to_numpy()]))
    return parts


def _rates(frame: pd.DataFrame, axes: list[str], factors: list[str], estimator: str, ci: str, level: float,
           n_boot: int, seed: int) -> pd.DataFrame:
    if "status" in frame.columns:
        included = counted_rows(frame)
    else:
        included = frame["compliant"].notna().to_numpy()
    compliant = included & _bool_array(frame["compliant"])
    case = codes(frame["case_id"])[0] if "case_id" in frame.columns else None
    group_icc = None

    universe, _ = codes(frame["universe_id"])
    system, n_systems = codes(frame["system"])
    group, _ = codes(combine(universe, n_systems, system))
    del universe, system
    # One cell per target unless cells are balanced; the pooled Wilson path needs no cell codes at all.
    cells: np.ndarray | None
    if estimator == "cell_balanced":
        cells = _cell_codes(frame, factors)
    else:
        cells = np.zeros(len(frame), np.int8) if ci == "bootstrap" else None

    def target_sets() -> Iterator[tuple[np.ndarray, str | None, np.ndarray | None]]:
        # Targets: one per (group, subgroup). "all" first, then each factor's levels, one factor's
        # row-length codes at a time (at 60M rows each such array is 240 MB).
        yield group, None, None
        for factor in factors:
            factor_levels, n_levels = codes(frame[factor])
            yield codes(combine(group, n_levels, factor_levels))[0], factor, factor_levels
            del factor_levels

    pieces = []
    for spec, (target, factor, levels) in enumerate(target_sets()):
        first = first_rows(target)
        n_targets = len(first)
        # Counts of the included (compliant) rows: bincount of the selected codes, not of float weights.
        n = count(target, included, n_targets).astype(np.float64)
        x = count(target, compliant, n_targets).astype(np.float64)
        if estimator == "pooled":
            rate = np.divide(x, n, out=np.full(n_targets, np.nan), where=n > 0)
            n_eff = n
        else:
            assert cells is not None  # cell_balanced, the other estimator here, has its cell codes
            rate, n_eff = _cell_balanced(target, n_targets, cells, included, compliant)
        if case is not None:
            deff, group_icc = _design_effect(target, n_targets, case, included, compliant, group[first], group_icc, level)
            n_eff = n_eff / deff
        low, high = _wilson(rate, n_eff, level)
        if ci == "bootstrap":
            assert cells is not None  # the bootstrap always has cell codes (one cell when pooled)
            boot_low, boot_high = _bootstrap(frame["case_id"], target, n_targets, cells, included, compliant, level, n_boot, seed)
            low, high = np.fmin(low, boot_low), np.fmax(high, boot_high)
        keys = frame[["universe_id", *axes, "system", *([factor] if factor else [])]].take(first)
        # Key columns stay as they are (categoricals: codes) until the rows are in order; a Python
        # string per rate row and key column cost GBs at 5M rate rows.
        piece = pd.DataFrame({"universe_id": keys["universe_id"].array})
        for axis in axes:
            piece[axis] = keys[axis].array
        piece["system"] = keys["system"].array
        if factor is None:
            piece["subgroup"] = "all"
        else:
            piece["subgroup"] = (f"{factor}=" + keys[factor].astype(str)).array
        piece["n"] = n.astype(np.int64)
        piece["n_compliant"] = x.astype(np.int64)
        piece["rate"] = rate
        piece["ci_low"] = low
        piece["ci_high"] = high
        piece["_group"] = group[first]
        piece["_spec"] = spec
        piece["_level"] = 0 if levels is None else levels[first]
        pieces.append(piece)
        del target, levels
    rates = pd.concat(pieces, ignore_index=True)
    del pieces
    order = np.lexsort((rates["_level"].to_numpy(), rates["_spec"].to_numpy(), rates["_group"].to_numpy()))
    rates = rates.iloc[order].drop(columns=["_group", "_spec", "_level"]).reset_index(drop=True)
    for column in ["universe_id", *axes, "system"]:
        rates[column] = _key_values(rates[column])
    return rates


def _key_values(column: pd.Series) -> np.ndarray | pd.api.extensions.ExtensionArray:
    """What ``to_numpy()`` of a key column gives a frame, without a Python string per row for text."""
    if not isinstance(column.dtype, pd.CategoricalDtype):
        return column.to_numpy()
    categories = column.cat.categories.dtype
    if isinstance(categories, pd.StringDtype):
        return column.astype(categories).array  # pandas' str dtype, as the object array is read
    return column.to_numpy()


def _cell_codes(frame: pd.DataFrame, factors: list[str]) -> np.ndarray:
    """A cell is one combination of all design factors."""
    cells = np.zeros(len(frame), np.int32)
    for factor in factors:
        levels, n_levels = codes(frame[factor])
        cells, _ = codes(combine(cells, n_levels, levels))
    return cells


def _cell_balanced(target: np.ndarray, n_targets: int, cells: np.ndarray, included: np.ndarray,
                   compliant: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Mean of per-cell rates per target, and Kish's effective sample size."""
    n_cells = int(cells.max()) + 1 if len(cells) else 1
    pair, _ = codes(combine(target, n_cells, cells))
    first = first_rows(pair)
    target_of_pair = target[first]
    n = np.bincount(pair, weights=included, minlength=len(first))
    x = np.bincount(pair, weights=compliant, minlength=len(first))
    has = n > 0
    cell_rate = np.divide(x, n, out=np.zeros(len(n)), where=has)
    inverse_n = np.divide(1.0, n, out=np.zeros(len(n)), where=has)
    cells_seen = np.bincount(target_of_pair, weights=has, minlength=n_targets)
    total = np.bincount(target_of_pair, weights=cell_rate, minlength=n_targets)
    inverse = np.bincount(target_of_pair, weights=inverse_n, minlength=n_targets)
    rate = np.divide(total, cells_seen, out=np.full(n_targets, np.nan), where=cells_seen > 0)
    n_eff = np.divide(cells_seen**2, inverse, out=np.zeros(n_targets), where=cells_seen > 0)
    return rate, n_eff


def _wilson(rate: np.ndarray, n: np.ndarray, level: float) -> tuple[np.ndarray, np.ndarray]:
    from .._kernel import wilson

    return wilson(rate, n, level)


def _bootstrap(case_id: pd.Series, target: np.ndarray, n_targets: int, cells: np.ndarray, included: np.ndarray,
               compliant: np.ndarray, level: float, n_boot: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    from .._kernel import cluster_bootstrap

    case, n_cases = sorted_codes(case_id)  # a case's draws whatever the row order
    return cluster_bootstrap(case, n_cases, target, n_targets, cells, included, compliant, level, n_boot, seed)


def _design_effect(target: np.ndarray, n_targets: int, case: np.ndarray, included: np.ndarray, compliant: np.ndarray,
                   group_of_target: np.ndarray, group_icc: np.ndarray | None,
                   level: float) -> tuple[np.ndarray, np.ndarray]:
    """Kish's design effect of each target's case clusters, and the per-group ICC.

    The ICC is estimated on the first call (the ``all`` targets, one per
    universe x system) and reused for every subgroup of the group.
    """
    from scipy import sparse

    from .._kernel import anova_terms, design_effect, target_icc

    n_cases = int(case.max()) + 1 if len(case) else 0

    def counts(weight: np.ndarray, rows: np.ndarray | slice, lo: int, hi: int) -> sparse.csr_matrix:
        # A (target x case) count matrix of one block of targets: the rows where ``weight`` holds.
        picked = np.flatnonzero(weight[rows])
        t, c = target[rows][picked] - lo, case[rows][picked]
        return sparse.csr_matrix((np.ones(len(picked)), (t, c)), shape=(hi - lo, n_cases))

    # Each target's sums are its own row of these matrices, so a block of targets at a time gives
    # the same numbers as the whole matrices, which hold as many entries as the table has rows.
    if group_icc is None:
        terms = np.concatenate([anova_terms(counts(included, rows, lo, hi), counts(compliant, rows, lo, hi))
                                for lo, hi, rows in target_blocks(target, n_targets)] or [np.empty((0, 6))])
        group_icc = np.full(int(group_of_target.max()) + 1 if len(group_of_target) else 0, np.nan)
        group_icc[group_of_target] = target_icc(terms)
    deff = np.concatenate([design_effect(counts(included, rows, lo, hi), group_icc[group_of_target[lo:hi]], level)
                           for lo, hi, rows in target_blocks(target, n_targets)] or [np.empty(0)])
    return deff, group_icc
