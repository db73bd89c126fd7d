"""The engine: plan and run a spec's universes, then assemble the tables.

``run`` walks the unique work units (``multiverse.work``) stage by stage —
draft, rollout, judge — computing only what the store lacks, then scores
every universe from stored judgments and writes the run directory. ``plan``
answers, before anything runs, how many calls each stage needs, how many are
already stored, and roughly what the rest will cost.
"""

from __future__ import annotations

import os
import platform
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pandas as pd

from . import __version__, interrupt
from .atomicfile import atomic_write_text
from .errors import BudgetExceeded, InputError, ModelError
from .executor import STAGE_NAMES, DaskSession, Executor
from .grid import Universe, axis_stages, expand
from .keys import digest
from .lease import Lease
from .pricing import estimate_cost
from .records import SHAPES
from .spec import Spec, to_yaml_dict
from .store import Store, check_store_path, default_store_path
from .tables import SCHEMA_VERSION, write_json, write_table
from .work import Work, build_work

__all__ = ["plan", "run", "RunResult", "default_run_dir", "STAGE_OF_STORE"]

#: store stage -> pipeline stage, in data-flow order
STAGE_OF_STORE = STAGE_NAMES


def default_run_dir(spec: Spec) -> Path:
    return Path("runs") / spec.name


def _store(spec: Spec, store: Store | str | os.PathLike | None) -> Store:
    """The run's store, by the one rule (``store.default_store_path``); records are checked on read."""
    root = store.root if isinstance(store, Store) else default_store_path(spec.path, store)
    # Absolute, so the manifest's record of it still finds it from another directory.
    return Store(os.path.abspath(root), shapes=SHAPES)


def _require_rubric(spec: Spec) -> None:
    from .errors import SpecError

    if not spec.rubric.criteria:
        raise SpecError(spec.path or "<spec>", "rubric", "the spec has no rubric; expected criteria inline or a rubric file (draft one with `multiverse draft --rubric SPEC`)")


def _calls_per_transcript(unit) -> int:
    # A user and a system call per turn, before retries, tool calls and early ends.
    return 1 if unit.setting == "single_turn" else 2 * unit.max_turns


def plan(spec: Spec, *, store: Store | str | os.PathLike | None = None) -> dict[str, Any]:
    """Per stage: unique work units (stored, failed, blocked, to compute), their model calls, and estimated cost.

    ``units = stored + failed + blocked + to_compute`` (see ``multiverse.outcomes``);
    ``calls`` counts every unit's calls, ``calls_to_make`` those of the units to compute.
    """
    _require_rubric(spec)
    universes = expand(spec)
    work = build_work(spec, universes)
    st = _store(spec, store)
    check_store_path(st.root, write=False)
    from .outcomes import row_outcomes, tally, unit_outcomes

    # Stored records are read for their status: a stored failure is not work
    # to do, and the judge calls of a failed transcript are blocked, not pending.
    stored_cases = [k for k, c in work.cases.items() if c.given is None and st.has("case", k)]
    records = {
        "case": {k: {"status": "ok"} for k in stored_cases},
        "transcript": st.get_many("transcript", [k for k in work.transcripts if st.has("transcript", k)]),
        "judgment": st.get_many("judgment", [k for k in work.judge_calls if st.has("judgment", k)]),
    }
    outcomes = unit_outcomes(work, records)
    stages: dict[str, dict] = {}

    def stage(name: str, store_stage: str, units: dict, calls_of: Callable, model_of: Callable, tokens: tuple[int, int]):
        settled = outcomes[store_stage]
        todo = [u for k, u in units.items() if settled[k][0] == "pending"]
        counts = tally((("computed", "") if o == "pending" else (o, r)) for o, r in settled.values())
        counts["to_compute"] = counts.pop("computed")
        stages[name] = {
            **counts,
            "calls": sum(calls_of(u) for u in units.values()),
            "calls_stored": sum(calls_of(u) for k, u in units.items() if settled[k][0] == "stored"),
            "calls_to_make": sum(calls_of(u) for u in todo),
            "cost": sum(estimate_cost(m, calls_of(u), *tokens) for u in todo for m in model_of(u)),
        }

    generated = {k: c for k, c in work.cases.items() if c.given is None}
    stage("draft", "case", generated, lambda u: 1, lambda u: [u.generator.model], (700, 500))
    stage(
        "rollout",
        "transcript",
        work.transcripts,
        _calls_per_transcript,
        lambda u: [u.configs["system"].model] + ([u.configs["user"].model] if u.configs["user"] else []),
        (900, 250),
    )
    stage("judge", "judgment", work.judge_calls, lambda u: 1, lambda u: [u.config.model], (2500, 600))
    # Scoring makes no call: a verdict row is to compute while any judgment it reads is.
    scored = tally((("computed", "") if o == "pending" else (o, r)) for o, r in row_outcomes(work, outcomes))
    scored["to_compute"] = scored.pop("computed")
    stages["score"] = {**scored, "calls": 0, "calls_stored": 0, "calls_to_make": 0, "cost": 0.0}
    naive = sum(
        (work.cases[r.case_key].given is None) + _calls_per_transcript(work.transcripts[r.transcript_key]) + len(r.judge_calls)
        for r in work.rows
    )
    notes = [
        f"running each universe on its own would take about {naive} model calls; sharing needs "
        f"{sum(s['calls'] for s in stages.values())}",
        "rollout calls assume every turn is used: early ends save calls, simulated-user retries and tool calls add some; "
        "costs use litellm's price list with rough token estimates, and are 0 for sim/ and local models",
    ]
    return {
        "spec": spec.name,
        "universes": [u.id for u in universes],
        "axis_stages": axis_stages(spec),
        "stages": stages,
        "naive_calls": naive,
        "notes": notes,
    }


