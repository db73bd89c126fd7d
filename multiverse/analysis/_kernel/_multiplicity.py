"""Multiplicity: Holm-adjusted p-values for a family of joint tests.

When one curve carries several joint tests (one per system, a difference)
and each reports three statistics, some p-value will be small by chance.
Holm's (1979) step-down procedure controls the family-wise error rate under
any dependence between the tests, which these have (they share cases), and is
uniformly more powerful than Bonferroni. The family is every p-value the
summary reports, and is named in words so a reader knows what was adjusted.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = ["adjust_tests", "holm"]


def _family(tests: list[dict[str, Any]], statistics: list[str]) -> str:
    kinds = Counter(t["kind"] for t in tests)
    parts = []
    if kinds.get("rate"):
        systems = {s for t in tests if t["kind"] == "rate" for s in t["systems"]}
        parts.append(f"{len(systems)} system{'s' * (len(systems) != 1)} vs the threshold"
                     if len(systems) == kinds["rate"]
                     else f"{kinds['rate']} rate tests")
    if kinds.get("difference"):
        n = kinds["difference"]
        parts.append(f"{n} difference test{'s' * (n != 1)}")
    return f"Holm across {' and '.join(parts)} × {len(statistics)} statistics"


def holm(p: Sequence[float] | np.ndarray) -> list[float]:
    """Holm's step-down adjustment of ``p`` (family-wise error under any dependence): the k-th smallest
    p times the number not yet rejected, made non-decreasing, capped at 1.

    statsmodels' ``multipletests(p, method="holm")`` step for step (the tests compare them): importing
    statsmodels, and scipy.stats with it, cost every first curve a second or more for these four lines.
    """
    p = np.asarray(p, dtype=float)
    if len(p) <= 1:
        return [float(v) for v in p]
    order = np.argsort(p)
    adjusted = np.maximum.accumulate(np.take(p, order) * np.arange(len(p), 0, -1))
    adjusted[adjusted > 1] = 1
    out = np.empty_like(adjusted)
    out[order] = adjusted
    return [float(v) for v in out]


def adjust_tests(tests: list[dict[str, Any]]) -> dict[str, Any] | None:
    """Add ``p_holm`` beside every ``p`` in the tests' ``statistics``; describe the family.

    ``tests`` are :meth:`JointTest.to_dict` entries (changed in place).
    Returns ``{"method": "holm", "family": str, "n_p_values": int}`` or None
    when there is no test.
    """
    if not tests:
        return None
    entries = [(test, name) for test in tests for name in test["statistics"]]
    raw = np.array([test["statistics"][name]["p"] for test, name in entries], dtype=float)
    adjusted = holm(raw)
    for (test, name), p in zip(entries, adjusted):
        test["statistics"][name]["p_holm"] = float(p)
    return {
        "method": "holm",
        "family": _family(tests, list(tests[0]["statistics"])),
        "n_p_values": len(raw),
    }
