"""Agreement on binary labels: Cohen's kappa, Gwet's AC1, nominal alpha and the pair rows of ``agreement``.

Used for compliance labels and for scores cut at a threshold (score >= cut),
so a scored audit shows agreement on its cut labels beside agreement on the
raw scores (``agreement_scored``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ._units import _paired

__all__ = ["SMALL", "binary_summary", "cohen_kappa", "gwet_ac1"]

# Below this many paired units a kappa's standard error exceeds about 0.15 at any
# agreement level: the customary minimum for reading a kappa at all.
SMALL = 30


# --------------------------------------------------------------------------- coefficients


def gwet_ac1(table: np.ndarray | Sequence[Sequence[float]]) -> float:
    """Gwet's AC1 of a q x q contingency table of two raters (rows: rater a, columns: rater b).

    AC1 = (p_a - p_e) / (1 - p_e), with p_a the share on the diagonal and
    p_e = sum_k pi_k (1 - pi_k) / (q - 1), pi_k the mean of the two raters'
    marginal shares of category k (Gwet 2008).
    """
    counts = np.asarray(table, dtype=float)
    total = counts.sum()
    if total == 0:
        return float("nan")
    q = counts.shape[0]
    observed = np.trace(counts) / total
    prevalence = (counts.sum(0) + counts.sum(1)) / (2.0 * total)
    chance = (prevalence * (1.0 - prevalence)).sum() / (q - 1)
    return float((observed - chance) / (1.0 - chance))


def cohen_kappa(table: np.ndarray | Sequence[Sequence[float]]) -> float:
    """Cohen's kappa of a q x q contingency table; NaN when chance agreement is 1.

    statsmodels' ``cohens_kappa(table, return_results=False)`` step for step (the tests compare them):
    importing statsmodels, and scipy.stats with it, cost the first agreement a second or more.
    """
    counts = np.asarray(table, dtype=float)
    total = counts.sum()
    if total == 0:
        return float("nan")
    chance = (counts.sum(0) * counts.sum(1)).sum() / total**2
    if np.isclose(chance, 1.0):
        return float("nan")
    rows, columns = counts.sum(1) / total, counts.sum(0) / total
    expected = np.diag(columns * rows[:, None]).sum()
    return float((np.diag(counts).sum() / total - expected) / (1 - expected))


def _krippendorff_alpha(patterns: np.ndarray, counts: np.ndarray) -> float:
    """Nominal alpha of a units x options label matrix (-1 = missing), given as its distinct rows and how
    many units show each (``_patterns``).

    Alpha rests on the coincidence matrix, a sum over units, so units with the same labels are summed
    once with their count: at 6M units the package's own pass over them took 2 s. For two labels
    alpha = 1 - (n - 1) o_01 / (n_0 n_1), with o_01 the coincidences of a 0 and a 1 (each unit's pairs
    over its m - 1) and n_c the coincidences of c (Krippendorff 2011); tests hold it to the package.
    """
    positive = (patterns == 1).sum(1).astype(float)
    negative = (patterns == 0).sum(1).astype(float)
    labelled = positive + negative
    paired = labelled >= 2
    if not paired.any():
        return float("nan")
    weight = counts[paired] / (labelled[paired] - 1)
    positive, negative = positive[paired], negative[paired]
    mixed = float((weight * positive * negative).sum())
    n_negative = float((weight * negative * (negative - 1)).sum()) + mixed
    n_positive = float((weight * positive * (positive - 1)).sum()) + mixed
    if n_negative == 0 or n_positive == 0:
        return float("nan")  # one label only: expected disagreement is 0
    return 1.0 - (n_negative + n_positive - 1) * mixed / (n_negative * n_positive)


# --------------------------------------------------------------------------- pairs


def _patterns(labels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distinct label rows and how many units show each: at most 3^k rows for k options."""
    if labels.shape[1] > 30:  # base-3 codes would overflow int64
        return labels, np.ones(len(labels), dtype=np.int64)
    powers = 3 ** np.arange(labels.shape[1], dtype=np.int64)
    flat = (labels.astype(np.int64) + 1) @ powers
    if labels.shape[1] <= 12:  # at most 531441 patterns: count them without sorting
        counts = np.bincount(flat, minlength=1)
        codes = np.flatnonzero(counts)
        counts = counts[codes]
    else:
        codes, counts = np.unique(flat, return_counts=True)
    return (codes[:, None] // powers % 3 - 1).astype(np.int8), counts


def _pairs(patterns: np.ndarray, counts: np.ndarray, options: list[Any], notes: list[str], what: str,
           small: list[str]) -> list[dict[str, Any]]:
    """Pair rows of the label matrix given by ``_patterns``; pairs on fewer than ``SMALL`` units are
    appended to ``small`` (and noted one by one for the transcript-level pairs)."""
    pairs = []
    for i in range(len(options)):
        for j in range(i + 1, len(options)):
            both = (patterns[:, i] >= 0) & (patterns[:, j] >= 0)
            cells = np.bincount(patterns[both, i] * 2 + patterns[both, j], weights=counts[both],
                                minlength=4).astype(np.int64)
            # rows: a compliant, a non-compliant; columns: b compliant, b non-compliant
            table = np.array([[cells[3], cells[2]], [cells[1], cells[0]]])
            n = int(table.sum())
            kappa = cohen_kappa(table)
            degenerate = 0 < n and np.count_nonzero(table) == 1
            if n == 0:
                notes.append(f"{what}{options[i]} vs {options[j]}: no paired units")
            elif np.isnan(kappa):
                label = "compliant" if table[0, 0] == n else "non-compliant"
                notes.append(f"{what}{options[i]} vs {options[j]}: Cohen's kappa undefined "
                             f"(every paired label is {label}); Gwet's AC1 is still defined")
            if 0 < n < SMALL:
                small.append(f"{options[i]} vs {options[j]}")
                if not what:
                    notes.append(
                        f"{options[i]} vs {options[j]}: only {n} paired unit{'s' if n != 1 else ''} "
                        f"(fewer than {SMALL}): kappa and AC1 are too imprecise to read"
                        + ("; every unit falls in one cell of the 2 x 2 table, so kappa and AC1 "
                           "say nothing about agreement beyond chance" if degenerate else ""))
            pairs.append({
                "a": options[i],
                "b": options[j],
                "n": n,
                "percent": float(np.trace(table) / n) if n else float("nan"),
                "cohen_kappa": kappa,
                "gwet_ac1": gwet_ac1(table),
                "bias": float((table[0, 1] - table[1, 0]) / n) if n else float("nan"),
                "small_sample": bool(0 < n < SMALL),
                "degenerate": bool(degenerate),
                "confusion": {
                    "both_compliant": int(table[0, 0]),
                    "a_only_compliant": int(table[0, 1]),
                    "b_only_compliant": int(table[1, 0]),
                    "both_noncompliant": int(table[1, 1]),
                },
            })
    return pairs


def binary_summary(labels: np.ndarray, options: list[Any], notes: list[str], what: str,
             small: list[str]) -> dict[str, Any]:
    patterns, counts = _patterns(labels)
    alpha = _krippendorff_alpha(patterns, counts)
    if np.isnan(alpha) and _paired(patterns):
        notes.append(f"{what}Krippendorff's alpha undefined (every paired label is the same)")
    return {"krippendorff_alpha": alpha, "pairs": _pairs(patterns, counts, options, notes, what, small)}
