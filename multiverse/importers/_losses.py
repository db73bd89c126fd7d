"""What an import could not take as labels, and what it left out: the one contract every importer keeps.

A row the source's tool recorded without a usable grade is never a label. Its
*kind* of loss decides its status:

============== ================ ================== =====================================================
kind           status           reason begins      what the tool recorded
============== ================ ================== =====================================================
``no_grade``   ``judge_failed`` ``no grade: ``     the grader answered without a grade (unparsed: the
                                                   spec's ``scoring.unparsed`` decides, as for a run)
``grader_error`` ``judge_failed`` ``grader error: `` the scorer or the grader's call raised
``system_error`` ``rollout_failed`` ``system error: `` the system's model or provider failed
``not_run``    ``not_run``      ``not run: ``      the row was never run (a cancelled eval)
============== ================ ================== =====================================================

The kind of a row is read back from its status (and ``core.unparsed_rows``), so
every importer's rows are counted alike, whatever reason text it wrote. An
import's manifest holds ``statuses`` (rows per status), ``losses`` (per kind:
the lost things, the verdict rows they fill, and the one line ``import`` prints on
stderr) and ``dropped`` (what the tool recorded that the import did not carry
over); an empty ``dropped`` means nothing was left out.

A loss is counted once per thing the tool lost, not once per verdict row: an
import with several universes over the same judgments (Inspect's reducers,
promptfoo's scoring options, lm-eval's filters and metrics: its ``readings``)
repeats one lost judgment in each of them. A judge's loss (``no_grade``,
``grader_error``) counts *judgments*: distinct system x case x replicate x judge
(the ``judge`` column, and every axis that is not a reading, e.g. Inspect's
scorer). A system's loss (``system_error``, ``not_run``) counts *rollouts*:
distinct system x case x replicate (x any axis that neither reads a judgment
nor names who judged, e.g. ASSERT's simulated user), however many judges read them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from multiverse.core import JUDGE_FAILED, NOT_RUN, OK, ROLLOUT_FAILED, STATUSES, unparsed_rows
from multiverse.tables import DroppedRecord, ImportLoss

__all__ = ["LOSS_KINDS", "LOSS_UNITS", "Dropped", "ImportLosses", "loss_lines", "loss_reason", "row_losses", "statuses"]

#: The thing each kind of loss loses: a judge's reply (judgments) or the system's transcript (rollouts).
LOSS_UNITS: dict[str, str] = {"no_grade": "judgments", "grader_error": "judgments",
                              "system_error": "rollouts", "not_run": "rollouts"}
_ROLLOUT = ("system", "case_id", "replicate")

#: Each kind of loss: its status, the reason's first words, and what the stderr line says it was.
LOSS_KINDS: dict[str, tuple[str, str, str]] = {
    "no_grade": (JUDGE_FAILED, "no grade",
                 "the grader gave no grade (judge_failed, never a label; scoring.unparsed decides)"),
    "grader_error": (JUDGE_FAILED, "grader error", "the scorer or grader raised an error (judge_failed, never a label)"),
    "system_error": (ROLLOUT_FAILED, "system error",
                     "the system's model or provider failed (rollout_failed, never a label)"),
    "not_run": (NOT_RUN, "not run", "never run (not_run: cancelled before it ran; never a label)"),
}

Dropped = DroppedRecord


def loss_reason(kind: str, detail: str = "") -> tuple[str, str]:
    """``(status, reason)`` of a row lost to ``kind`` (a key of :data:`LOSS_KINDS`); ``detail`` the tool's words."""
    status, start, _ = LOSS_KINDS[kind]
    detail = " ".join(str(detail or "").split())
    return status, f"{start}: {detail}" if detail else start


