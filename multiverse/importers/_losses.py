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
import's manifest holds ``statuses`` (rows per status), ``losses`` (rows per
kind, with the one line ``import`` prints on stderr) and ``dropped`` (what the
tool recorded that the import did not carry over); an empty ``dropped`` means
nothing was left out.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from multiverse.core import OK, STATUSES, unparsed_rows
from multiverse.tables import DroppedRecord, ImportLoss

__all__ = ["LOSS_KINDS", "Dropped", "ImportLosses", "loss_lines", "loss_reason", "row_losses", "statuses"]

#: Each kind of loss: its status, the reason's first words, and what the stderr line says it was.
LOSS_KINDS: dict[str, tuple[str, str, str]] = {
    "no_grade": ("judge_failed", "no grade",
                 "the grader gave no grade (judge_failed, never a label; scoring.unparsed decides)"),
    "grader_error": ("judge_failed", "grader error", "the scorer or grader raised an error (judge_failed, never a label)"),
    "system_error": ("rollout_failed", "system error",
                     "the system's model or provider failed (rollout_failed, never a label)"),
    "not_run": ("not_run", "not run", "never run (not_run: cancelled before it ran; never a label)"),
}

Dropped = DroppedRecord


def loss_reason(kind: str, detail: str = "") -> tuple[str, str]:
    """``(status, reason)`` of a row lost to ``kind`` (a key of :data:`LOSS_KINDS`); ``detail`` the tool's words."""
    status, start, _ = LOSS_KINDS[kind]
    detail = " ".join(str(detail or "").split())
    return status, f"{start}: {detail}" if detail else start


@dataclass
class ImportLosses:
    """What one import left out (``drop``), and the manifest fields of its rows' losses (``manifest_fields``)."""

    dropped: list[DroppedRecord] = field(default_factory=list)

    def drop(self, what: str, *, where: str = "", count: int | None = None, why: str = "") -> None:
        """Record that the source holds ``what`` (``count`` of them, in ``where``) and the import leaves it out."""
        self.dropped.append(DroppedRecord(what=what, where=where, count=count, why=why))

    def manifest_fields(self, verdicts: Any) -> dict[str, Any]:
        """``statuses``, ``losses`` and ``dropped`` of the import's manifest, read from its verdicts."""
        return {"statuses": statuses(verdicts), "losses": {kind: loss.model_dump() for kind, loss in
                                                          row_losses(verdicts).items()},
                "dropped": [d.model_dump() for d in self.dropped]}


def statuses(verdicts: Any) -> dict[str, int]:
    """Rows per status, every status of ``core.STATUSES`` listed (an unknown status after them)."""
    if "status" not in verdicts.columns:
        return {s: (len(verdicts) if s == OK else 0) for s in STATUSES}
    counts = verdicts["status"].astype(str).value_counts()
    return {**{s: int(counts.get(s, 0)) for s in STATUSES},
            **{str(s): int(n) for s, n in counts.items() if s not in STATUSES}}


def row_losses(verdicts: Any) -> dict[str, ImportLoss]:
    """Rows per kind of loss that has any, each with the line ``import`` prints."""
    if "status" not in verdicts.columns or not len(verdicts):
        return {}
    status = verdicts["status"].astype(str).to_numpy()
    unparsed = unparsed_rows(verdicts)
    masks = {"no_grade": (status == "judge_failed") & unparsed,
             "grader_error": (status == "judge_failed") & ~unparsed,
             "system_error": status == "rollout_failed",
             "not_run": status == "not_run"}
    reasons = verdicts["reason"].astype(str).to_numpy() if "reason" in verdicts.columns else None
    out = {}
    for kind, mask in masks.items():
        n = int(mask.sum())
        if not n:
            continue
        example = f", e.g. {_cut(reasons[mask][0])}" if reasons is not None and reasons[mask][0] else ""
        rows = f"{n:,} of {len(verdicts):,} row{'s' if len(verdicts) != 1 else ''}"
        out[kind] = ImportLoss(status=LOSS_KINDS[kind][0], rows=n, message=f"{rows}: {LOSS_KINDS[kind][2]}{example}")
    return out


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
