"""The specification curve of an audit: every universe's rate, in order.

A specification curve (Simonsohn, Simmons & Nelson 2020) sorts the universes
of a multiverse by their estimate and shows, underneath, which option of each
axis every universe used. Here the estimate is a system's compliance rate
(share of compliant ok verdicts, replicates pooled) or the difference of two
systems' rates, and the joint tests of :mod:`multiverse.analysis.inference`
say whether the curve as a whole is inconsistent with a null.

Everything takes a verdicts table (``system``, ``case_id``, ``compliant``,
axis columns; ``status`` and ``universe_id`` optional: only ``ok`` rows with a
label count, and a missing ``universe_id`` is derived as ``tables.universe_ids`` does) or
the :class:`CaseMatrix` built from it once, and returns DataFrames or
JSON-able dicts. Nothing here draws.

A difference of two systems is paired by case; its interval and z are those
of :mod:`multiverse.analysis.cases`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import pandas as pd
from scipy import special

from multiverse.core import CI_METHODS
from multiverse.errors import InputError

from .._kernel import rate_intervals
from ..cases import Z_CAP, CaseMatrix, case_matrix
from ..cases import as_matrix as _as_matrix
from ..cases import axes_list as _axes_list
from ..cases import paired_cases as _paired
from ..cases import paired_z as _paired_z
from ..cases import plain_number as _num

if TYPE_CHECKING:
    from ..inference import JointTest  # only a type: the summary reads the tests it is handed

__all__ = [
    "Z_CAP",
    "CaseMatrix",
    "case_matrix",
    "curve_summary",
    "difference_curve",
    "indicator_matrix",
    "position_words",
    "spec_curve",
    "tied_positions",
]

SCHEMA_VERSION = 1



# --------------------------------------------------------------------------
# Curves and their summary
# --------------------------------------------------------------------------


def _check_level(level: float) -> None:
    if not 0 < level < 1:
        raise InputError(f"level: expected a number in (0, 1), got {level!r}")


def _check_primary(m: CaseMatrix, primary: Any) -> None:
    if primary is not None:
        m.universe_index(primary)


def _place(frame: pd.DataFrame, value: str, by: list[str]) -> pd.DataFrame:
    """Sort by ``by`` groups then ``value`` (ties by universe_id); add ``position`` 1..n (1 = lowest)."""
    frame = frame.sort_values([*by, value, "universe_id"], kind="stable", ignore_index=True)
    if by:
        frame["position"] = frame.groupby(by, sort=False).cumcount().to_numpy() + 1
    else:
        frame["position"] = np.arange(1, len(frame) + 1)
    return frame


def tied_positions(values: np.ndarray, value: float) -> tuple[int, int]:
    """The positions (1 = lowest) that universes with exactly ``value`` hold on a curve of ``values``.

    Where several universes share a rate, the order among them is only the
    universe ids'; the honest position is the range they share. The
    percentile the summary reports is that range's midpoint (ties counted
    half), so the two never disagree.
    """
    below = int(np.count_nonzero(values < value))
    return below + 1, below + int(np.count_nonzero(values == value))


def position_words(low: int, high: int, n: int) -> str:
    """``13th lowest of 24``, or ``7th–24th lowest of 24 (18 tied)`` when universes share the rate."""
    if high <= low:
        return f"{_ordinal(low)} lowest of {n}"
    return f"{_ordinal(low)}–{_ordinal(high)} lowest of {n} ({high - low + 1} tied)"


def _ordinal(k: int) -> str:
    suffix = "th" if 10 <= k % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(k % 10, "th")
    return f"{k}{suffix}"


def _target_rows(counts: np.ndarray, s_idx: np.ndarray, u_idx: np.ndarray) -> np.ndarray:
    """``counts[s_idx, u_idx]`` (targets x cases), a view when the targets are every universe of consecutive
    systems in order, as on a full grid's curve: copies of both count matrices were 1 GB at 100k universes
    x 5 systems, the CLI curve's peak."""
    n_s, n_u = counts.shape[:2]
    if len(u_idx) and len(u_idx) % n_u == 0:
        first, k = int(s_idx[0]), len(u_idx) // n_u
        if (first + k <= n_s and np.array_equal(u_idx, np.tile(np.arange(n_u), k))
                and np.array_equal(s_idx, np.repeat(np.arange(first, first + k), n_u))):
            return counts[first:first + k].reshape(k * n_u, -1)
    return cast("np.ndarray", counts[s_idx, u_idx])