@dataclass
class ImportLosses:
    """What one import left out (``drop``), and the manifest fields of its rows' losses (``manifest_fields``).

    ``readings`` names the import's axes whose options read one recorded judgment in
    different ways (Inspect's ``reducer``, promptfoo's ``scoring``): a loss is counted
    once across them. ``judging`` names the axes that say who judged: a rollout is the
    same across their options, and differs across any other axis (ASSERT's simulated user).
    ``calls`` maps an axis's options to the one call each reads (Inspect's ``scorer``
    option ``NAME:KEY`` of a dict scorer to ``NAME``): options of one call are one judgment.
    """

    dropped: list[DroppedRecord] = field(default_factory=list)
    readings: tuple[str, ...] = ()
    judging: tuple[str, ...] = ("judge", "scorer")
    calls: dict[str, dict[str, str]] = field(default_factory=dict)

    def drop(self, what: str, *, where: str = "", count: int | None = None, why: str = "") -> None:
        """Record that the source holds ``what`` (``count`` of them, in ``where``) and the import leaves it out."""
        self.dropped.append(DroppedRecord(what=what, where=where, count=count, why=why))

    def manifest_fields(self, verdicts: Any, axes: Any = None) -> dict[str, Any]:
        """``statuses``, ``losses`` and ``dropped`` of the import's manifest, read from its verdicts.

        ``axes`` are the import's axes (``None``: unknown, so every universe's rows are its own judgments).
        """
        judged_by = ["universe_id"] if axes is None else [a for a in axes if a not in self.readings]
        rolled_by = ["universe_id"] if axes is None else [a for a in judged_by if a not in self.judging]
        calls = {axis: mapping for axis, mapping in self.calls.items() if axis in verdicts.columns}
        if calls:  # counted by the call, not the option: a copy, so the verdicts written keep their options
            verdicts = verdicts.assign(**{axis: verdicts[axis].map(lambda o, m=m: m.get(o, o))
                                          for axis, m in calls.items()})
        return {"statuses": statuses(verdicts), "losses": {kind: loss.model_dump() for kind, loss in
                                                          row_losses(verdicts, judged_by, rolled_by).items()},
                "dropped": [d.model_dump() for d in self.dropped]}


def statuses(verdicts: Any) -> dict[str, int]:
    """Rows per status, every status of ``core.STATUSES`` listed (an unknown status after them)."""
    if "status" not in verdicts.columns:
        return {s: (len(verdicts) if s == OK else 0) for s in STATUSES}
    counts = verdicts["status"].astype(str).value_counts()
    return {**{s: int(counts.get(s, 0)) for s in STATUSES},
            **{str(s): int(n) for s, n in counts.items() if s not in STATUSES}}


def row_losses(verdicts: Any, judged_by: Any = ("universe_id",), rolled_by: Any = ("universe_id",),
               ) -> dict[str, ImportLoss]:
    """Per kind of loss that has any: lost judgments or rollouts, verdict rows, and the line ``import`` prints.

    A judgment is a distinct system x case x replicate x ``judge`` x ``judged_by`` (the
    axes that are not readings of one judgment); a rollout a distinct system x case x
    replicate x ``rolled_by`` (those axes less the ones naming who judged).
    """
    if "status" not in verdicts.columns or not len(verdicts):
        return {}
    status = verdicts["status"].astype(str).to_numpy()
    unparsed = unparsed_rows(verdicts)
    masks = {"no_grade": (status == JUDGE_FAILED) & unparsed,
             "grader_error": (status == JUDGE_FAILED) & ~unparsed,
             "system_error": status == ROLLOUT_FAILED,
             "not_run": status == NOT_RUN}
    reasons = verdicts["reason"].astype(str).to_numpy() if "reason" in verdicts.columns else None
    out = {}
    units = {"rollouts": _unit_codes(verdicts, [*_ROLLOUT, *rolled_by]),
             "judgments": _unit_codes(verdicts, [*_ROLLOUT, "judge", *judged_by])}
    for kind, mask in masks.items():
        n = int(mask.sum())
        if not n:
            continue
        example = f", e.g. {_cut(reasons[mask][0])}" if reasons is not None and reasons[mask][0] else ""
        unit = LOSS_UNITS[kind]
        lost, total = len(set(units[unit][mask])), len(set(units[unit]))
        counted = f"{lost:,} of {total:,} {unit if total != 1 else unit[:-1]}"
        if (lost, total) != (n, len(verdicts)):  # several universes read each: say how many rows they fill
            counted += f" ({n:,} of {len(verdicts):,} verdict rows across the universes)"
        out[kind] = ImportLoss(status=LOSS_KINDS[kind][0], unit=unit, lost=lost, of=total, rows=n,
                               message=f"{counted}: {LOSS_KINDS[kind][2]}{example}")
    return out


def _unit_codes(verdicts: Any, columns: list[str]) -> Any:
    """One code per row, equal for rows of the same unit (its ``columns`` present; each row alone if none are)."""
    present = list(dict.fromkeys(c for c in columns if c in verdicts.columns))
    if not present:
        return np.arange(len(verdicts))
    keys = verdicts[present].astype(str).reset_index(drop=True)
    return pd.MultiIndex.from_frame(keys).factorize()[0] if len(present) > 1 else keys[present[0]].factorize()[0]


def loss_lines(manifest: Any) -> list[str]:
    """The lines ``import`` prints on stderr: one per kind of loss, one per thing dropped."""
    lines = [f"lost: {loss.message}" for loss in manifest.losses.values()]
    for d in manifest.dropped:
        count = f" ({d.count:,})" if d.count is not None else ""
        where = f" in {d.where}" if d.where else ""
        lines.append(f"dropped: {d.what}{count}{where}" + (f": {d.why}" if d.why else ""))
    return lines


def _cut(text: str, limit: int = 160) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
