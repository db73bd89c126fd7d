"""Distributed execution: a Dask LocalCluster of worker processes gives the same tables as a local run."""

from __future__ import annotations

import pandas as pd
import pytest
from conftest import tiny_spec_document

from multiverse.engine._pipeline import run
from multiverse.spec import load_spec
from multiverse.store._store import Store

distributed = pytest.importorskip("distributed")


@pytest.fixture(scope="module")
def cluster():
    with distributed.LocalCluster(n_workers=2, threads_per_worker=4, processes=True, dashboard_address=None) as c:
        with distributed.Client(c) as client:
            yield client


def _spec(write_spec):
    document = tiny_spec_document()
    document["axes"] = {"judge": {"a": {"judge.model": "sim/judge-a"}, "b": {"judge.model": "sim/judge-b"}}}
    return load_spec(write_spec(document))


def _sorted(frame: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    return frame.sort_values(keys).reset_index(drop=True)


@pytest.mark.slow
def test_dask_run_matches_a_local_run(write_spec, tmp_path, cluster):
    spec = _spec(write_spec)
    local = run(spec, store=tmp_path / "local-store", out=tmp_path / "local", progress=False)
    remote = run(spec, store=tmp_path / "dask-store", out=tmp_path / "dask", progress=False, backend="dask", scheduler=cluster)
    keys = ["universe_id", "system", "case_id", "replicate"]
    pd.testing.assert_frame_equal(_sorted(local.verdicts, keys), _sorted(remote.verdicts, keys))
    ckeys = ["judgment_key", "sample", "criterion"]
    pd.testing.assert_frame_equal(_sorted(local.criteria, ckeys), _sorted(remote.criteria, ckeys))
    # the same calls were made, each once: the manifests count identical work
    for stage in ("draft", "rollout", "judge"):
        assert local.manifest.stages[stage].computed == remote.manifest.stages[stage].computed
    # workers wrote the shared store themselves; a second dask run makes no call
    judged = remote.verdicts.loc[remote.verdicts.status != "rollout_failed", "judgment_key"].nunique()
    assert sum(1 for _ in Store(tmp_path / "dask-store").keys("judgment")) == judged  # one sample per judgment
    again = run(spec, store=tmp_path / "dask-store", out=tmp_path / "dask2", progress=False, backend="dask", scheduler=cluster)
    assert all(s.computed == 0 for s in again.manifest.stages.values())


def test_a_unit_already_stored_by_another_worker_is_not_recomputed(write_spec, tmp_path, cluster):
    from multiverse.engine._backend import ELSEWHERE
    from multiverse.engine._backend_dask import dask_block
    from multiverse.work._units import build_work

    spec = _spec(write_spec)
    run(spec, store=tmp_path / "store", out=tmp_path / "run", progress=False)
    work = build_work(spec)
    unit = next(iter(work.judge_calls.values()))
    before = Store(tmp_path / "store").get("judgment", unit.key)
    # as if the scheduler re-sent a block whose first worker died after storing it
    _, outcomes = cluster.submit(dask_block, "judgment", [(unit, [])], str(tmp_path / "store"), 2, pure=False).result()
    assert outcomes == [(unit.key, ELSEWHERE)]
    assert Store(tmp_path / "store").get("judgment", unit.key) == before
    assert Store(tmp_path / "store").db.query("SELECT COUNT(*) FROM claim") == [(0,)]
