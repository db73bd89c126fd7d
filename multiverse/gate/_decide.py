"""Deciding a file of claims on one run: held, failed, undecided or not refuted, each with its evidence.

Per claim, every universe in its scope gets a one-sided ``p_hold`` and
``p_fail`` (:mod:`multiverse.analysis.inference`); the universes combine by
the partial conjunction rule at ``k = ceil(share * U)`` (``all``: the largest
``p_hold``); the claims of one file by Holm, once for held and once for
failed. A claim is *held* when its adjusted ``p_hold`` is at most alpha and
*failed* when its adjusted ``p_fail`` is. Otherwise its rule decides: under
``shown`` it is *undecided* (and the gate does not pass), under
``not_refuted`` it is *not refuted* (and the gate passes).

Each claim also says the smallest effect this run's size detects with 80%
power on each side of its bound (:func:`multiverse.analysis.detectable_difference`,
the figure ``power`` gives), and warns when its rule can't be met at this size.
"""

from __future__ import annotations

import functools
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from multiverse.analysis import (
    cases_needed,
    detectable_difference,
    difference_claim_tests,
    holm,
    partial_conjunction,
    rank_claim_tests,
    rate_claim_tests,
    universes_needed,
)
from multiverse.core import orient
from multiverse.errors import InputError
from multiverse.gate._claims_file import Claim, ClaimsFile, Direction, check_claims, parse_claims, read_claims
from multiverse.results import Results, load_run
from multiverse.spec import Problems

__all__ = ["CheckResult", "ClaimOutcome", "check"]

STATUSES = ("held", "failed", "undecided", "not_refuted")
#: The statuses that keep the gate from passing.
BLOCKING = ("failed", "undecided")
#: The power a detectable effect is quoted at (as ``power`` quotes it).
POWER = 0.8


def _direction(results: Results) -> Direction:
    """The way the claims' rates are written: as the results read rates (``Results.rate_direction``, from the
    spec's ``report.rate`` or ``read_as``). A rate claim's bound turns through ``RateBound.on_compliance``, its
    estimates through ``_as_written``."""
    return "violation" if results.rate_direction == "violation" else "compliance"


@dataclass(frozen=True)
class Detectable:
    """The smallest effect this run's size detects with 80% power, in rate points from the claim's bound.

    ``to_hold``: how far inside the bound the truth must lie for the claim to be held; ``to_fail``: how far
    beyond it for the claim to fail; None where no rate in [0, 1] is far enough. Both are for the universe in
    scope with the fewest cases (``cases``), at the per-universe level the decision uses at Holm's strictest step
    (``level_hold``, ``level_fail``). A difference is taken as two independent rates, as ``power`` does:
    conservative for the paired cases a difference claim has.
    """

    to_hold: float | None
    to_fail: float | None
    cases: float
    level_hold: float
    level_fail: float
    power: float = POWER

    def to_dict(self) -> dict[str, Any]:
        return {"to_hold": self.to_hold, "to_fail": self.to_fail, "cases": self.cases, "power": self.power,
                "level_hold": self.level_hold, "level_fail": self.level_fail}


@dataclass(frozen=True)
class ClaimOutcome:
    """How one claim came out, and on what evidence."""

    claim: Claim
    status: str
    p: float  # Holm-adjusted p that the claim holds (small: held)
    p_fail: float  # Holm-adjusted p that it breaks (small: failed)
    p_raw: float
    p_fail_raw: float
    n_universes: int
    n_needed: int
    n_shown: int  # universes where the claim held on their own, at alpha
    estimate_low: float | None
    estimate_high: float | None
    worst: Mapping[str, Any] | None
    notes: tuple[str, ...] = ()
    detectable: Detectable | None = None
    warnings: tuple[str, ...] = ()  # the claim's rule can't be met at this run's size

    @property
    def rule(self) -> str:
        return self.claim.rule

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.claim.id, "kind": self.claim.kind, "claim": self.claim.statement, "rule": self.rule,
            "status": self.status,
            "p": self.p, "p_fail": self.p_fail, "p_unadjusted": self.p_raw, "p_fail_unadjusted": self.p_fail_raw,
            "universes": self.n_universes, "needed": self.n_needed, "shown_alone": self.n_shown,
            "estimate": {"low": self.estimate_low, "high": self.estimate_high},
            "worst_universe": dict(self.worst) if self.worst else None, "notes": list(self.notes),
            "detectable": self.detectable.to_dict() if self.detectable else None, "warnings": list(self.warnings),
        }