# -- running ----------------------------------------------------------------


@dataclass
class RunResult:
    """What ``run`` produced: the tables, the manifest and where they were written."""

    out_dir: Path | None
    verdicts: pd.DataFrame
    criteria: pd.DataFrame
    rates: pd.DataFrame
    manifest: dict
    universes: list[Universe] = field(default_factory=list)


def _versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {"multiverse": __version__, "python": platform.python_version()}
    for package in ("litellm", "pandas", "numpy", "statsmodels"):
        try:
            out[package] = version(package)
        except PackageNotFoundError:
            pass
    return out


def _provenance(config, started: float, calls: list[dict] | None = None, completion=None) -> dict:
    if completion is not None:
        calls = [{"model_reported": completion.model_reported, "usage": dict(completion.usage), "cost": completion.cost}]
    calls = calls or []
    usage: dict[str, int] = defaultdict(int)
    for call in calls:
        for k, v in (call.get("usage") or {}).items():
            usage[k] += int(v or 0)
    return {
        "model_requested": config.model if config else None,
        "model_reported": sorted({c["model_reported"] for c in calls if c.get("model_reported")}),
        "params": dict(config.params) if config else {},
        "usage": dict(usage),
        "cost": sum(c.get("cost") or 0.0 for c in calls),
        "calls": len(calls),
        "started": datetime.fromtimestamp(started, timezone.utc).isoformat(),
        "seconds": round(time.time() - started, 3),
        "versions": _versions(),
    }


def _compute(stage: str, unit, upstream, client) -> dict:
    """Compute one work unit's record. ``upstream`` is the case (rollout) or the turns (judge)."""
    if stage == "case":
        return _compute_case(client, unit)
    if stage == "transcript":
        return _compute_transcript(client, unit, upstream)
    return _compute_judgment(client, unit, upstream)


def _attempt(stage: str, unit, upstream, client, budget_hit: threading.Event) -> tuple[dict | None, str | None]:
    """(record, None) or (None, failure reason). Transport failures are reasons, never records."""
    if budget_hit.is_set():
        return None, "budget_exceeded: not started, the run's budget cap was reached"
    try:
        return _compute(stage, unit, upstream, client), None
    except BudgetExceeded as exc:
        budget_hit.set()
        return None, f"budget_exceeded: {exc}"
    except ModelError as exc:
        from .outcomes import short_reason

        return None, short_reason(f"{exc.reason}: {exc}", 500)


_WORKER_CLIENTS: dict[int, Any] = {}
_WORKER_LOCK = threading.Lock()


