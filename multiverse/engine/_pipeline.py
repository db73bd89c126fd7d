"""Orchestration: plan, run and draft a spec's universes.

``run`` computes the unique work units (``multiverse.work``) of the three
stages — draft, rollout, judge — that the store lacks (the executor,
``multiverse.engine._executor``, runs them: on threads as one flow, each unit
once what it reads is stored, ``multiverse.engine._flow``; on worker processes,
a cluster or with batched roles stage by stage; ``multiverse.engine._compute``
makes one unit's record), then scores every universe from stored judgments
and writes the run folder (``multiverse.engine._assemble``). ``plan`` answers,
before anything runs, how many calls each stage needs, how many are already
stored, and roughly what the rest will cost (``multiverse.engine._forecast``).
``draft`` writes a rubric or the test cases as editable YAML.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, cast

import pandas as pd

from multiverse.core import MAX_UNITS, OK, interrupt
from multiverse.engine._assemble import assemble, run_manifest, run_rates
from multiverse.engine._backend_threads import LocalThreads
from multiverse.engine._executor import Executor, backend_class
from multiverse.engine._plan import Plan
from multiverse.errors import InputError, ModelError, SpecError, StoreError
from multiverse.model import CredentialCheck, ModelClient
from multiverse.results import Results
from multiverse.spec import Spec, axis_stages, expand
from multiverse.store import (
    SHAPES,
    CaseRecord,
    JudgmentRecord,
    Lease,
    Records,
    Store,
    TranscriptRecord,
    check_store_path,
    default_store_path,
    is_server,
)
from multiverse.tables import write_run_folder
from multiverse.work import Work, build_work, resolve_config

__all__ = ["check_run_places", "default_run_dir", "draft", "plan", "run", "run_result"]


def default_run_dir(spec: Spec) -> Path:
    """Where a run of ``spec`` is written unless told: ``runs/<spec name>``."""
    return Path("runs") / spec.name


def check_run_places(spec: Spec, out: str | os.PathLike[str], store: Store | str | os.PathLike[str] | None = None, *,
                     force: bool = False) -> None:
    """The run folder, checked before the first model call (the store checks its own path).

    The one rule for every output folder (``multiverse.tables._places``): an import
    folder, a folder of unrelated files or another spec's run (the manifest's
    ``spec`` is not this spec's name) is written only with ``force``; inputs
    and the store never. ``store``: the run's store, by the one rule when None.
    ``run`` checks its folder itself; this is for a caller that checks more
    places before it runs.
    """
    from multiverse.tables import RUN_FILES, check_output_dir

    # The rubric's file name is gone once it is inlined: every file beside the spec that a run
    # would write over counts as an input.
    beside = [spec.base_dir / name for name in RUN_FILES if (spec.base_dir / name).is_file()]
    inputs = [p for p in (spec.path, spec.base_dir / spec.design.cases if spec.design.cases else None, *beside) if p]
    check_output_dir(out, kind="run", inputs=inputs, store=_store_path(spec, store), force=force, spec_name=spec.name)


def _store_path(spec: Spec, store: Store | str | os.PathLike[str] | None) -> Path:
    """Where the run's store is, by the one rule (``store.default_store_path``), as given."""
    return store.root if isinstance(store, Store) else default_store_path(spec.path, None if store is None else os.fspath(store))


def _store_named(spec: Spec, store: Store | str | os.PathLike[str] | None, st: Store) -> str:
    """The store ``plan`` read, as a person reads it: where, and which branch of the rule chose it."""
    from multiverse.store import why_this_store

    given = None if store is None else os.fspath(store.root if isinstance(store, Store) else store)
    return f"{st.db.label if st.server else st.root} ({why_this_store(spec.path, given)})"


def _store(spec: Spec, store: Store | str | os.PathLike[str] | None) -> Store:
    """The run's store, by the one rule (``store.default_store_path``); records are checked on read."""
    # Absolute, so the manifest's record of it still finds it from another directory.
    where = _store_path(spec, store)
    return Store(where if is_server(where) else os.path.abspath(where), shapes=SHAPES)


