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

import numpy as np
from statsmodels.stats.multitest import multipletests

__all__ = ["adjust_tests"]


def _family(tests: list[dict], statistics: list[str]) -> str:
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


def adjust_tests(tests: list[dict]) -> dict | None:
    """Add ``p_holm`` beside every ``p`` in the tests' ``statistics``; describe the family.

    ``tests`` are :meth:`JointTest.to_dict` entries (changed in place).
    Returns ``{"method": "holm", "family": str, "n_p_values": int}`` or None
    when there is no test.
    """
    if not tests:
        return None
    entries = [(test, name) for test in tests for name in test["statistics"]]
    raw = np.array([test["statistics"][name]["p"] for test, name in entries], dtype=float)
    adjusted = multipletests(raw, method="holm")[1] if len(raw) > 1 else raw
    for (test, name), p in zip(entries, adjusted):
        test["statistics"][name]["p_holm"] = float(p)
    return {
        "method": "holm",
        "family": _family(tests, list(tests[0]["statistics"])),
        "n_p_values": len(raw),
    }