def _dask_unit(stage: str, unit, upstream, store_root: str, jobs: int) -> tuple[str, str | None]:
    """One unit on a Dask worker: skip it if another worker already stored it."""
    store = Store(store_root, existing=True)  # opened by the run: never recreated if it vanishes
    if store.has(stage, unit.key):
        return unit.key, None
    with _WORKER_LOCK:
        if jobs not in _WORKER_CLIENTS:
            from .llm import ModelClient

            _WORKER_CLIENTS[jobs] = ModelClient(jobs=jobs)
    record, failure = _attempt(stage, unit, upstream, _WORKER_CLIENTS[jobs], threading.Event())
    if record is not None:
        store.put(stage, unit.key, record)
    return unit.key, failure


def run(
    spec: Spec,
    *,
    out: str | os.PathLike | None = None,
    store: Store | str | os.PathLike | None = None,
    jobs: int = 8,
    budget: float | None = None,
    client: Any = None,
    progress: bool | None = None,
    write: bool = True,
    backend: str = "local",
    scheduler: str | Any | None = None,
) -> RunResult:
    """Run every universe of ``spec`` and write the run directory.

    ``client`` defaults to a ``multiverse.llm.ModelClient``; pass your own
    (anything with ``complete``) to count or intercept calls. ``progress=None``
    shows bars only on a terminal. ``backend="dask"`` sends the draft, rollout
    and judge units to the Dask scheduler at ``scheduler`` (an address, a
    ``distributed.Client``, or None for a local cluster); every worker must
    see the store directory.
    """
    started = time.time()
    _require_rubric(spec)
    if backend not in ("local", "dask"):
        raise InputError(f"--backend: expected local or dask, got {backend!r}")
    if backend == "dask" and budget is not None:
        raise InputError("--budget: not supported with --backend dask (each worker has its own client); run locally to cap spending")
    universes = expand(spec)
    work = build_work(spec, universes)
    st = _store(spec, store)
    out_dir = Path(out) if out is not None else default_run_dir(spec)
    check_store_path(st.root, out=out_dir if write else None)
    if client is None:
        from .llm import ModelClient

        client = ModelClient(jobs=jobs, budget=budget)
    from .breaker import Breaker

    client = Breaker(client)  # a model that fails every call the same way stops the run, not every unit
    if progress is None:
        progress = sys.stderr.isatty()
    with interrupt.stopping_on_signals(), Lease(st.open().root) as lease, DaskSession(backend, scheduler, jobs) as dask_client:
        executor = Executor(st, client, jobs=jobs, progress=progress, attempt=_attempt, remote=_dask_unit,
                            backend=backend, dask_client=dask_client)
        stored, records = _run_stages(work, st, client, executor, lease)
        interrupt.check("after the last call, before the tables were written")
    failures = executor.failures
    verdicts, criteria = _assemble(spec, work, records["case"], records["transcript"], records["judgment"], failures)
    rates = _rates(spec, universes, verdicts)
    manifest = _manifest(spec, universes, work, records, executor, stored, verdicts, started, st)
    if write:
        write_run(out_dir, spec, verdicts, criteria, rates, manifest, records["transcript"])
    return RunResult(out_dir if write else None, verdicts, criteria, rates, manifest, universes)


def _run_stages(work: Work, st: Store, client, executor: Executor, lease: Lease | None = None) -> tuple[dict[str, int], dict[str, dict]]:
    """Draft, rollout, judge: each computes only what the store lacks.

    Returns the units found already stored per store stage, and every record
    the work needs (each read from the store once). Credentials for every
    model any missing unit needs are checked before the first call, so a
    missing key never strands a half-paid run.
    """
    generated = [k for k, c in work.cases.items() if c.given is None]
    records = {
        "case": st.get_many("case", generated),
        "transcript": st.get_many("transcript", list(work.transcripts)),
        "judgment": st.get_many("judgment", list(work.judge_calls)),
    }
    stored = {stage: len(found) for stage, found in records.items()}
    missing_cases = [work.cases[k] for k in generated if k not in records["case"]]
    missing_transcripts = [t for k, t in work.transcripts.items() if k not in records["transcript"]]
    missing_judgments = [j for k, j in work.judge_calls.items() if k not in records["judgment"]]
    _check_credentials(
        client,
        [c.generator for c in missing_cases]
        + [c for t in missing_transcripts for c in (t.configs["system"], t.configs["user"], t.configs["tool_simulator"]) if c]
        + [j.config for j in missing_judgments],
    )

    def stage(name: str, units: list, upstream: Callable[[Any], Any] = lambda unit: None) -> None:
        executor.run(name, units, upstream)
        # What this run, a worker or a concurrent run stored for these units.
        records[name].update(st.get_many(name, [u.key for u in units]))
        _check_kept(st, lease, name, executor.computed.get(name, set()) - set(records[name]))

    stage("case", missing_cases)
    for key, case in work.cases.items():
        if case.given is not None:
            records["case"][key] = {"status": "ok", "case": dict(case.given)}
    cases = records["case"]
    stage("transcript", [t for t in missing_transcripts if t.case_key in cases],
          lambda unit: dict(cases[unit.case_key]["case"]))
    transcripts = records["transcript"]
    stage("judgment", [j for j in missing_judgments if transcripts.get(j.transcript_key, {}).get("status") == "ok"],
          lambda unit: transcripts[unit.transcript_key]["turns"])
    return stored, records


