"""Deciding a file of claims on one run: held, failed or undecided, each with its evidence.

Per claim, every universe in its scope gets a one-sided ``p_hold`` and
``p_fail`` (:mod:`multiverse.analysis.claim_tests`); the universes combine by
the partial conjunction rule at ``k = ceil(share * U)`` (``all``: the largest
``p_hold``); the claims of one file by Holm, once for held and once for
failed. A claim is *held* when its adjusted ``p_hold`` is at most alpha,
*failed* when its adjusted ``p_fail`` is, and *undecided* otherwise.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from multiverse.analysis import (
    difference_claim_tests,
    holm,
    partial_conjunction,
    rank_claim_tests,
    rate_claim_tests,
    universes_needed,
)
from multiverse.errors import InputError, SpecError
from multiverse.gate._claims_file import Claim, ClaimsFile, check_claims, parse_claims, read_claims
from multiverse.results import Results, load_run

__all__ = ["CheckResult", "ClaimOutcome", "check"]

STATUSES = ("held", "failed", "undecided")


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

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.claim.id, "kind": self.claim.kind, "claim": self.claim.statement, "status": self.status,
            "p": self.p, "p_fail": self.p_fail, "p_unadjusted": self.p_raw, "p_fail_unadjusted": self.p_fail_raw,
            "universes": self.n_universes, "needed": self.n_needed, "shown_alone": self.n_shown,
            "estimate": {"low": self.estimate_low, "high": self.estimate_high},
            "worst_universe": dict(self.worst) if self.worst else None, "notes": list(self.notes),
        }


@dataclass(frozen=True)
class CheckResult:
    """Every claim's outcome; ``passed(allow_undecided)`` is the gate."""

    outcomes: tuple[ClaimOutcome, ...]
    alpha: float
    source: str
    notes: tuple[str, ...] = field(default=())

    def passed(self, allow_undecided: bool = False) -> bool:
        """True when every claim held (or, with ``allow_undecided``, none failed)."""
        bad = ("failed",) if allow_undecided else ("failed", "undecided")
        return not any(o.status in bad for o in self.outcomes)

    @property
    def counts(self) -> dict[str, int]:
        return {s: sum(o.status == s for o in self.outcomes) for s in STATUSES}

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source, "alpha": self.alpha,
            "multiplicity": f"Holm across the {len(self.outcomes)} claims, held and failed separately; "
                            "universes combined by partial conjunction (Bonferroni), valid under any dependence",
            "counts": self.counts, "claims": [o.to_dict() for o in self.outcomes], "notes": list(self.notes),
        }


def _scope(results: Results, claim: Claim) -> list[str]:
    """The universes the claim is about, as the results list them."""
    universes = results.universes
    if claim.quantifier == "primary":
        return [str(results.primary)]
    keep = np.ones(len(universes), dtype=bool)
    for axis, chosen in claim.where.items():
        wanted = {str(o) for o in (chosen if isinstance(chosen, list) else [chosen])}
        keep &= universes[axis].astype(str).isin(wanted).to_numpy()
    return [str(u) for u in universes.loc[keep, "universe_id"]]


def _per_universe(results: Results, claim: Claim) -> pd.DataFrame:
    m = results.case_matrix()
    if claim.rate is not None:
        return rate_claim_tests(m, system=str(claim.system), bound=claim.rate.bound, side=claim.rate.side)
    if claim.rank is not None:
        return rank_claim_tests(m, system=str(claim.system), rank=claim.rank)
    if claim.better is not None:
        return difference_claim_tests(m, a=claim.better, b=str(claim.worse))
    return difference_claim_tests(m, a=str(claim.candidate), b=str(claim.baseline),
                                  margin=float(claim.margin or 0))


def _num(value: Any) -> float | None:
    value = float(value)
    return value if math.isfinite(value) else None


def _raw_outcome(results: Results, claim: Claim, scope: list[str], alpha: float) -> dict[str, Any]:
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
                 "estimate": _num(estimate) if pd.notna(estimate) else None,
                 "p_hold": _num(table.loc[uid, "p_hold"])}
    return {
        "p_hold": partial_conjunction(table["p_hold"].to_numpy(), k),
        "p_fail": partial_conjunction(table["p_fail"].to_numpy(), n - k + 1),
        "n": n, "k": k, "shown": int((table["p_hold"] <= alpha).sum()),
        "low": _num(rated["estimate"].min()) if len(rated) else None,
        "high": _num(rated["estimate"].max()) if len(rated) else None,
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


def _load(claims: ClaimsFile | str | os.PathLike | Mapping[str, Any]) -> tuple[ClaimsFile, str]:
    if isinstance(claims, ClaimsFile):
        return claims, "claims"
    if isinstance(claims, Mapping):
        return parse_claims(claims), "claims"
    return read_claims(claims), str(claims)


def check(results: Results | str | os.PathLike, claims: ClaimsFile | str | os.PathLike | Mapping[str, Any], *,
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
    for claim, scope in zip(parsed.claims, scopes):
        if not scope:  # options that exist, in no universe together (an exclusion, a sample)
            raise SpecError(shown, f"claim {claim.id}: where", "expected at least one universe with these options")
    raw = [_raw_outcome(loaded, claim, scope, level) for claim, scope in zip(parsed.claims, scopes)]
    held = holm([r["p_hold"] for r in raw])
    failed = holm([r["p_fail"] for r in raw])
    outcomes = []
    for claim, r, p_hold, p_fail in zip(parsed.claims, raw, held, failed):
        status = "held" if p_hold <= level else "failed" if p_fail <= level else "undecided"
        outcomes.append(ClaimOutcome(
            claim=claim, status=status, p=p_hold, p_fail=p_fail, p_raw=r["p_hold"], p_fail_raw=r["p_fail"],
            n_universes=r["n"], n_needed=r["k"], n_shown=r["shown"], estimate_low=r["low"],
            estimate_high=r["high"], worst=r["worst"], notes=tuple(r["notes"])))
    note = _sample_note(loaded)
    source = str(loaded.source) if loaded.source is not None else loaded.name
    return CheckResult(outcomes=tuple(outcomes), alpha=level, source=source, notes=(note,) if note else ())
