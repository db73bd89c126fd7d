"""``scoring.unparsed`` on an import: a grader's reply that named no grade counts as the user says, as in a run.

A row of any importer that :func:`multiverse.core.unparsed_rows` reads as an
unparsed reply (Inspect's unscored, promptfoo's unparsed grader reply, ASSERT's
criterion left without a label, a table's ``--no-grade`` value) is counted by
the same :func:`multiverse.analysis.count_unparsed` a run's verdicts go
through: left out (``exclude``, the default), counted against the system
(``against``) or, on a pairwise scale, as a tie (``tie``). So the same data as a
run and as an import give the same rates under each policy.

Several policies make an ``unparsed`` axis: the verdicts once per policy (the
rows of every option share their judgment and transcript keys, as a scoring
axis's do), each universe's id the one rule's over its options and the policy.
It is a reading of the same judgments, so a lost judgment is counted once
(``ImportLosses.readings``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from multiverse.core import UNPARSED_POLICIES, universe_id
from multiverse.errors import InputError

__all__ = ["UNPARSED_AXIS", "check_unparsed", "count_import_unparsed", "rekeyed", "unparsed_manifest", "with_policy"]

#: The axis several policies make.
UNPARSED_AXIS = "unparsed"


def check_unparsed(unparsed: str | Sequence[str]) -> list[str]:
    """The policies asked for, checked: one or more of exclude, against, tie, each once."""
    policies = [unparsed] if isinstance(unparsed, str) else list(unparsed)
    expected = ", ".join(UNPARSED_POLICIES)
    if not policies:
        raise InputError(f"unparsed: expected at least one of {expected}", param="unparsed")
    for policy in policies:
        if policy not in UNPARSED_POLICIES:
            raise InputError(f"unparsed: {policy!r}; expected one of {expected}", param="unparsed")
    if len(set(policies)) < len(policies):
        twice = next(p for p in policies if policies.count(p) > 1)
        raise InputError(f"unparsed: {twice} is given twice; expected each policy once", param="unparsed")
    return policies


def count_import_unparsed(verdicts: pd.DataFrame, axes: Sequence[str], policies: Sequence[str],
                          scales: Mapping[str, tuple[str, float, float]]
                          ) -> tuple[pd.DataFrame, list[str], dict[str, tuple[str, str]]]:
    """``verdicts`` with each unparsed reply counted as ``policies`` say; several policies make an axis.

    ``scales``: universe id -> (scale type, min, max) of that universe (``binary`` for labels).
    Returns (verdicts, axes, origin: each universe id returned -> (the id it was made from, its
    policy)), so a caller re-keys what it holds per universe (:func:`rekeyed`). A tie on a scale that has none is
    refused in one line (``count_unparsed``), before anything is written.
    """
    from multiverse.analysis import count_unparsed

    policies, axes = list(policies), list(axes)
    ids = [str(u) for u in pd.unique(verdicts["universe_id"])]
    if len(policies) == 1:
        return (count_unparsed(verdicts, dict.fromkeys(ids, policies[0]), scales), axes,
                {u: (u, policies[0]) for u in ids})
    if UNPARSED_AXIS in axes or UNPARSED_AXIS in verdicts.columns:
        raise InputError(f"axes: {UNPARSED_AXIS}: this axis is made by several unparsed policies; rename the column",
                         param="axes")
    combos = verdicts.drop_duplicates("universe_id").set_index("universe_id")[axes] if axes else None
    options = {u: ({a: combos.at[u, a] for a in axes} if combos is not None else {}) for u in ids}
    parts, origin = [], {}
    for policy in policies:
        made = {u: universe_id({**options[u], UNPARSED_AXIS: policy}) for u in ids}
        origin.update({new: (old, policy) for old, new in made.items()})
        part = verdicts.assign(**{UNPARSED_AXIS: policy, "universe_id": verdicts["universe_id"].astype(str).map(made)})
        parts.append(count_unparsed(part, dict.fromkeys(made.values(), policy),
                                    {new: scales[old] for old, new in made.items()}))
    out = pd.concat(parts, ignore_index=True)
    columns = list(verdicts.columns)
    at = columns.index("system")
    return out[[*columns[:at], UNPARSED_AXIS, *columns[at:]]], [*axes, UNPARSED_AXIS], origin


def rekeyed(per_universe: Mapping[str, Any], origin: Mapping[str, tuple[str, str]]) -> dict[str, Any]:
    """``per_universe`` (universe id -> anything) keyed by the ids ``count_import_unparsed`` returned."""
    return {new: per_universe[old] for new, (old, _) in origin.items() if old in per_universe}


def with_policy(options: Mapping[str, Mapping[str, Any]], origin: Mapping[str, tuple[str, str]],
                axes: Sequence[str]) -> dict[str, dict[str, Any]]:
    """Each returned universe's options: its origin's, and its policy where the policies are an axis."""
    policy = UNPARSED_AXIS in axes
    return {new: {**options[old], **({UNPARSED_AXIS: p} if policy else {})} for new, (old, p) in origin.items()}


def unparsed_manifest(policies: Sequence[str]) -> str | list[str]:
    """The manifest's ``unparsed``: the policy, or the axis's options when there are several."""
    return policies[0] if len(policies) == 1 else list(policies)