def _check_kept(st: Store, lease: Lease | None, stage: str, lost: set) -> None:
    """Stop with one clear error if the store lost what this run wrote: tables built
    now would report those units as failed when they were not."""
    from .errors import StoreError

    if lease is not None and not lease.held():
        raise StoreError(f"store {st.root}: it was deleted or emptied while this run used it; "
                         "expected it to stay for the whole run (rerun to recompute what was lost)")
    if lost:
        raise StoreError(f"store {st.root}: {len(lost)} {stage} entries this run wrote have disappeared "
                         "(deleted while the run was live?); rerun to recompute them")


def _check_credentials(client, configs: Iterable) -> None:
    check = getattr(client, "check_credentials", None)
    configs = [c for c in configs if c is not None]
    if check and configs:
        check({(c.model, c.api_base, c.api_key_env): c for c in configs}.values())


def _compute_case(client, unit) -> dict:
    started = time.time()
    from .stages.draft import draft_case

    drafted = draft_case(client, unit.spec, unit.generator, unit.cell, unit.index, seed=unit.seed)
    return {
        "status": "ok",
        "case_id": unit.case_id,
        "cell": dict(unit.cell),
        "case": drafted["case"],
        "provenance": _provenance(unit.generator, started, completion=drafted["completion"]),
    }


def _compute_transcript(client, unit, case: dict) -> dict:
    from .stages.rollout import RolloutJob, run_rollout

    started = time.time()
    c = unit.configs
    job = RolloutJob(
        case=case, system=c["system"], system_prompt=c["system_prompt"], tools=c["tools"], setting=unit.setting,
        max_turns=unit.max_turns, user=c["user"], persona=c["persona"], instructions=c["instructions"],
        tool_simulator=c["tool_simulator"], tool_functions=c["tool_functions"], seed=unit.seed,
        opening=(case.get("prompt") or "") if unit.opens_with_prompt else "",
    )
    record = run_rollout(client, job)
    record["system"] = unit.system
    record["provenance"] = _provenance(c["system"], started, calls=record.pop("calls", []))
    return record


def _compute_judgment(client, unit, turns: list) -> dict:
    from .stages.judge import judge_transcript

    started = time.time()
    record = judge_transcript(
        client, unit.config, unit.spec.rubric.criteria, unit.evidence_standard, turns, seed=unit.seed
    )
    call = record.pop("call", None)
    record["sample"] = unit.sample
    # An answer that stayed unparseable was still a paid call (usage unknown): count it.
    record["provenance"] = _provenance(unit.config, started, calls=[call or {"model_reported": None, "usage": {}, "cost": 0.0}])
    return record


# -- tables -----------------------------------------------------------------


