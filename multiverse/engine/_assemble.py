"""A run folder: the tables assembled from stored records, its manifest, and how it is written.

A run folder (``runs/<spec>/``) holds ``verdicts``, ``criteria`` and ``rates``
(each as ``.parquet`` and ``.csv``, ``multiverse.tables._tables``), ``transcripts.jsonl``,
the resolved ``spec.yaml`` and ``manifest.json``. :func:`assemble` builds the
verdicts and criteria tables from stored records without a model call;
:func:`run_rates` counts the verdicts into rates (``multiverse.analysis.rates``);
:func:`run_manifest` is the run's record of what was asked, computed, reused
and failed. The tables room writes the folder (``multiverse.tables.write_run_folder``).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Mapping
from datetime import datetime, timezone
from typing import Any

import pandas as pd

from multiverse.core import (
    CRITERIA_COLUMNS,
    OK,
    SCHEMA_VERSION,
    SCORE,
    SCORE_CRITERIA,
    STAGE_OF_RECORD,
    STATUSES,
    digest,
    is_simulated,
)
from multiverse.spec import Spec, Universe, axis_stages, to_yaml_dict
from multiverse.store import Records, versions
from multiverse.tables import universe_entry
from multiverse.work import Row, Work

__all__ = ["assemble", "run_manifest", "run_rates"]

#: no score: a binary verdict, a failure or an exclusion
NAN = float("nan")


def assemble(spec: Spec, work: Work, records: Records,
             failures: Mapping[str, Mapping[str, str]]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The verdicts and criteria tables of ``work`` from its stored ``records`` (no model calls).

    ``records`` maps store stage (case, transcript, judgment) -> key -> record;
    ``failures`` maps store stage -> key -> the reason a unit of this run failed.
    A scored judgment's calls become criteria rows of their own (criterion
    ``[score]``, or ``[score ab]``/``[score ba]`` for a pair) holding the score on
    the system's side in a ``score`` column (only a run with a scored universe has
    it); its verdict holds the mean (``analysis.scoring``).
    """
    from multiverse.analysis import count_unparsed, score_judgments, score_verdicts

    judgments = records["judgment"]
    criteria_rows: list[tuple[Any, ...]] = []
    sample_rows, call_rows, seen = [], [], set()
    for row in work.rows:
        if row.judgment_key in seen:
            continue
        seen.add(row.judgment_key)
        scale = row.universe.spec.judge.scale
        for sample, call_key in enumerate(row.judge_calls):
            record = judgments.get(call_key)
            if scale.scored:
                # With its scale's midpoint: scoring.orders agree reads each call's verdict (win, tie, loss).
                call_rows.append((*_scored_call(row.judgment_key, work.judge_calls[call_key], scale, record,
                                                failures, criteria_rows), (scale.min + scale.max) / 2))
                continue
            if record is None:
                reason = failures.get("judgment", {}).get(call_key, "not judged: its transcript failed")
                sample_rows.append((row.judgment_key, sample, "judge_failed", reason))
                continue
            sample_rows.append((row.judgment_key, sample, record["status"], record.get("reason", "")))
            for c in record.get("criteria", []):
                criteria_rows.append((row.judgment_key, sample, c["criterion"], c["permissible"], c["applicable"],
                                      c["compliant"], c["rationale"], NAN))
    criteria = pd.DataFrame(criteria_rows, columns=[*CRITERIA_COLUMNS, SCORE])
    criteria = criteria.astype({"sample": "int64", "permissible": "bool", "applicable": "bool", "compliant": "boolean",
                                SCORE: "float64"})
    if not any(r.universe.spec.judge.scale.scored for r in work.rows):
        criteria = criteria.drop(columns=SCORE)  # a binary run's criteria hold labels only, as they always have
    samples = pd.DataFrame(sample_rows, columns=["judgment_key", "sample", "status", "reason"])

    axes, factors = list(spec.axes), spec.factors
    verdict_of = {rule: score_verdicts(criteria, samples, rule).set_index("judgment_key")
                  for rule in {r.universe.spec.scoring.rule for r in work.rows if not r.universe.spec.judge.scale.scored}}
    calls = pd.DataFrame(call_rows, columns=["judgment_key", "sample", "status", "reason", "score", "midpoint"])
    scores = {orders: score_judgments(calls, orders).set_index("judgment_key")
              for orders in {r.universe.spec.scoring.orders for r in work.rows if r.universe.spec.judge.scale.scored}}
    rows = []
    for row in work.rows:
        u = row.universe
        scored = u.spec.judge.scale.scored
        status, reason, compliant, score = _row_verdict(row, records, failures,
                                                        scores[u.spec.scoring.orders] if scored
                                                        else verdict_of[u.spec.scoring.rule])
        rows.append({
            "universe_id": u.id,
            **{a: u.options[a] for a in axes},
            "system": row.system,
            "case_id": row.case_id,
            **{f: row.cell.get(f) for f in factors},
            "replicate": row.replicate,
            "transcript_key": row.transcript_key,
            "judgment_key": row.judgment_key,
            "status": status,
            "reason": reason,
            "compliant": compliant,
            "score": score,
        })
    verdicts = pd.DataFrame.from_records(rows)
    if verdicts.empty:
        verdicts = pd.DataFrame(columns=["universe_id", *axes, "system", "case_id", *factors, "replicate",
                                         "transcript_key", "judgment_key", "status", "reason", "compliant", "score"])
    verdicts["compliant"] = verdicts["compliant"].astype("boolean")
    verdicts["replicate"] = verdicts["replicate"].astype("int64")
    verdicts["score"] = verdicts["score"].astype("float64")
    # A judge answer that named no verdict counts as each universe's scoring.unparsed says (default: left out).
    universes = {r.universe.id: r.universe.spec for r in work.rows}
    verdicts = count_unparsed(verdicts, {u: s.scoring.unparsed for u, s in universes.items()},
                              {u: (s.judge.scale.type, s.judge.scale.min, s.judge.scale.max) for u, s in universes.items()})
    return verdicts, criteria