@dataclass(frozen=True)
class CheckResult:
    """Every claim's outcome; ``passed()`` is the gate."""

    outcomes: tuple[ClaimOutcome, ...]
    alpha: float
    source: str
    notes: tuple[str, ...] = field(default=())
    #: How the claims' estimates are written (``_direction``): the one JSON document not in compliance terms,
    #: since each estimate is compared with its claim's bound as the claim is written.
    rate_direction: str = "compliance"

    def passed(self) -> bool:
        """True when no claim failed and none is undecided: each held, or, under ``rule: not_refuted``, was
        not refuted. Which claims may pass unshown is the claims file's choice, made before the run."""
        return not any(o.status in BLOCKING for o in self.outcomes)

    @property
    def warnings(self) -> tuple[str, ...]:
        """Each claim whose rule can't be met at this run's size, one line each."""
        return tuple(f"claim {o.claim.id}: {w}" for o in self.outcomes for w in o.warnings)

    @property
    def counts(self) -> dict[str, int]:
        return {s: sum(o.status == s for o in self.outcomes) for s in STATUSES}

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source, "alpha": self.alpha, "rate_direction": self.rate_direction,
            "multiplicity": f"Holm across the {len(self.outcomes)} claims, held and failed separately; "
                            "universes combined by partial conjunction (Bonferroni), valid under any dependence",
            "counts": self.counts, "claims": [o.to_dict() for o in self.outcomes], "notes": list(self.notes),
            "warnings": list(self.warnings),
        }


def decide(p_held: float, p_failed: float, alpha: float, rule: str) -> str:
    """A claim's status from its Holm-adjusted p-values: held or failed on evidence, else as its rule says."""
    if p_held <= alpha:
        return "held"
    if p_failed <= alpha:
        return "failed"
    return "not_refuted" if rule == "not_refuted" else "undecided"


def _scope(results: Results, claim: Claim) -> list[str]:
    """The universes the claim is about, as the results list them."""
    universes = results.universes
    if claim.quantifier == "primary":
        return [str(results.primary)]
    keep = np.ones(len(universes), dtype=bool)
    for axis, chosen in claim.where.items():
        wanted = set(chosen)
        keep &= universes[axis].astype(str).isin(wanted).to_numpy()
    return [str(u) for u in universes.loc[keep, "universe_id"]]


def _per_universe(results: Results, claim: Claim) -> pd.DataFrame:
    m = results.case_matrix()
    if claim.rate is not None:
        bound, side = claim.rate.on_compliance(_direction(results))
        return rate_claim_tests(m, system=str(claim.system), bound=bound, side=side)
    if claim.rank is not None:
        return rank_claim_tests(m, system=str(claim.system), rank=claim.rank)
    if claim.better is not None:
        return difference_claim_tests(m, a=claim.better, b=str(claim.worse))
    return difference_claim_tests(m, a=str(claim.candidate), b=str(claim.baseline),
                                  margin=float(claim.margin or 0))


def _system_rates(results: Results, system: str) -> pd.Series:
    """``system``'s rate in each universe it is rated in, by universe id."""
    m = results.case_matrix()
    s = m.system_index(system)
    with np.errstate(divide="ignore", invalid="ignore"):
        rates = m.compliant[s].sum(axis=1) / m.included[s].sum(axis=1)
    return pd.Series(rates, index=m.universes["universe_id"].astype(str).to_numpy())


@functools.lru_cache(maxsize=4096)  # a root finder's answer (15 ms): claims of one run repeat their inputs
def _mde(cases: float, bound: float, level: float, *, one_sample: bool, direction: str) -> float | None:
    """The smallest move from ``bound`` in ``direction`` detected with 80% power, or None when none in [0, 1] is."""
    if not (math.isfinite(cases) and cases >= 2 and 0 <= bound <= 1):
        return None
    found = detectable_difference(cases, bound, alpha=level, power=POWER, ratio=0.0 if one_sample else 1.0,
                                  alternative="larger", direction=direction)  # type: ignore[arg-type]
    return float(found) if math.isfinite(found) and found > 0 else None


def _cases(results: Results, system: str) -> pd.Series:
    """How many cases ``system`` is rated on in each universe, by universe id."""
    m = results.case_matrix()
    counts = (m.included[m.system_index(system)] > 0).sum(axis=1).astype(float)
    return pd.Series(counts, index=m.universes["universe_id"].astype(str).to_numpy())