def _warn_nearby(spec: Spec, work: Work, st: Store) -> None:
    """One warning, before any call, when the run's store holds none of the spec's work and a store nearby does."""
    if st.server:
        return
    import warnings

    from multiverse.store import StoreWarning, nearby_message, nearby_store

    keys = {"case": [k for k, c in work.cases.items() if c.given is None], "transcript": list(work.transcripts),
            "judgment": list(work.judge_calls)}
    found = nearby_store(spec.base_dir, st.root, keys)
    if found is not None:
        warnings.warn(StoreWarning(nearby_message(st.root, found)), stacklevel=3)


def _require_rubric(spec: Spec) -> None:
    if not spec.rubric.criteria:
        raise SpecError(spec.path or "<spec>", "rubric", "the spec has no rubric; expected criteria inline or a rubric "
                        "file (draft one: multiverse.draft(spec, rubric=True))")


def _warn_unknown_criteria(spec: Spec) -> None:
    """Say in one line when sim/ models would rate criteria their world has no behaviour for."""
    import warnings

    from multiverse.sim import unknown_criteria_note

    note = unknown_criteria_note(spec)
    if note:
        warnings.warn(note, stacklevel=3)


def plan(spec: Spec, *, store: Store | str | os.PathLike[str] | None = None, jobs: int = 8) -> Plan:
    """Per stage: unique work units (stored, failed, blocked, to compute), their model calls, and estimated cost;
    ``wall``: at least how long the calls take at ``jobs`` under the spec's ``rate_limits``.

    Nothing is called and nothing is written (``multiverse.engine._forecast``). A
    grid of more than ``bounds.MAX_UNITS`` units is counted from its stage
    configurations without listing them or reading the store
    (``multiverse.engine._workcount``): stored, failed, blocked and to compute are
    then ``None``, and there is no ``wall``. The :class:`~multiverse.engine._plan.Plan`
    reads as a dict too; ``as_dict()`` is its JSON document.
    """
    from multiverse.engine._forecast import forecast
    from multiverse.engine._workcount import count_work, counted_plan

    _require_rubric(spec)
    universes = expand(spec)
    st = _store(spec, store)
    check_store_path(st.root, write=False)
    count = count_work(universes, axis_stages(spec))
    if count.total > MAX_UNITS:
        return counted_plan(spec, universes, count, cap=MAX_UNITS)  # (its store is not read)
    work = build_work(spec, universes)
    _warn_nearby(spec, work, st)
    return forecast(spec, universes, work, st, jobs=jobs, store_named=_store_named(spec, store, st))


# -- running ----------------------------------------------------------------


def run_result(out_dir: Path | None, verdicts: pd.DataFrame, criteria: pd.DataFrame, rates: pd.DataFrame,
               manifest: dict[str, Any]) -> Results:
    """The value ``run`` returns, by the one constructor of a folder's results (``Results.from_manifest``)."""
    return Results.from_manifest(manifest, verdicts=verdicts, criteria=criteria, rates=rates, source=out_dir)