def _assemble(spec: Spec, work: Work, cases: dict, transcripts: dict, judgments: dict, failures: dict):
    """Verdicts and criteria tables from stored records (no model calls)."""
    from .stages.score import score_verdicts

    criteria_rows, sample_rows, seen = [], [], set()
    for row in work.rows:
        if row.judgment_key in seen:
            continue
        seen.add(row.judgment_key)
        for sample, call_key in enumerate(row.judge_calls):
            record = judgments.get(call_key)
            if record is None:
                reason = failures["judgment"].get(call_key, "not judged: its transcript failed")
                sample_rows.append((row.judgment_key, sample, "judge_failed", reason))
                continue
            sample_rows.append((row.judgment_key, sample, record["status"], record.get("reason", "")))
            for c in record.get("criteria", []):
                criteria_rows.append(
                    (row.judgment_key, sample, c["criterion"], c["permissible"], c["applicable"], c["compliant"], c["rationale"])
                )
    criteria = pd.DataFrame(
        criteria_rows, columns=["judgment_key", "sample", "criterion", "permissible", "applicable", "compliant", "rationale"]
    )
    criteria = criteria.astype({"sample": "int64", "permissible": "bool", "applicable": "bool", "compliant": "boolean"})
    samples = pd.DataFrame(sample_rows, columns=["judgment_key", "sample", "status", "reason"])

    axes, factors = list(spec.axes), spec.factors
    scored: dict[str, pd.DataFrame] = {}
    for rule in {r.universe.spec.scoring.rule for r in work.rows}:
        scored[rule] = score_verdicts(criteria, samples, rule).set_index("judgment_key")

    records = []
    for row in work.rows:
        u = row.universe
        status, reason, compliant = _row_verdict(row, cases, transcripts, failures, scored[u.spec.scoring.rule])
        records.append(
            {
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
            }
        )
    verdicts = pd.DataFrame.from_records(records)
    if verdicts.empty:
        verdicts = pd.DataFrame(columns=["universe_id", *axes, "system", "case_id", *factors, "replicate",
                                         "transcript_key", "judgment_key", "status", "reason", "compliant"])
    verdicts["compliant"] = verdicts["compliant"].astype("boolean")
    verdicts["replicate"] = verdicts["replicate"].astype("int64")
    return verdicts, criteria


def _row_verdict(row, cases, transcripts, failures, scored) -> tuple[str, str, Any]:
    if row.case_key not in cases:
        return "rollout_failed", "case not drafted: " + failures["case"].get(row.case_key, "unknown"), None
    transcript = transcripts.get(row.transcript_key)
    if transcript is None:
        return "rollout_failed", failures["transcript"].get(row.transcript_key, "not rolled out"), None
    if transcript.get("status") != "ok":
        return "rollout_failed", transcript.get("reason", ""), None
    verdict = scored.loc[row.judgment_key]
    compliant = verdict["compliant"]
    return verdict["status"], verdict["reason"] or "", (None if pd.isna(compliant) else bool(compliant))


def _rates(spec: Spec, universes: list[Universe], verdicts: pd.DataFrame) -> pd.DataFrame:
    from .stages.score import compute_rates

    scoring = pd.DataFrame(
        [{"universe_id": u.id, "estimator": u.spec.scoring.estimator, "ci": u.spec.scoring.ci.method,
          "level": u.spec.scoring.ci.level} for u in universes]
    )
    n_boot = max(u.spec.scoring.ci.n_boot for u in universes)
    return compute_rates(verdicts, axes=list(spec.axes), factors=spec.factors, scoring=scoring, n_boot=n_boot, seed=spec.rollout.seed)


def _manifest(spec, universes, work, records, executor, stored, verdicts, started, store) -> dict:
    """The run's record: what was asked, what was computed now, what was reused, what failed.

    Calls, tokens and cost are summed from the provenance of the records this
    invocation computed, so they are the same whichever backend ran them.
    """
    from .outcomes import (
        check_tally,
        failure_examples,
        row_outcomes,
        tally,
        unit_outcomes,
    )

    outcomes = unit_outcomes(work, records, computed=executor.computed, failures=executor.failures)
    # A unit the run neither settled nor blocked was not run: say so rather than lose it.
    outcomes = {stage: {k: (("failed", "not_run") if o == "pending" else (o, r)) for k, (o, r) in units.items()}
                for stage, units in outcomes.items()}
    stages = {}
    models: set[str] = set()
    for store_stage, name in STAGE_OF_STORE.items():
        calls = tokens = 0
        cost = 0.0
        for key in executor.computed.get(store_stage, ()):
            provenance = records[store_stage].get(key, {}).get("provenance", {})
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
        "statuses": {s: int(status_counts.get(s, 0)) for s in ("ok", "excluded", "rollout_failed", "judge_failed")},
        "failures": {STAGE_OF_STORE[k]: v for k, v in failure_examples(outcomes).items()},
        "tokens": int(sum(v["tokens"] for v in stages.values())),
        "cost": round(sum(v["cost"] for v in stages.values()), 6),
        "models_reported": sorted(models),
        "store": str(store.root),
        "simulated": any(str(m).startswith("sim/") for m in _models(spec)),
        "versions": _versions(),
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


