"""One analysis per group of a run's rows (``by=``: a judge, a subset, a system, any axis or design factor).

Each group's analysis is the analysis of exactly that group's verdict rows (and the criteria of their
judgments): the same function on a :class:`~multiverse.results.Results` of those rows, so a group's figure is
what the ungrouped analysis gives when run on them. The groups come back as one document
(``{"analysis", "by", "groups": [{"group", "document"}], "not_computed": [{"group", "reason"}], "notes"}``, typed
by :class:`GroupedDocument`) and one table: the groups' tables stacked, the group a column named after ``by``.

A group the analysis cannot compute (no row counted, too few, no human labels, one system to rank) does
not stop the others: it is listed in ``not_computed`` with the analysis's own reason, and said in a note.
Only when no group can be computed is the whole refused, in one line naming the groups' reasons.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Generic

import pandas as pd

from multiverse.errors import InputError
from multiverse.results._analysis import D
from multiverse.results._documents import Document, Scalar

if TYPE_CHECKING:
    from multiverse.results._analysis import Analysis

# ``Results`` calls this module, so the results are typed by what is read of them (their own class makes
# each group's results), never imported back.
Results = Any

__all__ = ["Group", "GroupedDocument", "NotComputed", "agreement", "by_column", "grouped", "ranking"]


class Group(Document, Generic[D]):
    """One group's value of the ``by`` column and its analysis's document."""

    group: Scalar
    document: D


class NotComputed(Document):
    """A group whose analysis could not be computed, and why (the analysis's own one line)."""

    group: Scalar
    reason: str


class GroupedDocument(Document, Generic[D]):
    """``<analysis> --by FACTOR --json``: the analysis of each group's rows, in the order the rows first name them;
    the groups it could not compute, each with its reason."""

    analysis: str
    by: str
    groups: list[Group[D]]
    not_computed: list[NotComputed]
    notes: list[str]


def by_column(results: Results, by: str, *, refused: dict[str, str] | None = None) -> str:
    """``by`` checked to be an axis, a design factor or ``system`` of these results (and not one of ``refused``,
    each with the reason it cannot group this analysis)."""
    allowed = list(dict.fromkeys([*results.axes, *results.factors, "system"]))
    if by not in allowed:
        raise InputError(f"by {by}: expected an axis, a design factor or system: one of {', '.join(allowed)}",
                         param="by")
    if refused and by in refused:
        raise InputError(f"by {by}: {refused[by]}", param="by")
    return by


def grouped(results: Results, by: str, name: str, run: Callable[[Results], Analysis[Any]],
            schema: type[Document], *, notes: Sequence[str] = ()) -> Analysis[Any]:
    """``run`` on the rows of each value of ``by`` (missing values are no group), stacked into one analysis whose
    groups' documents are typed by ``schema``."""
    from multiverse.results._analysis import Analysis

    column = results.verdicts[by]
    values = [v for v in pd.unique(column.to_numpy(dtype=object)) if not pd.isna(v)]
    if not values:
        raise InputError(f"by {by}: expected at least one row with a value in column {by!r}", param="by")
    groups, frames, notes, skipped = [], [], list(notes), []
    missing = int(column.isna().sum())
    if missing:
        notes.append(f"{missing} rows have no {by} and are in no group")
    for value in values:
        part = _part(results, (column == value).to_numpy(dtype=bool, na_value=False))
        try:
            analysis = run(part)
        except InputError as exc:
            # Said of the group's rows, not the run's ("expected at least one row with status ok" was read of a
            # run that has thousands, where one group had none); the groups that can be computed still are.
            skipped.append({"group": _plain(value), "reason": " ".join(str(exc).split())})
            notes.append(f"{by}={_shown(value)}: not computed: {skipped[-1]['reason']}")
            continue
        groups.append({"group": _plain(value), "document": analysis.source})
        frame = analysis.frame
        frames.append(frame.assign(**{by: value}) if by not in frame.columns else frame.copy())
        notes += [f"{by}={value}: {note}" for note in analysis.notes]
    if not groups:
        reasons = "; ".join(f"group {_shown(g['group'])}: {g['reason']}" for g in skipped[:3])
        more = f"; and {len(skipped) - 3} more groups" if len(skipped) > 3 else ""
        if len({g["reason"] for g in skipped}) == 1:  # one reason for all: said once, not once per group
            named = ", ".join(_shown(g["group"]) for g in skipped[:3]) + (", ..." if len(skipped) > 3 else "")
            reasons, more = f"every group ({named}): {skipped[0]['reason']}", ""
        raise InputError(f"by {by}: no group can be computed ({reasons}{more})", param="by")
    frame = pd.concat(frames, ignore_index=True)
    frame = frame[[by, *(c for c in frame.columns if c != by)]]
    document = {"analysis": name, "by": by, "groups": groups, "not_computed": skipped, "notes": notes}
    return Analysis(name, document, frame, simulated=results.simulated, schema=GroupedDocument[schema])  # type: ignore[valid-type]


def _part(results: Results, rows: Any) -> Results:
    """The results of some of the verdict rows: the same axes, factors, manifest, primary and source."""
    verdicts = results.verdicts[rows].reset_index(drop=True)
    criteria = results.criteria
    if criteria is not None and "judgment_key" in criteria.columns and "judgment_key" in verdicts.columns:
        criteria = criteria[criteria["judgment_key"].isin(set(verdicts["judgment_key"].dropna()))]
    return type(results)(verdicts, criteria=criteria, axes=results.axes, factors=results.factors,
                   manifest=results.manifest, primary=results.primary, source=results.source)


def _shown(value: Any) -> str:
    """A group's value in an error: quoted and escaped, and cut if long."""
    text = ascii(_plain(value))
    return text if len(text) <= 80 else text[:77] + "..."


def _plain(value: Any) -> Any:
    """A group's value as JSON reads it (a NumPy number as a Python one)."""
    return value.item() if hasattr(value, "item") else value


def agreement(results: Results, axis: str, by: str | None) -> Analysis[Any]:
    """``Results.agreement``: across ``axis``, for all rows or per value of ``by``."""
    from multiverse.results import _analyses
    from multiverse.results._documents import AgreementDocument

    if by is None:
        return _analyses.agreement(results, axis)
    by = by_column(results, by, refused={axis: "the options compared are its values; expected another column"})

    def run(part: Results) -> Any:
        analysis = part.agreement(axis)
        source = analysis.source
        if not source.get("n_units") and not source.get("scores"):
            # An empty table beside the groups' findings reads as agreement measured; the group's notes say why not.
            why = "; ".join(source.get("notes", [])[:2]) or "no verdicts"
            raise InputError(f"no unit paired across {source.get('axis', axis)}: {why}")
        return analysis

    return grouped(results, by, "agreement", run, AgreementDocument)


def ranking(results: Results, axes: list[str] | None, boot: int, method: str, anchor: str | None, prior: float,
            seed: int, by: str | None) -> Analysis[Any]:
    """``Results.ranking``: of rates or of Bradley-Terry scores (``method`` rate or bt), all rows or per ``by``."""
    from multiverse.results import _analyses
    from multiverse.results._ranking_documents import BradleyTerryDocument, RankingDocument

    if method not in ("rate", "bt"):
        raise InputError(f"method {method}: expected rate or bt (Bradley-Terry)", param="method")
    if by is not None:
        by = by_column(results, by, refused={"system": "a ranking compares systems; expected another column"})
        schema = BradleyTerryDocument if method == "bt" else RankingDocument

        def run(part: Results) -> Any:
            if method == "rate":  # Bradley-Terry reads games, the reference's and the opponents' too: its own checks
                _two_systems(part)
            return part.ranking(axes=axes, boot=boot, method=method, anchor=anchor, prior=prior, seed=seed)

        return grouped(results, by, "ranking", run, schema)
    if method == "bt":
        return _analyses.bradley_terry(results, axes, boot, anchor, prior, seed)
    return _analyses.ranking(results, axes, boot, seed)


def _two_systems(part: Results) -> None:
    """Refuse a group with fewer than two systems whose rates are ranked (the reference's is not): its one
    system is first in every universe by construction, which a grouped table would show beside the findings."""
    from multiverse.core import OK

    counted = part.verdicts[(part.verdicts["status"] == OK).to_numpy()]
    ranked = sorted(set(map(str, counted["system"].unique())) - {part.reference})
    if len(ranked) < 2:
        besides = " besides the reference" if part.reference is not None else ""
        raise InputError(f"expected at least two systems to rank{besides}, got {len(ranked)}"
                         f"{' (' + ranked[0] + ')' if ranked else ''}", param="system")