def run(
    spec: Spec,
    *,
    out: str | os.PathLike[str] | None = None,
    store: Store | str | os.PathLike[str] | None = None,
    jobs: int = 8,
    budget: float | None = None,
    client: ModelClient | None = None,
    progress: bool | None = None,
    write: bool = True,
    backend: str = "local",
    scheduler: str | Any | None = None,
    max_units: int | None = MAX_UNITS,
    force: bool = False,
) -> Results:
    """Run every universe of ``spec`` and write the run directory.

    ``client`` defaults to a ``multiverse.model._llm.LiteLLMClient``; pass your own
    (any ``multiverse.model._client.ModelClient``) to count or intercept calls. ``progress=None``
    shows a bar per stage on a terminal and plain lines elsewhere
    (``multiverse.core._progress``); ``False`` shows nothing. ``backend="processes"`` computes the draft,
    rollout and judge units in worker processes on this machine, one per core
    with ``jobs`` split among them (``multiverse.engine._processes``): for many
    concurrent calls, as litellm needs about 5 ms of CPU per call; ``budget``
    is split evenly among the workers. ``backend="dask"`` sends the units to
    the Dask scheduler at ``scheduler`` (an address, a ``distributed.Client``,
    or None for a local cluster of one worker per core); every worker must see
    the store directory. A grid of more than ``max_units`` unique work
    units (case drafts, transcripts and judge calls, counted without listing
    them) is refused before anything is listed or called; ``max_units=None``
    lifts the cap. The folder ``out`` (default :func:`default_run_dir`) is
    checked first, before anything is worked out or called
    (:func:`check_run_places`): an import folder, unrelated files or another
    spec's run there is refused unless ``force``; the report of an earlier
    run there is removed when the tables are written.
    """
    started = time.time()
    out_dir = Path(out) if out is not None else default_run_dir(spec)
    if write:
        # First of all: nothing is worked out, let alone paid for, for a folder the run may not write.
        check_run_places(spec, out_dir, store, force=force)
    _require_rubric(spec)
    _warn_unknown_criteria(spec)
    # The one place the backend's name becomes its class; options it cannot keep are refused here.
    backend_kind = backend_class(backend, client=client, budget=budget, rate_limits=spec.rate_limits)
    if max_units is not None and (isinstance(max_units, bool) or not isinstance(max_units, int) or max_units < 1):
        raise InputError(f"max_units: expected a whole number >= 1 or None, got {max_units!r}", param="max_units")
    universes = expand(spec)
    _check_units(spec, universes, max_units)
    work = build_work(spec, universes)
    st = _store(spec, store)
    check_store_path(st.root, out=out_dir if write else None)
    _warn_nearby(spec, work, st)
    from multiverse.model import Breaker, RequestCache

    # A model that fails every call the same way stops the run, not every unit; a request
    # already answered (by this run, an earlier one or a concurrent one) is never sent again.
    client = RequestCache(Breaker(_default_client(client, jobs, budget, spec.rate_limits)), st)
    try:
        with (interrupt.stopping_on_signals(), Lease(st.open().location) as lease, client,
              backend_kind.for_run(store=st, client=client, jobs=jobs, budget=budget, rate_limits=spec.rate_limits,
                                   scheduler=scheduler) as backend_here):
            executor = Executor(st, backend_here, progress=progress)
            waves = _waves(spec, work, client, st, jobs, progress)
            records = _run_stages(work, st, client, executor, lease, waves)
            interrupt.check("after the last call, before the tables were written")
    finally:
        _close(client)  # the run's HTTP connections end with it (a LiteLLMClient stays usable)
        st.close()  # its last connection folds the write-ahead log into the database: one file at rest
    verdicts, criteria = assemble(spec, work, records, executor.failures)
    rates = run_rates(spec, universes, verdicts)
    manifest = run_manifest(spec, universes, work, records, computed=executor.computed, failures=executor.failures,
                            verdicts=verdicts, started=started, store_root=st.db.label if st.server else st.root)
    if write:
        write_run_folder(out_dir, verdicts=verdicts, criteria=criteria, rates=rates, manifest=manifest,
                         spec_document=spec.document or {}, transcripts=records["transcript"])
    return run_result(out_dir if write else None, verdicts, criteria, rates, manifest)


def _check_units(spec: Spec, universes: list[Any], max_units: int | None) -> None:
    """Refuse, before anything is listed or called, a grid of more work units than the cap."""
    if max_units is None:
        return
    from multiverse.engine._workcount import count_work

    count = count_work(universes, axis_stages(spec))
    if count.total > max_units:
        raise InputError(f"the grid needs {count.describe()}; expected at most `max_units` = {max_units:,} "
                         "(each unit is a paid model call or more: raise `max_units` to run it anyway)", param="max_units")


def _waves(spec: Spec, work: Work, client: ModelClient, st: Store, jobs: int, progress: bool | None) -> Any:
    """The spec's batch waves (``multiverse.engine._waves``), or None when it batches nothing; every batched
    role's model is checked first (an axis may have given one a model with no batch API)."""
    if not spec.batch.roles:
        return None
    from multiverse.engine._waves import Waves

    waves = Waves(spec, client, st, jobs=jobs, progress=progress)
    waves.check(work)
    return waves


