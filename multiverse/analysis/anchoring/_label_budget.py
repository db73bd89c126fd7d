"""Planning the labelling budget: how much narrower human-anchored intervals get with N labels.

Start from the PPI++ variance (``multiverse.analysis.anchoring``) at its
optimal lambda and express the judge's agreement with people as its
sensitivity and specificity. README › Human anchoring has the derivation.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from scipy import special

from multiverse.errors import InputError

__all__ = ["anchored_width", "human_power"]


def anchored_width(labels: Any, transcripts: Any, rate: Any, sensitivity: Any, specificity: Any,
                   alpha: float = 0.05) -> dict[str, np.ndarray]:
    """Expected interval widths with ``labels`` human labels among ``transcripts`` per universe x system.

    From the PPI++ variance at the optimal lambda (derivation in README ›
    Human anchoring): with Y the human label, f the judge's, rho their
    correlation, n labelled and N = transcripts - n unlabelled,

        var(PPI++) = var(Y) / n * (1 - rho^2 * N / (n + N)),

    and for a judge of sensitivity se (violations caught) and specificity sp
    (compliance confirmed) at human rate p (compliant share), with
    r = p*sp + (1-p)*(1-se) its rate, rho^2 = p(1-p)(se+sp-1)^2 / (r(1-r)).
    Widths are the normal intervals' 2 z sqrt(var); ``effective_labels`` is
    how many labels alone would give the anchored width. Arguments broadcast.
    """
    n = np.asarray(labels, float)
    total = np.asarray(transcripts, float)
    p, se, sp = (np.asarray(x, float) for x in (rate, sensitivity, specificity))
    for name, x in (("rate", p), ("sensitivity", se), ("specificity", sp)):
        if np.any(~np.isfinite(x)) or np.any((x < 0) | (x > 1)):
            raise InputError(f"{name}: expected a number between 0 and 1", param=name)
    if np.any(n < 1) or np.any(total < n):
        raise InputError("labels: expected at least 1 and at most the transcripts", param="labels")
    r = p * sp + (1 - p) * (1 - se)
    with np.errstate(divide="ignore", invalid="ignore"):
        rho2 = np.where(r * (1 - r) > 0, p * (1 - p) * (se + sp - 1) ** 2 / (r * (1 - r)), 0.0)
    unlabelled = total - n
    shrink = 1 - rho2 * unlabelled / np.maximum(n + unlabelled, 1)
    z = special.ndtri(1 - alpha / 2)
    human = 2 * z * np.sqrt(p * (1 - p) / n)
    anchored = human * np.sqrt(shrink)
    with np.errstate(divide="ignore", invalid="ignore"):
        effective = np.where(shrink > 0, n / shrink, np.inf)
    return {"human_width": human, "anchored_width": anchored, "ratio": np.sqrt(shrink),
            "correlation": np.sqrt(rho2), "effective_labels": effective}


def human_power(*, labels: int, transcripts: int, baseline_rate: float,
                agreement: Sequence[tuple[float, float]] = ((0.7, 0.7), (0.8, 0.8), (0.9, 0.9), (0.95, 0.95)),
                alpha: float = 0.05) -> dict[str, Any]:
    """The ``multiverse power SPEC --human N`` report: anchored vs humans-only widths per judge quality.

    ``labels`` per system (N), ``transcripts`` a system has in one universe
    (cases x replicates), ``agreement`` the (sensitivity, specificity) pairs to
    plan for (e.g. the judges' from an earlier ``calibrate``). JSON-ready::

        {"labels", "transcripts", "baseline_rate", "alpha", "assumption",
         "judges": [{"sensitivity", "specificity", "correlation", "human_width",
                     "anchored_width", "ratio", "effective_labels"}]}
    """
    if labels > transcripts:
        raise InputError(f"labels: {labels} labels per system but only {transcripts} transcripts per system",
                         param="labels")
    rows = []
    for se, sp in agreement:
        w = anchored_width(labels, transcripts, baseline_rate, se, sp, alpha)
        rows.append({"sensitivity": se, "specificity": sp,
                     **{k: (float(x) if math.isfinite(float(x)) else None) for k, x in w.items()}})
    return {"labels": labels, "transcripts": transcripts, "baseline_rate": baseline_rate, "alpha": alpha,
            "assumption": "labels are a uniform random sample of each system's transcripts and people are the ground "
                          "truth; widths are the normal approximation at the PPI++ optimal lambda, transcripts independent",
            "judges": rows}
