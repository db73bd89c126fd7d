"""A threaded run's stages as one flow (multiverse.engine._flow): a judge call starts when its
rollout ends, not when the stage's slowest rollout does, and the flow makes exactly the calls,
the store entries and the tables of a run stage by stage."""

from __future__ import annotations

import threading

import pytest
from conftest import CountingClient, flaky_spec_document, tiny_spec_document
from store_rows import stored_records

from multiverse.engine._backend_threads import LocalThreads
from multiverse.engine._pipeline import run
from multiverse.spec import load_spec


class HoldingClient(CountingClient):
    """The first system call waits until a judge call has started (or ``patience`` seconds)."""

    def __init__(self, patience: float, **kwargs):
        super().__init__(**kwargs)
        self.patience = patience
        self.judging = threading.Event()
        self.held: bool | None = None  # whether the held rollout saw a judge call start while it waited
        self._first = threading.Lock()

    def complete(self, config, messages, **kwargs):
        if config.model.startswith("sim/judge-"):
            self.judging.set()
        elif config.model == "sim/atlas" and self._first.acquire(blocking=False):
            self.held = self.judging.wait(self.patience)
        return super().complete(config, messages, **kwargs)


def test_a_judge_call_starts_while_a_rollout_of_the_run_is_still_running(write_spec, tmp_path):
    spec = load_spec(write_spec(tiny_spec_document(design={
        "dimensions": [{"name": "behavior"}, {"name": "interaction_condition", "levels": ["material_reliance"]}],
        "cases_per_cell": 3})))
    # Stage by stage the held rollout would hold back every judge call: the wait would time out.
    client = HoldingClient(patience=300, jobs=4)
    result = run(spec, store=tmp_path / "store", client=client, out=tmp_path / "run", jobs=4, progress=False)
    assert client.held is True
    assert result.manifest.statuses["rollout_failed"] == 0 and result.manifest.statuses["judge_failed"] == 0


def _entries(root) -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for stage, key in stored_records(root):
        found.setdefault(stage, set()).add(key)
    return found


@pytest.mark.parametrize("jobs", [1, 3, 8])
def test_the_flow_makes_the_calls_entries_and_tables_of_a_run_stage_by_stage(write_spec, tmp_path, monkeypatch, jobs):
    # Users and judges that fail often: rollouts that fail hold back their judge calls, in both.
    document = flaky_spec_document(tmp_path, user_failure=0.3, judge_failure=0.2, cases_per_cell=3, max_turns=2)
    spec = load_spec(write_spec(document))
    results, calls, entries = {}, {}, {}
    for flows in (True, False):
        monkeypatch.setattr(LocalThreads, "flows", flows)
        client = CountingClient(jobs=jobs)
        where = tmp_path / f"flows-{flows}"
        results[flows] = run(spec, store=where / "store", client=client, out=where / "run", jobs=jobs, progress=False)
        calls[flows], entries[flows] = dict(client.calls), _entries(where / "store")
    assert calls[True] == calls[False]
    assert entries[True] == entries[False]
    statuses = results[True].manifest.statuses
    assert statuses == results[False].manifest.statuses
    assert statuses["rollout_failed"] == 0 < statuses["ok"]  # content failures are records, stored in both
    flow, stages = (results[f].verdicts.drop(columns=[c for c in ("seconds",) if c in results[f].verdicts]) for f in (True, False))
    assert flow.equals(stages)


def test_a_workers_error_in_a_flow_surfaces_without_waiting_for_its_idle_threads(tmp_path):
    """The threads of a flow that have nothing to do wait for units; a worker's error ends the flow at
    once (its idle threads leave), where only calls in flight would get the grace."""
    import time
    from types import SimpleNamespace

    from multiverse.engine._executor import Executor
    from multiverse.store._store import Store

    units = [SimpleNamespace(key=f"k{i}") for i in range(3)]
    ended = threading.Event()

    def attempt(stage, unit, upstream, client, budget_hit):
        if unit.key == "k0":
            ended.wait(300)  # the other two have ended: the five other threads are idle, waiting for units
            raise OSError("the store was deleted")
        return None, "failed"

    def follow(done):
        if all(u.key in executor.failures["case"] for u in units[1:]):
            ended.set()
        return []

    grace = 300.0
    executor = Executor(Store(tmp_path / "store").open(), LocalThreads(None, jobs=8, attempt=attempt), progress=False,
                        grace=grace)
    started = time.monotonic()
    with pytest.raises(OSError, match="deleted"):
        executor.flow({"case": (3, lambda unit: None)}, [("case", u) for u in units], follow)
    assert time.monotonic() - started < grace / 2
    assert executor.failures["case"] == {"k1": "failed", "k2": "failed"}