def _detectable(results: Results, claim: Claim, table: pd.DataFrame, n: int, k: int, n_claims: int,
                alpha: float) -> tuple[Detectable | None, float | None]:
    """The claim's detectable effects, and the bound they are measured from in its smallest universe."""
    rated = table.dropna(subset=["estimate"])
    if rated.empty:
        return None, None
    # Holm's strictest step over the file's claims, and the partial conjunction's multiplier over universes.
    level_hold, level_fail = alpha / ((n - k + 1) * n_claims), alpha / (k * n_claims)
    inside = "higher"
    if claim.rate is not None:
        sizes = rated["n_eff"].astype(float)
        bound, side = claim.rate.on_compliance(_direction(results))
        inside = "higher" if side == "at_least" else "lower"
    elif claim.rank is not None:
        # Each pairwise difference with a rival, from the system's own rate: a rival this much lower is
        # beaten, this much higher beats it. Beating all but rank - 1 of the m others is a partial
        # conjunction with multiplier rank; being beaten by rank of them, one with m - rank + 1.
        sizes = _cases(results, str(claim.system)).reindex(rated.index.astype(str))
        bound = float(_system_rates(results, str(claim.system)).get(str(sizes.idxmin()), np.nan))
        others = len(results.systems) - 1
        level_hold, level_fail = level_hold / claim.rank, level_fail / max(others - claim.rank + 1, 1)
        inside = "lower"
    else:
        sizes = rated["n_cases"].astype(float)
        baseline = str(claim.baseline if claim.kind == "no_regression" else claim.worse)
        # The difference's bound as a rate of the candidate: the baseline's rate less the margin.
        bound = float(_system_rates(results, baseline).get(str(sizes.idxmin()), np.nan)) - float(claim.margin or 0)
    cases = float(sizes.min())
    outside = "lower" if inside == "higher" else "higher"
    one = claim.rate is not None
    found = Detectable(to_hold=_mde(cases, bound, level_hold, one_sample=one, direction=inside),
                       to_fail=_mde(cases, bound, level_fail, one_sample=one, direction=outside),
                       cases=cases, level_hold=level_hold, level_fail=level_fail)
    return found, bound


@functools.lru_cache(maxsize=4096)
def _cases_needed(margin: float, bound: float, level: float) -> int:
    return cases_needed(margin, bound, alpha=level, power=POWER, alternative="larger")


def _size_warnings(claim: Claim, found: Detectable | None, bound: float | None) -> list[str]:
    """Say so when the claim's rule can't be met at this run's size (80% power, its smallest universe)."""
    if found is None:
        return []
    size = (f"an effective {found.cases:.1f} cases" if claim.rate is not None else f"{found.cases:.0f} cases")
    at = f"at this run's size ({size} in its smallest universe)"
    if claim.rule == "not_refuted":
        if found.to_fail is None:
            return [f"can't fail {at}: no rate in [0, 1] lies far enough beyond the bound to be refuted with "
                    "80% power, so the gate would pass any regression; add cases"]
        return []
    if found.to_hold is None:
        return [f"can't be held {at}: no rate in [0, 1] lies far enough inside the bound to be shown with 80% "
                "power; add cases, or decide it by rule: not_refuted (fail only on evidence against it)"]
    margin = float(claim.margin or 0)
    if claim.kind == "no_regression" and found.to_hold > margin:
        needed = ""
        if bound is not None and 0 <= bound and bound + margin <= 1:
            n = _cases_needed(margin, bound, found.level_hold)
            needed = f" (about {n:,} cases would detect it)"
        return [f"an unchanged candidate is held with less than 80% power {at}: the margin {margin:g} is below "
                f"the {found.to_hold:.3f} this size detects{needed}; widen the margin, add cases, or decide it by "
                "rule: not_refuted (fail only on evidence of a regression)"]
    return []


def _as_written(claim: Claim, value: Any, direction: Direction) -> float | None:
    """An estimate as the claim's direction reads it: a violation rate is 1 - compliance, a difference of two
    violation rates the compliance difference negated; a rank is a place either way."""
    number = _num(value)
    if number is None or claim.kind == "rank":
        return number
    return float(orient(number, direction, difference=claim.rate is None))


def _range(claim: Claim, estimates: pd.Series, direction: Direction) -> dict[str, float | None]:
    """The lowest and highest estimate over the rated universes, as the claim is written."""
    ends = [v for v in (_as_written(claim, estimates.min(), direction), _as_written(claim, estimates.max(), direction))
            if v is not None]
    return {"low": min(ends), "high": max(ends)} if ends else {"low": None, "high": None}


def _num(value: Any) -> float | None:
    value = float(value)
    return value if math.isfinite(value) else None