def _scored_call(judgment_key: str, unit: Any, scale: Any, record: Mapping[str, Any] | None,
                 failures: Mapping[str, Mapping[str, str]], criteria_rows: list[tuple[Any, ...]]) -> tuple[Any, ...]:
    """One scored judge call as (judgment_key, sample, status, reason, score on the system's side).

    An ok call also adds its criteria row. The stored record is read as untrusted: a score
    that is missing, not a number or off the scale is a failed call, never a score.
    """
    if record is None:
        reason = failures.get("judgment", {}).get(unit.key, "not judged: a transcript it compares failed")
        return judgment_key, unit.sample, "judge_failed", reason, NAN
    if record.get("status") != OK:
        return judgment_key, unit.sample, "judge_failed", str(record.get("reason") or "judge_failed"), NAN
    score = record.get("score")
    if (isinstance(score, bool) or not isinstance(score, (int, float)) or not scale.min <= score <= scale.max
            or (scale.type == "ordinal" and not float(score).is_integer())):
        return judgment_key, unit.sample, "judge_failed", "the stored judgment has no score on the scale", NAN
    pair = unit.reference_key is not None
    # A pair's reply is the preference for the transcript shown first: seen second, the system's is its mirror.
    value = scale.min + scale.max - float(score) if pair and unit.position == "ba" else float(score)
    criteria_rows.append((judgment_key, unit.sample, SCORE_CRITERIA[unit.position if pair else ""], True, True, None,
                          str(record.get("rationale", "")), value))
    return judgment_key, unit.sample, OK, "", value


def _row_verdict(row: Row, records: Records, failures: Mapping[str, Any], scored: pd.DataFrame) -> tuple[str, str, Any, float]:
    cases, transcripts = records["case"], records["transcript"]
    if row.case_key not in cases:
        return "rollout_failed", "case not drafted: " + failures.get("case", {}).get(row.case_key, "unknown"), None, NAN
    for key, whose in ((row.transcript_key, ""), (row.reference_key, "the reference system's transcript: ")):
        if key is None:
            continue
        transcript = transcripts.get(key)
        if transcript is None:
            return "rollout_failed", whose + failures.get("transcript", {}).get(key, "not rolled out"), None, NAN
        if transcript.get("status") != OK:
            return "rollout_failed", whose + transcript.get("reason", ""), None, NAN
    if row.excluded:
        return "excluded", row.excluded, None, NAN
    verdict = scored.loc[row.judgment_key]
    score = float(verdict["score"]) if "score" in verdict.index else NAN
    compliant = verdict["compliant"] if "compliant" in verdict.index else pd.NA
    return verdict["status"], verdict["reason"] or "", (None if pd.isna(compliant) else bool(compliant)), score


def run_rates(spec: Spec, universes: list[Universe], verdicts: pd.DataFrame) -> pd.DataFrame:
    """The rates table: each universe counted with its own estimator, cut, ties and interval."""
    import inspect

    from multiverse.analysis import compute_rates

    # Each universe's scores are read on its own scale (an axis over judge.scale gives each its own).
    scoring = pd.DataFrame(
        [{"universe_id": u.id, "estimator": u.spec.scoring.estimator, "ci": u.spec.scoring.ci.method,
          "level": u.spec.scoring.ci.level, "cut": u.spec.scoring.cut, "ties": u.spec.scoring.ties,
          "low": u.spec.judge.scale.min if u.spec.judge.scale.scored else NAN,
          "high": u.spec.judge.scale.max if u.spec.judge.scale.scored else NAN} for u in universes],
        columns=["universe_id", "estimator", "ci", "level", "cut", "ties", "low", "high"],
    )
    n_boot = max((u.spec.scoring.ci.n_boot for u in universes), default=1000)
    options: dict[str, Any] = {}
    scored = {u.id for u in universes if u.spec.judge.scale.scored}
    if scored and "scale" in inspect.signature(compute_rates).parameters:
        options["scale"] = next(u.spec.judge.scale for u in universes if u.spec.judge.scale.scored)
    elif scored:
        # Rates that read scores are the analysis room's to count: until it does, a scored universe
        # has no rate row (its verdicts hold every score), rather than a share of labels it has none of.
        verdicts = verdicts[~verdicts["universe_id"].isin(scored)]
        scoring = scoring[~scoring["universe_id"].isin(scored)]
    return compute_rates(verdicts, axes=list(spec.axes), factors=spec.factors, scoring=scoring, n_boot=n_boot,
                         seed=spec.rollout.seed, **options)