def _run_stages(work: Work, st: Store, client: ModelClient, executor: Executor, lease: Lease | None = None,
                waves: Any = None) -> Records:
    """Draft, rollout, judge: each computes only what the store lacks.

    Returns every record the work needs, per store stage (each read from the
    store once). Credentials for every model any missing unit needs are
    checked before the first call, so a missing key never strands a half-paid run.
    """
    generated = [k for k, c in work.cases.items() if c.given is None]
    # The store checks every record's shape on read (records.SHAPES): these are the typed records.
    records: Records = {
        "case": cast("dict[str, CaseRecord]", st.get_many("case", generated)),
        "transcript": cast("dict[str, TranscriptRecord]", st.get_many("transcript", list(work.transcripts))),
        "judgment": cast("dict[str, JudgmentRecord]", st.get_many("judgment", list(work.judge_calls))),
    }
    missing_cases = [work.cases[k] for k in generated if k not in records["case"]]
    missing_transcripts = [t for k, t in work.transcripts.items() if k not in records["transcript"]]
    missing_judgments = [j for k, j in work.judge_calls.items() if k not in records["judgment"]]
    _check_credentials(client, _models_called(missing_cases, missing_transcripts, missing_judgments))

    def stage(name: str, found: dict[str, Any], units: list[Any], upstream: Callable[[Any], Any] = lambda unit: None) -> None:
        if waves is not None:  # the batched roles' requests first, through the provider's batch API
            waves.before(name, units, upstream)
        executor.run(name, units, upstream)
        # What this run, a worker or a concurrent run stored for these units.
        found.update(st.get_many(name, [u.key for u in units]))
        _check_kept(st, lease, name, executor.computed.get(name, set()) - set(found))

    flowing = waves is None and getattr(executor.backend, "flows", False)
    if flowing:
        from multiverse.engine._flow import run_flow

        given = cast("dict[str, CaseRecord]", {key: {"status": OK, "case": dict(case.given)}
                                               for key, case in work.cases.items() if case.given is not None})
        # Its own copies: the records below are read in the stages' order, as a run stage by stage reads them.
        seen: Records = {"case": {**records["case"], **given}, "transcript": dict(records["transcript"]),
                         "judgment": {}}
        run_flow(executor, st, seen, missing_cases, missing_transcripts, missing_judgments)
        # Each stage's units are then read and checked as the stages below read them, in the same order.
        stage = _stored_stage(st, lease, executor)
    stage("case", records["case"], missing_cases)
    for key, case in work.cases.items():
        if case.given is not None:
            records["case"][key] = {"status": OK, "case": dict(case.given)}
    cases = records["case"]
    stage("transcript", records["transcript"], [t for t in missing_transcripts if t.case_key in cases],
          lambda unit: dict(cases[unit.case_key]["case"]))
    transcripts = records["transcript"]
    def rolled(key: str | None) -> bool:
        return key is None or (key in transcripts and transcripts[key]["status"] == OK)

    def judged(unit: Any) -> Any:
        # A pairwise judge reads two transcripts: the system's and the reference system's.
        turns = transcripts[unit.transcript_key]["turns"]
        return turns if unit.reference_key is None else (turns, transcripts[unit.reference_key]["turns"])

    rolled_out = [j for j in missing_judgments if rolled(j.transcript_key) and rolled(j.reference_key)]
    stage("judgment", records["judgment"], rolled_out, judged)
    return records


def _stored_stage(st: Store, lease: Lease | None, executor: Executor) -> Callable[..., None]:
    """A stage whose units the flow has run: what they stored, read and checked as after :meth:`Executor.run`."""

    def stage(name: str, found: dict[str, Any], units: list[Any], upstream: Callable[[Any], Any] = lambda unit: None) -> None:
        found.update(st.get_many(name, [u.key for u in units]))
        _check_kept(st, lease, name, executor.computed.get(name, set()) - set(found))

    return stage


def _models_called(cases: list[Any], transcripts: list[Any], judgments: list[Any]) -> list[Any]:
    """The models these units call: the generator, the system, simulated user and tool simulator, the judge."""
    return ([c.generator for c in cases]
            + [c for t in transcripts for c in (t.configs["system"], t.configs["user"], t.configs["tool_simulator"]) if c]
            + [j.config for j in judgments])


def _check_kept(st: Store, lease: Lease | None, stage: str, lost: set[Any]) -> None:
    """Stop with one clear error if the store lost what this run wrote: tables built
    now would report those units as failed when they were not."""
    if lease is not None and not lease.held():
        raise StoreError(f"store {st.root}: it was deleted or emptied while this run used it; "
                         "expected it to stay for the whole run (rerun to recompute what was lost)")
    if lost:
        raise StoreError(f"store {st.root}: {len(lost)} {stage} entries this run wrote have disappeared "
                         "(deleted while the run was live?); rerun to recompute them")