def spec_curve(
    verdicts: pd.DataFrame | CaseMatrix,
    *,
    axes: Sequence[str],
    system: str | Sequence[str] | None = None,
    primary: Any = None,
    level: float = 0.95,
    ci: str | pd.DataFrame = "wilson",
    n_boot: int = 1000,
    seed: int = 0,
) -> pd.DataFrame:
    """One row per universe x system: the rate and its confidence interval, in curve order.

    Columns: ``universe_id``, the axis columns, ``system``, ``n`` (ok
    verdicts), ``n_compliant``, ``rate``, ``ci_low``, ``ci_high``, ``position``
    (the place on the curve, 1 = lowest rate within the system; equal rates
    in universe_id order, see :func:`tied_positions`) and ``is_primary``.
    Rows are sorted by system then position. A universe with no ok
    verdict for a system has no row for it.

    The interval is the one the spec asks for (``ci``: ``wilson`` or
    ``bootstrap``, see :mod:`multiverse.analysis._kernel`; both account for
    replicates of a case with Kish's design effect), at ``level``. ``ci`` may
    also be a table with ``universe_id``, ``ci`` and optionally ``level``
    columns, when the method is set per universe (an axis of the spec);
    universes it does not list get ``ci="wilson"`` at ``level``. ``n_boot`` and
    ``seed`` drive the case bootstrap.
    """
    _check_level(level)
    axes = _axes_list(axes)
    systems = None if system is None else ([system] if isinstance(system, str) else list(system))
    # Every system's verdicts, even when some are shown: the intervals' ICC is pooled over all of them
    # (CaseMatrix.share_icc), as the joint tests' counts pool it, whichever systems are asked for.
    m = _as_matrix(verdicts, axes, None)
    if systems is not None and not isinstance(verdicts, CaseMatrix):
        absent = sorted(set(systems) - set(m.systems), key=str)
        if absent:
            raise InputError(f"verdicts: system: expected ok verdicts for {', '.join(map(str, absent))}")
    _check_primary(m, primary)
    n = m.included.sum(axis=2)
    k = m.compliant.sum(axis=2)
    chosen = [m.system_index(s) for s in (systems or m.systems)]
    parts, targets = [], []
    for s in chosen:
        rows = np.flatnonzero(n[s] > 0)
        part = m.universes.iloc[rows].reset_index(drop=True)
        part["system"] = m.systems[s]
        part["n"] = n[s, rows].astype(np.int64)
        part["n_compliant"] = k[s, rows] if m.means is not None else k[s, rows].astype(np.int64)
        parts.append(part)
        targets += [(s, u) for u in rows]
    curve = pd.concat(parts, ignore_index=True)
    curve["rate"] = curve["n_compliant"] / curve["n"]
    methods, levels = _ci_settings(curve["universe_id"], ci, level)
    s_idx, u_idx = np.array(targets, dtype=np.int64).reshape(-1, 2).T
    curve["ci_low"], curve["ci_high"] = rate_intervals(
        _target_rows(m.included, s_idx, u_idx), _target_rows(m.compliant, s_idx, u_idx), methods, levels, n_boot,
        seed, icc=m.share_icc()[s_idx, u_idx])
    if m.means is not None and m.means[u_idx].any():
        # A mean of scores: the cluster-robust t interval, not a share's Wilson interval.
        from .._kernel import case_mean_interval

        mean = m.means[u_idx]
        _, low, high = case_mean_interval(m.included[s_idx[mean], u_idx[mean]], m.compliant[s_idx[mean], u_idx[mean]],
                                          levels[mean])
        curve.loc[mean, "ci_low"], curve.loc[mean, "ci_high"] = low, high
    # Keep the caller's system order, not the alphabet.
    order = {m.systems[s]: i for i, s in enumerate(chosen)}
    curve["_system_order"] = curve["system"].map(order)
    curve = _place(curve, "rate", ["_system_order"]).drop(columns="_system_order")
    curve["is_primary"] = (curve["universe_id"] == primary) if primary is not None else False
    curve = curve[
        ["universe_id", *axes, "system", "n", "n_compliant", "rate", "ci_low", "ci_high",
         "position", "is_primary"]
    ]
    curve.attrs["level"] = float(levels[0]) if len(set(levels.tolist())) == 1 else None
    curve.attrs["ci"] = str(methods[0]) if len(set(methods.tolist())) == 1 else "per universe"
    if m.means is not None and m.means.any():
        curve.attrs["ci"] = "t (means of scores)" if m.means.all() else "t for means of scores, else " + curve.attrs["ci"]
    return curve