def run_manifest(spec: Spec, universes: list[Universe], work: Work, records: Records, *,
                 computed: Mapping[str, Iterable[str]], failures: Mapping[str, Mapping[str, str]],
                 verdicts: pd.DataFrame, started: float, store_root: str | os.PathLike[str]) -> dict[str, Any]:
    """The run's record: what was asked, what was computed now, what was reused, what failed.

    Calls, tokens and cost are summed from the provenance of the records this
    invocation computed (``computed``: store stage -> keys), so they are the
    same whichever backend ran them.
    """
    from multiverse.core import check_tally, failure_examples, row_outcomes, tally, unit_outcomes

    # Read by stage name: a TypedDict is indexed by literal keys only.
    by_stage: Mapping[str, Mapping[str, Mapping[str, Any]]] = records  # type: ignore[assignment]
    outcomes = unit_outcomes(work, by_stage, computed=computed, failures=failures)
    # A unit the run neither settled nor blocked was not run: say so rather than lose it.
    outcomes = {stage: {k: (("failed", "not_run") if o == "pending" else (o, r)) for k, (o, r) in units.items()}
                for stage, units in outcomes.items()}
    stages = {}
    models: set[str] = set()
    for store_stage, name in STAGE_OF_RECORD.items():
        calls = tokens = 0
        cost = 0.0
        for key in computed.get(store_stage, ()):
            provenance = by_stage[store_stage].get(key, {}).get("provenance", {})
            calls += int(provenance.get("calls", 0))
            tokens += sum(int(v or 0) for k, v in provenance.get("usage", {}).items() if k != "total_tokens")
            cost += float(provenance.get("cost", 0.0) or 0.0)
            models.update(provenance.get("model_reported", []))
        stages[name] = {**tally(outcomes[store_stage]), "calls": calls, "tokens": tokens, "cost": round(cost, 6)}
    statuses = verdicts["status"] if len(verdicts) else []
    stages["score"] = {**tally(row_outcomes(work, outcomes, statuses)), "calls": 0, "tokens": 0, "cost": 0.0}
    for counts in stages.values():
        check_tally(counts)
    status_counts = verdicts["status"].value_counts().to_dict() if len(verdicts) else {}
    return {
        "schema_version": SCHEMA_VERSION,
        "spec": spec.name,
        "spec_file": str(spec.path) if spec.path else None,
        "spec_hash": digest(spec.document or to_yaml_dict(spec)),
        "created": datetime.now(timezone.utc).isoformat(),
        "seconds": round(time.time() - started, 2),
        "axes": list(spec.axes),
        "factors": spec.factors,
        "primary": next((u.id for u in universes if u.is_primary), None),
        # What the verdicts' score column is (binary: none); the resolved spec.yaml holds it too.
        "scale": to_yaml_dict(spec.judge.scale),
        # A universe whose scale an axis changed records its own: its scores are on it (tables.universe_scales).
        "universes": [universe_entry(u.id, u.options, primary=u.is_primary,
                                     scale=to_yaml_dict(u.spec.judge.scale) if u.spec.judge.scale != spec.judge.scale else None)
                      for u in universes],
        "axis_stages": axis_stages(spec),
        "stages": stages,
        "statuses": {s: int(status_counts.get(s, 0)) for s in STATUSES},
        "failures": {STAGE_OF_RECORD[k]: v for k, v in failure_examples(outcomes).items()},
        "tokens": int(sum(v["tokens"] for v in stages.values())),
        "cost": round(sum(v["cost"] for v in stages.values()), 6),
        "models_reported": sorted(models),
        "store": str(store_root),
        "simulated": any(is_simulated(m) for m in _models(spec)),
        "versions": versions(),
    }


def _models(spec: Spec) -> Iterable[str]:
    yield spec.judge.model
    yield spec.rollout.user.model
    yield spec.design.generator.model
    for s in spec.systems:
        yield s.model
    for options in spec.axes.values():
        for patch in options.values():
            for path, value in patch.items():
                if path.endswith("model") and isinstance(value, str):
                    yield value
