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

from multiverse.core import CRITERIA_COLUMNS, SCHEMA_VERSION, STAGE_OF_RECORD, STATUSES, digest
from multiverse.spec import Spec, Universe, axis_stages, to_yaml_dict
from multiverse.store import Records, versions
from multiverse.work import Row, Work

__all__ = ["assemble", "run_manifest", "run_rates"]


def assemble(spec: Spec, work: Work, records: Records,
             failures: Mapping[str, Mapping[str, str]]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The verdicts and criteria tables of ``work`` from its stored ``records`` (no model calls).

    ``records`` maps store stage (case, transcript, judgment) -> key -> record;
    ``failures`` maps store stage -> key -> the reason a unit of this run failed.
    """
    from multiverse.analysis.scoring import score_verdicts

    cases, transcripts, judgments = records["case"], records["transcript"], records["judgment"]
    criteria_rows, sample_rows, seen = [], [], set()
    for row in work.rows:
        if row.judgment_key in seen:
            continue
        seen.add(row.judgment_key)
        for sample, call_key in enumerate(row.judge_calls):
            record = judgments.get(call_key)
            if record is None:
                reason = failures.get("judgment", {}).get(call_key, "not judged: its transcript failed")
                sample_rows.append((row.judgment_key, sample, "judge_failed", reason))
                continue
            sample_rows.append((row.judgment_key, sample, record["status"], record.get("reason", "")))
            for c in record.get("criteria", []):
                criteria_rows.append(
                    (row.judgment_key, sample, c["criterion"], c["permissible"], c["applicable"], c["compliant"], c["rationale"])
                )
    criteria = pd.DataFrame(criteria_rows, columns=list(CRITERIA_COLUMNS))
    criteria = criteria.astype({"sample": "int64", "permissible": "bool", "applicable": "bool", "compliant": "boolean"})
    samples = pd.DataFrame(sample_rows, columns=["judgment_key", "sample", "status", "reason"])

    axes, factors = list(spec.axes), spec.factors
    scored = {rule: score_verdicts(criteria, samples, rule).set_index("judgment_key")
              for rule in {r.universe.spec.scoring.rule for r in work.rows}}
    rows = []
    for row in work.rows:
        u = row.universe
        status, reason, compliant = _row_verdict(row, cases, transcripts, failures, scored[u.spec.scoring.rule])
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
        })
    verdicts = pd.DataFrame.from_records(rows)
    if verdicts.empty:
        verdicts = pd.DataFrame(columns=["universe_id", *axes, "system", "case_id", *factors, "replicate",
                                         "transcript_key", "judgment_key", "status", "reason", "compliant"])
    verdicts["compliant"] = verdicts["compliant"].astype("boolean")
    verdicts["replicate"] = verdicts["replicate"].astype("int64")
    return verdicts, criteria


def _row_verdict(row: Row, cases: Mapping, transcripts: Mapping, failures: Mapping, scored: pd.DataFrame) -> tuple[str, str, Any]:
    if row.case_key not in cases:
        return "rollout_failed", "case not drafted: " + failures.get("case", {}).get(row.case_key, "unknown"), None
    transcript = transcripts.get(row.transcript_key)
    if transcript is None:
        return "rollout_failed", failures.get("transcript", {}).get(row.transcript_key, "not rolled out"), None
    if transcript.get("status") != "ok":
        return "rollout_failed", transcript.get("reason", ""), None
    verdict = scored.loc[row.judgment_key]
    compliant = verdict["compliant"]
    return verdict["status"], verdict["reason"] or "", (None if pd.isna(compliant) else bool(compliant))


def run_rates(spec: Spec, universes: list[Universe], verdicts: pd.DataFrame) -> pd.DataFrame:
    """The rates table: each universe counted with its own estimator and interval."""
    from multiverse.analysis.rates import compute_rates

    scoring = pd.DataFrame(
        [{"universe_id": u.id, "estimator": u.spec.scoring.estimator, "ci": u.spec.scoring.ci.method,
          "level": u.spec.scoring.ci.level} for u in universes]
    )
    n_boot = max((u.spec.scoring.ci.n_boot for u in universes), default=1000)
    return compute_rates(verdicts, axes=list(spec.axes), factors=spec.factors, scoring=scoring, n_boot=n_boot,
                         seed=spec.rollout.seed)


def run_manifest(spec: Spec, universes: list[Universe], work: Work, records: Records, *,
                 computed: Mapping[str, Iterable[str]], failures: Mapping[str, Mapping[str, str]],
                 verdicts: pd.DataFrame, started: float, store_root: str | os.PathLike) -> dict:
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
        "universes": [{"id": u.id, "label": u.label, "options": dict(u.options), "primary": u.is_primary} for u in universes],
        "axis_stages": axis_stages(spec),
        "stages": stages,
        "statuses": {s: int(status_counts.get(s, 0)) for s in STATUSES},
        "failures": {STAGE_OF_RECORD[k]: v for k, v in failure_examples(outcomes).items()},
        "tokens": int(sum(v["tokens"] for v in stages.values())),
        "cost": round(sum(v["cost"] for v in stages.values()), 6),
        "models_reported": sorted(models),
        "store": str(store_root),
        "simulated": any(str(m).startswith("sim/") for m in _models(spec)),
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