def _raw_outcome(results: Results, claim: Claim, scope: list[str], alpha: float, n_claims: int) -> dict[str, Any]:
    table = _per_universe(results, claim).set_index("universe_id").reindex(scope)
    notes = []
    unrated = int(table["p_hold"].isna().sum())
    if unrated:
        # No evidence either way in a universe the claim's systems are not rated in.
        notes.append(f"{unrated} of {len(scope)} universes do not rate the claim's systems; they count as unshown")
        table = table.fillna({"p_hold": 1.0, "p_fail": 1.0})
    n = len(scope)
    k = universes_needed(claim.share, n)
    rated = table.dropna(subset=["estimate"])
    worst = None
    if len(table):
        label = results.universes.set_index("universe_id")["label"]
        uid = str(table.sort_values(["p_hold"], ascending=False, kind="stable").index[0])
        estimate = table.loc[uid, "estimate"]
        worst = {"universe_id": uid, "label": str(label.get(uid, uid)),
                 "estimate": _as_written(claim, estimate, _direction(results)) if pd.notna(estimate) else None,
                 "p_hold": _num(table.loc[uid, "p_hold"])}
    found, bound = _detectable(results, claim, table, n, k, n_claims, alpha)
    return {
        "detectable": found, "warnings": _size_warnings(claim, found, bound),
        "p_hold": partial_conjunction(table["p_hold"].to_numpy(), k),
        "p_fail": partial_conjunction(table["p_fail"].to_numpy(), n - k + 1),
        "n": n, "k": k, "shown": int((table["p_hold"] <= alpha).sum()),
        **_range(claim, rated["estimate"], _direction(results)),
        "worst": worst, "notes": notes,
    }


def _sample_note(results: Results) -> str | None:
    """Say so when the run is a sample of a bigger grid: ``all`` then means every sampled universe."""
    spec = results.resolved_spec
    extra = (spec.document.model_extra or {}) if spec is not None else {}
    sample = extra.get("sample")
    if not isinstance(sample, Mapping):
        return None
    axes = spec.document.axes if spec is not None else {}
    grid = math.prod(len(options) for options in axes.values()) if axes else None
    method = sample.get("method", "random") if isinstance(sample.get("method"), str) else "random"
    of = f" of a grid of up to {grid:,}" if grid else ""
    return (f"decided on a {method} sample of {len(results.universes)} universes{of}: "
            "'all' and shares are of the sampled universes, not of the whole grid")


def _load(claims: ClaimsFile | str | os.PathLike[str] | Mapping[str, Any]) -> tuple[ClaimsFile, str]:
    if isinstance(claims, ClaimsFile):
        return claims, "claims"
    if isinstance(claims, Mapping):
        return parse_claims(claims), "claims"
    return read_claims(claims), str(claims)


def check(results: Results | str | os.PathLike[str], claims: ClaimsFile | str | os.PathLike[str] | Mapping[str, Any], *,
          alpha: float | None = None) -> CheckResult:
    """Decide every claim of ``claims`` (a file, its mapping or a :class:`ClaimsFile`) on ``results``.

    Everything the claims name is checked against the results before anything
    is computed. ``alpha`` overrides the file's level.
    """
    parsed, shown = _load(claims)
    if alpha is not None and not 0 < alpha < 0.5:
        raise InputError(f"alpha: expected a number in (0, 0.5), got {alpha!r}", param="alpha")
    loaded = results if isinstance(results, Results) else load_run(results)
    check_claims(parsed, systems=loaded.systems, axes=loaded.axes,
                 options={a: list(loaded.universes[a].astype(str).unique()) for a in loaded.axes},
                 has_primary=loaded.primary is not None, shown=shown)
    level = float(alpha if alpha is not None else parsed.alpha)
    scopes = [_scope(loaded, claim) for claim in parsed.claims]
    empty = Problems()
    for claim, scope in zip(parsed.claims, scopes):
        if not scope:  # options that exist, in no universe together (an exclusion, a sample)
            empty.add(f"claim {claim.id}: where", "expected at least one universe with these options")
    empty.raise_if_any(shown)
    raw = [_raw_outcome(loaded, claim, scope, level, len(parsed.claims)) for claim, scope in zip(parsed.claims, scopes)]
    held = holm([r["p_hold"] for r in raw])
    failed = holm([r["p_fail"] for r in raw])
    outcomes = []
    for claim, r, p_hold, p_fail in zip(parsed.claims, raw, held, failed):
        status = decide(p_hold, p_fail, level, claim.rule)
        outcomes.append(ClaimOutcome(
            claim=claim, status=status, p=p_hold, p_fail=p_fail, p_raw=r["p_hold"], p_fail_raw=r["p_fail"],
            n_universes=r["n"], n_needed=r["k"], n_shown=r["shown"], estimate_low=r["low"],
            estimate_high=r["high"], worst=r["worst"], notes=tuple(r["notes"]), detectable=r["detectable"],
            warnings=tuple(r["warnings"])))
    # The claims are decided on the verdicts, never on a stored rates table: a stale one is only named.
    notes = tuple(n for n in (_sample_note(loaded), loaded.rates_note(full=False)) if n)
    source = str(loaded.source) if loaded.source is not None else loaded.name
    return CheckResult(outcomes=tuple(outcomes), alpha=level, source=source, notes=notes,
                       rate_direction=_direction(loaded))
