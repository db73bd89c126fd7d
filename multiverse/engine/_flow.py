"""A run's draft, rollout and judge units as one flow: each unit starts when what it reads is stored.

Run stage by stage, a run's threads wait at the end of each stage for its
slowest units (a rollout is several calls in a row) while the next stage's
units could already start. On a backend that can (``LocalThreads.flows``),
:func:`run_flow` hands the executor the units that can start now and, as
units end, the ones they made ready: a rollout once its case is stored, a
judge call once its transcript (and a pairwise judge's reference transcript)
is stored with status ok. The units are exactly those the stages would run,
with the same upstream records (read from the store, as the stages read
them), so the calls and the store's entries are the same; only their order
changes. Batched roles (``multiverse.engine._waves``) need a stage's requests
together and keep the stages.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any, cast

from multiverse.core import OK
from multiverse.engine._backend import ELSEWHERE
from multiverse.engine._executor import Executor
from multiverse.store import Records, Store

__all__ = ["run_flow"]


def run_flow(executor: Executor, st: Store, records: Records, cases: list[Any], transcripts: list[Any],
             judgments: list[Any]) -> None:
    """Compute the missing ``cases``, ``transcripts`` and ``judgments`` as one flow on ``executor``.

    ``records`` holds what is stored already (and the cases given in a file); the
    units' upstream is read from it, and what the flow stores is added to it as
    each unit ends. A rollout whose case was not stored, and a judge call whose
    transcript is not ok, never starts, as in a run stage by stage.
    """
    # Read and written here as the plain dicts they are (the store checked each record's shape).
    known_cases = cast("dict[str, Any]", records["case"])
    known_transcripts = cast("dict[str, Any]", records["transcript"])
    coming_cases = {c.key for c in cases}
    rollouts_of: dict[str, list[Any]] = defaultdict(list)  # case key -> rollouts waiting for it
    first: list[tuple[str, Any]] = [("case", c) for c in cases]
    rollouts = 0
    for t in transcripts:
        if t.case_key in known_cases:
            first.append(("transcript", t))
        elif t.case_key in coming_cases:
            rollouts_of[t.case_key].append(t)
        else:
            continue
        rollouts += 1
    coming = {unit.key for stage, unit in first if stage == "transcript"} | {t.key for ts in rollouts_of.values() for t in ts}
    judges_of: dict[str, list[Any]] = defaultdict(list)  # transcript key -> judge calls waiting for it
    needs: dict[str, int] = {}  # judge call key -> transcripts it still waits for
    judge_calls = 0
    for j in judgments:
        reads = [k for k in (j.transcript_key, j.reference_key) if k is not None]
        if any(k not in coming and known_transcripts.get(k, {}).get("status") != OK for k in reads):
            continue  # a transcript it reads failed, or will never be rolled out
        waits = [k for k in reads if known_transcripts.get(k, {}).get("status") != OK]
        judge_calls += 1
        if not waits:
            first.append(("judgment", j))
            continue
        needs[j.key] = len(waits)
        for k in waits:
            judges_of[k].append(j)

    if not first:
        return  # everything is stored (or can never run), as a run stage by stage starts no stage

    def follow(ended: list[tuple[str, Any, str | None]]) -> list[tuple[str, Any]]:
        stored = defaultdict(list)
        for stage, unit, failure in ended:
            if stage != "judgment" and failure in (None, ELSEWHERE):
                stored[stage].append(unit.key)
        ready: list[tuple[str, Any]] = []
        if stored["case"]:
            for key, record in st.get_many("case", stored["case"]).items():
                known_cases[key] = record
                ready += [("transcript", t) for t in rollouts_of.pop(key, [])]
        if stored["transcript"]:
            for key, record in st.get_many("transcript", stored["transcript"]).items():
                known_transcripts[key] = record
                waiting = judges_of.pop(key, [])
                if record.get("status") != OK:
                    continue  # its judge calls never start (a pairwise one may wait on its other transcript: dropped)
                for j in waiting:
                    needs[j.key] -= 1
                    if needs[j.key] == 0:
                        del needs[j.key]
                        ready.append(("judgment", j))
        return ready

    executor.flow({"case": (len(cases), lambda unit: None),
                   "transcript": (rollouts, lambda unit: dict(known_cases[unit.case_key]["case"])),
                   "judgment": (judge_calls, _judged(known_transcripts))}, first, follow)


def _judged(transcripts: dict[str, Any]) -> Any:
    def judged(unit: Any) -> Any:
        # A pairwise judge reads two transcripts: the system's and the reference system's.
        turns = transcripts[unit.transcript_key]["turns"]
        return turns if unit.reference_key is None else (turns, transcripts[unit.reference_key]["turns"])

    return judged