def _ci_settings(
    universe_id: pd.Series, ci: str | pd.DataFrame, level: float
) -> tuple[np.ndarray, np.ndarray]:
    """The CI method and level of each curve row."""
    if isinstance(ci, pd.DataFrame):
        if "universe_id" not in ci.columns or "ci" not in ci.columns:
            raise InputError("ci: expected a method name or a table with universe_id and ci columns")
        table = ci.drop_duplicates("universe_id").set_index("universe_id")
        methods = table["ci"].reindex(universe_id).fillna("wilson").to_numpy(dtype=object)
        levels = (table["level"].reindex(universe_id).fillna(level).to_numpy(dtype=float)
                  if "level" in table.columns else np.full(len(universe_id), float(level)))
    else:
        methods = np.full(len(universe_id), ci, dtype=object)
        levels = np.full(len(universe_id), float(level))
    # In sorted order, not a set's: which of several bad values is named must not vary with the process's
    # string hashing (PYTHONHASHSEED), or the same table is refused in different words from run to run.
    bad = sorted({str(method) for method in methods.tolist() if method not in CI_METHODS})
    if bad:
        more = f" (and {len(bad) - 1} more)" if len(bad) > 1 else ""
        raise InputError(f"ci: expected one of {', '.join(CI_METHODS)}, got {bad[0]!r}{more}")
    for value in set(levels.tolist()):
        _check_level(value)
    return methods, levels


def difference_curve(
    verdicts: pd.DataFrame | CaseMatrix,
    *,
    axes: Sequence[str],
    a: str,
    b: str,
    primary: Any = None,
    level: float = 0.95,
) -> pd.DataFrame:
    """One row per universe: ``rate(a) - rate(b)`` over paired cases, in curve order.

    Paired means: in each universe only cases that both systems have at least
    one ok verdict for count, so ``rate_a``/``rate_b`` may differ slightly
    from :func:`spec_curve` when verdicts failed. The interval is the paired
    (case-clustered) normal approximation ``difference +/- z * se`` with the
    linearised case-level variance described in
    :mod:`multiverse.analysis.inference`; ``z = difference / se`` is the same
    per-universe z the joint difference test uses.

    Columns: ``universe_id``, axis columns, ``system_a``, ``system_b``,
    ``n_cases``, ``n_a``, ``n_b``, ``rate_a``, ``rate_b``, ``difference``,
    ``ci_low``, ``ci_high``, ``z``, ``position`` (1 = lowest difference), ``is_primary``.
    """
    _check_level(level)
    axes = _axes_list(axes)
    m = _as_matrix(verdicts, axes, None)
    _check_primary(m, primary)
    pair = _paired(m, a, b)
    d, w = pair.contribution, pair.weight
    diff = d.sum(axis=1)
    z, se = _paired_z(diff, (d * w).sum(axis=1), (d * d).sum(axis=1), (w * w).sum(axis=1),
                      pair.n_cases)
    half = special.ndtri(0.5 + level / 2) * se  # the normal quantile (scipy.stats' norm.ppf is ndtri)
    curve = m.universes.iloc[pair.rows].reset_index(drop=True)
    curve = curve.assign(
        system_a=a,
        system_b=b,
        n_cases=pair.n_cases.astype(np.int64),
        n_a=pair.n_a.astype(np.int64),
        n_b=pair.n_b.astype(np.int64),
        rate_a=pair.rate_a,
        rate_b=pair.rate_b,
        difference=diff,
        ci_low=diff - half,
        ci_high=diff + half,
        z=z,
    )
    curve = _place(curve, "difference", [])
    curve["is_primary"] = (curve["universe_id"] == primary) if primary is not None else False
    curve.attrs["level"] = level
    return curve


def indicator_matrix(curve: pd.DataFrame, axes: Sequence[str]) -> pd.DataFrame:
    """Which option each universe of a one-system curve uses, for the indicator panel.

    Rows are a MultiIndex (``axis``, ``option``), grouped by axis in ``axes``
    order; options follow the categorical order when the column is
    categorical, else sorted by their text. Columns are the curve's
    ``universe_id`` in curve order (by ``position``). Values are booleans.
    """
    axes = _axes_list(axes)
    if "system" in curve.columns and curve["system"].nunique() > 1:
        raise InputError(
            "curve: system: expected one system; select one (curve[curve.system == name])"
        )
    missing = [c for c in ("universe_id", *axes) if c not in curve.columns]
    if missing:
        raise InputError(f"curve: {', '.join(missing)}: expected column(s) to be present")
    ordered = curve.sort_values("position", kind="stable") if "position" in curve.columns else curve
    rows, index = [], []
    for axis in axes:
        column = ordered[axis]
        if isinstance(column.dtype, pd.CategoricalDtype):
            options = [o for o in column.cat.categories if (column == o).any()]
        else:
            options = sorted(column.dropna().unique(), key=str)
        for option in options:
            rows.append((column == option).fillna(False).to_numpy(dtype=bool))
            index.append((axis, option))
    matrix = np.vstack(rows) if rows else np.zeros((0, len(ordered)), dtype=bool)
    return pd.DataFrame(
        matrix,
        index=pd.MultiIndex.from_tuples(index, names=["axis", "option"]),
        columns=pd.Index(ordered["universe_id"].to_numpy(), name="universe_id"),
    )