def write_run(out_dir: Path, spec: Spec, verdicts, criteria, rates, manifest, transcripts: dict | None = None) -> None:
    """Write the run directory; the manifest goes last, so its presence marks a complete run.

    ``transcripts.jsonl`` holds every transcript the verdicts refer to (one
    JSON object per line: key, system, status, reason, turns), so a run
    directory can be read, reported and shared without the store.
    """
    import json

    import yaml

    out_dir.mkdir(parents=True, exist_ok=True)
    old_manifest = out_dir / "manifest.json"
    if old_manifest.exists():
        old_manifest.unlink()  # a directory with a manifest is complete; this one is being rewritten
    if transcripts is not None:
        lines = [
            json.dumps({"key": k, "system": r.get("system"), "status": r.get("status"), "reason": r.get("reason", ""),
                        "stop_reason": r.get("stop_reason"), "turns": r.get("turns", [])}, ensure_ascii=False)
            for k, r in sorted(transcripts.items())
        ]
        atomic_write_text(out_dir / "transcripts.jsonl", "\n".join(lines) + "\n")
    write_table(verdicts, out_dir, "verdicts")
    write_table(criteria, out_dir, "criteria")
    write_table(rates, out_dir, "rates")
    text = "# The resolved spec of this run (rubric inlined).\n" + yaml.safe_dump(dict(spec.document or {}), sort_keys=False, allow_unicode=True)
    atomic_write_text(out_dir / "spec.yaml", text)
    write_json(manifest, out_dir / "manifest.json")


# -- drafting ---------------------------------------------------------------


def draft(
    spec: Spec,
    *,
    store: Store | str | os.PathLike | None = None,
    rubric: bool = False,
    force: bool = False,
    client: Any = None,
    jobs: int = 8,
    progress: bool | None = None,
) -> list[Path]:
    """Draft the test cases, or with ``rubric=True`` only a rubric, as editable YAML beside the spec.

    A spec without a rubric gets a rubric draft only: cases are drafted per
    criterion, after the rubric is reviewed. Cases are drafted exactly as
    ``run`` would (same keys, same store), so drafting first costs nothing
    extra. Returns the files written.
    """
    from .stages.draft import draft_rubric, write_drafts

    st = _store(spec, store)
    check_store_path(st.root)
    if client is None:
        from .llm import ModelClient

        client = ModelClient(jobs=jobs)
    if progress is None:
        progress = sys.stderr.isatty()
    generator = spec.design.generator.to_model_config()
    from .work import _resolve

    generator = _resolve(generator, spec)
    drafted_rubric = None
    if rubric or not spec.rubric.criteria:
        _check_credentials(client, [generator])
        drafted_rubric = draft_rubric(client, spec, generator, seed=spec.rollout.seed)
        drafted_rubric.pop("completion", None)
    if drafted_rubric is not None:
        # Cases are drafted per criterion: they wait until the rubric is reviewed and referenced.
        return write_drafts(spec, drafted_rubric, [], force=force)
    work = build_work(spec, expand(spec)[:1])
    units = [c for c in work.cases.values() if c.given is None]
    have = st.get_many("case", [u.key for u in units])
    pending = [u for u in units if u.key not in have]
    _check_credentials(client, [u.generator for u in pending])
    executor = Executor(st, client, jobs=jobs, progress=progress, attempt=_attempt)
    with interrupt.stopping_on_signals(), Lease(st.open().root):
        executor.run("case", pending)
    records = st.get_many("case", [u.key for u in units])
    if executor.failures.get("case"):
        reasons = sorted(set(executor.failures["case"].values()))
        raise ModelError(f"{len(executor.failures['case'])} cases could not be drafted: {reasons[0]}", reason="draft_failed")
    cases = [
        {"id": u.case_id, "cell": dict(u.cell), **{k: v for k, v in records[u.key]["case"].items() if v is not None}}
        for u in units
    ]
    return write_drafts(spec, drafted_rubric, cases, force=force)


def referenced_keys(spec: Spec) -> dict[str, set[str]]:
    """Every store key a spec's grid uses, per store stage (what ``store gc`` keeps)."""
    work = build_work(spec, expand(spec))
    return {
        "case": {k for k, c in work.cases.items() if c.given is None},
        "transcript": set(work.transcripts),
        "judgment": set(work.judge_calls),
    }