def _default_client(client: ModelClient | None, jobs: int, budget: float | None = None,
                    rate_limits: Any = None) -> ModelClient:
    """The caller's client, or a ``LiteLLMClient`` pacing calls by the spec's ``rate_limits``."""
    from multiverse.model import LiteLLMClient

    if client is not None:
        if rate_limits and isinstance(client, LiteLLMClient) and not client.rate_limits:
            # Its lanes would not know the declared limits, which the run promises never to exceed.
            raise InputError("client: the spec declares rate_limits but this LiteLLMClient was built without them; "
                             "pass LiteLLMClient(rate_limits=spec.rate_limits, ...)", param="client")
        return client
    return LiteLLMClient(jobs=jobs, budget=budget, rate_limits=rate_limits)


def _close(client: Any) -> None:
    close = getattr(client, "close", None)
    if callable(close):
        close()


def _check_credentials(client: ModelClient, configs: Iterable[Any]) -> None:
    configs = [c for c in configs if c is not None]
    if isinstance(client, CredentialCheck) and configs:
        client.check_credentials({(c.model, c.api_base, c.api_key_env): c for c in configs}.values())


# -- drafting ---------------------------------------------------------------


def draft(
    spec: Spec | str | os.PathLike[str],
    *,
    store: Store | str | os.PathLike[str] | None = None,
    rubric: bool = False,
    force: bool = False,
    client: ModelClient | None = None,
    jobs: int = 8,
    progress: bool | None = None,
) -> list[Path]:
    """Draft the test cases, or with ``rubric=True`` only a rubric, as editable YAML beside the spec.

    A spec without a rubric gets a rubric draft only: cases are drafted per
    criterion, after the rubric is reviewed. Cases are drafted exactly as
    ``run`` would (same keys, same store), so drafting first costs nothing
    extra. Returns the files written. ``spec`` may be the spec file's path:
    it is then loaded to be drafted (``load_spec(path, drafting=True)``), so a
    ``rubric`` or ``design.cases`` file it names and that is not written yet
    is where the draft goes.
    """
    from multiverse.model import RequestCache
    from multiverse.stages import check_draft_places, draft_rubric, write_drafts

    if not isinstance(spec, Spec):
        from multiverse.spec import load_spec

        spec = load_spec(spec, drafting=True)
    # A file the draft could not write is refused before the generator is asked (and paid).
    check_draft_places(spec, ["rubric"] if rubric or not spec.rubric.criteria else ["cases"], force=force)

    st = _store(spec, store)
    check_store_path(st.root)
    model_client = _default_client(client, jobs, rate_limits=spec.rate_limits)
    # Cases are units of the run and share its request store; a rubric draft asked for again is asked anew.
    client = RequestCache(model_client, st)
    generator = resolve_config(spec.design.generator.to_model_config(), spec)
    drafted_rubric = None
    if rubric or not spec.rubric.criteria:
        import warnings

        from multiverse.sim import draft_note

        note = draft_note(spec)
        if note:
            warnings.warn(note, stacklevel=2)
        _check_credentials(client, [generator])
        try:
            drafted_rubric = draft_rubric(model_client, spec, generator, seed=spec.rollout.seed)
        finally:
            _close(client)
        drafted_rubric.pop("completion", None)
    if drafted_rubric is not None:
        # Cases are drafted per criterion: they wait until the rubric is reviewed and referenced.
        return write_drafts(spec, drafted_rubric, [], force=force)
    work = build_work(spec, expand(spec)[:1])
    units = [c for c in work.cases.values() if c.given is None]
    have = st.get_many("case", [u.key for u in units])
    pending = [u for u in units if u.key not in have]
    _check_credentials(client, [u.generator for u in pending])
    executor = Executor(st, LocalThreads(client, jobs=jobs), progress=progress)
    try:
        with interrupt.stopping_on_signals(), Lease(st.open().location), client:
            executor.run("case", pending)
    finally:
        _close(client)
    records = st.get_many("case", [u.key for u in units])
    st.close()
    if executor.failures.get("case"):
        reasons = sorted(set(executor.failures["case"].values()))
        raise ModelError(f"{len(executor.failures['case'])} cases could not be drafted: {reasons[0]}", reason="draft_failed")
    cases = [
        {"id": u.case_id, "cell": dict(u.cell), **{k: v for k, v in records[u.key]["case"].items() if v is not None}}
        for u in units
    ]
    return write_drafts(spec, drafted_rubric, cases, force=force)