def _primary_entry(frame: pd.DataFrame, value: str, extra: Iterable[str]) -> dict[str, Any] | None:
    hit = frame[frame["is_primary"]]
    if hit.empty:
        return None
    row = hit.iloc[0]
    values = frame[value].to_numpy(dtype=float)
    low, high = tied_positions(values, float(row[value]))
    return {
        "universe_id": _num(row["universe_id"]),
        value: _num(float(row[value])),
        **{c: _num(float(row[c])) for c in extra},
        # The position on the curve, 1 = the lowest. Not called "rank": a rank is
        # 1 = the highest rate everywhere else (ranking, the report).
        "position": int(row["position"]),
        # The positions every universe with this same rate holds (equal when none shares it).
        "position_low": low,
        "position_high": high,
        # The midpoint of that range as a percentile rank (ties counted half): 50 = the middle of the curve.
        "percentile": 100.0 * ((low + high) / 2 - 0.5) / len(values),
    }


def curve_summary(curve: pd.DataFrame, *, tests: Sequence[JointTest] = (), notes: Sequence[str] = ()) -> dict[str, Any]:
    """A JSON-able summary of a specification curve and its joint tests.

    ``curve`` is a :func:`spec_curve` frame (any number of systems); ``tests``
    are :class:`JointTest` results; ``notes`` what the caller knows of them (rows
    dropped, systems left untested). Shape::

        {"schema_version": 1, "level": float | null (from curve.attrs), "primary": id | null,
         "n_universes": int,
         "systems": {name: {"n_universes": int,
                            "rate": {"min", "median", "max"},
                            "min_universe": id, "max_universe": id,
                            "primary": {"universe_id", "rate", "ci_low", "ci_high",
                                        "position", "position_low", "position_high",
                                        "percentile"} | null}},
         "tests": [JointTest.to_dict() + {"primary_effect": float | null}],
         "multiplicity": {"method": "holm", "family": str, "n_p_values": int} | null,
         "ci": str (method, or "per universe"),
         "notes": [str, ...]}

    Each test statistic carries ``p`` and ``p_holm``, Holm-adjusted over every
    p-value of the summary (the family ``multiplicity`` names).
    """
    for column in ("universe_id", "system", "rate", "position", "is_primary"):
        if column not in curve.columns:
            raise InputError(f"curve: {column}: expected a spec_curve() table")
    primary_ids = curve.loc[curve["is_primary"], "universe_id"].unique()
    primary = _num(primary_ids[0]) if len(primary_ids) else None
    systems: dict[str, Any] = {}
    for name, part in curve.groupby("system", sort=False):
        rates = part["rate"].to_numpy()
        systems[str(name)] = {
            "n_universes": len(part),
            "rate": {
                "min": _num(rates.min()),
                "median": _num(float(np.median(rates))),
                "max": _num(rates.max()),
            },
            "min_universe": _num(part.loc[part["rate"].idxmin(), "universe_id"]),
            "max_universe": _num(part.loc[part["rate"].idxmax(), "universe_id"]),
            "primary": _primary_entry(part, "rate", ("ci_low", "ci_high")),
        }
    out_tests = []
    for test in tests:
        entry = test.to_dict()
        effect = test.effects.loc[test.effects["universe_id"] == primary, "effect"]
        entry["primary_effect"] = _num(float(effect.iloc[0])) if len(effect) else None
        out_tests.append(entry)
    from .._kernel import adjust_tests

    multiplicity = adjust_tests(out_tests)
    return {
        "schema_version": SCHEMA_VERSION,
        "level": _num(curve.attrs.get("level")),
        "ci": curve.attrs.get("ci"),
        "primary": primary,
        "n_universes": int(curve["universe_id"].nunique()),
        "systems": systems,
        "tests": out_tests,
        "multiplicity": multiplicity,
        "notes": list(notes),
    }

