"""``plan`` and ``run`` name their store, and warn before any call when it holds none of the spec's work while
a store nearby does (issue 48: a spec copied into a subfolder silently started again from an empty store)."""

from __future__ import annotations

import json
import os
import shutil
import warnings
from pathlib import Path

import pytest
import yaml
from cli_runner import run_cli
from conftest import repo_snapshot, snapshot_changes, tiny_spec_document

from multiverse.engine._pipeline import plan, run
from multiverse.spec import load_spec
from multiverse.store import StoreWarning, nearby_store
from multiverse.store._nearby import candidates, sample_keys


def _spec(folder: Path, **overrides) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "audit.yaml"
    path.write_text(yaml.safe_dump(tiny_spec_document(**overrides), sort_keys=False))
    return path


@pytest.fixture
def paid(tmp_path, counting_client):
    """A project whose spec has run once: its store beside it holds the work."""
    spec = _spec(tmp_path / "project")
    run(load_spec(spec), client=counting_client, out=tmp_path / "project" / "runs" / "a", progress=False)
    counting_client.reset()
    return spec


class _Order:
    """Client and warning hook together: which came first, a call or the store warning."""

    def __init__(self, client):
        self.client, self.events = client, []

    def check_credentials(self, configs):
        return self.client.check_credentials(configs)

    def complete(self, config, messages, **kwargs):
        self.events.append("call")
        return self.client.complete(config, messages, **kwargs)


@pytest.mark.parametrize("where", ["subfolder", "sibling", "parent"])
def test_run_warns_before_its_first_call_when_a_store_nearby_holds_the_work(paid, tmp_path, counting_client, where,
                                                                            monkeypatch):
    folder = {"subfolder": paid.parent / "copy", "sibling": tmp_path / "other",
              "parent": tmp_path}[where]
    copied = folder / "copied.yaml"
    folder.mkdir(exist_ok=True)
    shutil.copy(paid, copied)
    monkeypatch.chdir(tmp_path / "project" / "runs")  # not where the stores are: found from the spec's folder
    order = _Order(counting_client)
    seen = []

    def record(message, category, *args, **kwargs):
        seen.append(str(message))
        order.events.append(category.__name__)

    monkeypatch.setattr(warnings, "showwarning", record)
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        warnings.showwarning = record
        run(load_spec(copied), client=order, out=folder / "runs" / "b", progress=False)
    assert order.events[0] == "StoreWarning" and order.events.count("StoreWarning") == 1
    assert "call" in order.events  # it did run, from its own empty store
    [line] = seen
    assert "holds none of this spec's work" in line and "`store`" in line
    assert os.path.realpath(paid.parent / ".multiverse" / "store") in os.path.realpath(
        line.rsplit("`store` ", 1)[1]) or line.rsplit("`store` ", 1)[1].endswith(".multiverse/store")


def test_plan_names_its_store_and_warns_in_one_line_on_the_command_line(paid, tmp_path):
    copied = paid.parent / "copy" / "copied.yaml"
    copied.parent.mkdir()
    shutil.copy(paid, copied)
    before = repo_snapshot(tmp_path)
    result = run_cli(["plan", copied])
    out = result.ok()
    assert snapshot_changes(before, repo_snapshot(tmp_path)) == []  # nothing created, not even the empty store
    [line] = result.stderr.strip().splitlines()
    assert line.startswith("warning: the store ") and "--store " in line and "`" not in line
    given = line.rsplit("--store ", 1)[1]
    assert Path(given).resolve() == (paid.parent / ".multiverse" / "store").resolve()
    assert f"store: {(copied.parent / '.multiverse' / 'store').resolve()} (beside the spec)" in out
    # Pointed at that store, the plan finds the work, and says which store it read.
    result = run_cli(["plan", copied, "--store", given, "--json"])
    document = json.loads(result.ok())
    assert result.stderr == ""
    assert document["store"].endswith("(the store given)") and document["stages"]["judge"]["to_compute"] == 0


def test_no_warning_when_the_own_store_holds_the_work_or_nothing_nearby_does(paid, tmp_path, counting_client):
    with warnings.catch_warnings():
        warnings.simplefilter("error", StoreWarning)
        plan(load_spec(paid))  # its own store holds it
    # Another judge: its judgments are new, but the transcripts it reads are stored nearby, and that is said.
    other = _spec(tmp_path / "project" / "different", judge={"model": "sim/judge-b"})
    with pytest.warns(StoreWarning, match="holds none"):
        plan(load_spec(other))
    unrelated = _spec(tmp_path / "elsewhere", rollout={"seed": 99}, design={"cases_per_cell": 1})
    with warnings.catch_warnings():
        warnings.simplefilter("error", StoreWarning)
        plan(load_spec(unrelated))


def test_sample_keys_spreads_over_every_stage():
    keys = {"case": [f"c{i}" for i in range(1000)], "transcript": ["t1", "t2"], "judgment": []}
    sampled = sample_keys(keys, 10)
    assert sampled["case"][0] == "c0" and sampled["case"][-1] == "c999" and len(set(sampled["case"])) == 10
    assert sampled["transcript"] == ["t1", "t2"] and "judgment" not in sampled


def test_candidates_are_few_and_nearby(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for i in range(80):
        (tmp_path / "a" / f"sibling{i:02d}").mkdir(parents=True)
    spec_folder = tmp_path / "a" / "sibling00"
    found = candidates(spec_folder)
    assert len(found) <= 3 + 50 + 50 + 1
    assert found[0] == (tmp_path / "a" / ".multiverse" / "store").resolve()  # the nearest parent first
    assert (spec_folder / ".multiverse" / "store").resolve() not in found[:1]
    assert nearby_store(spec_folder, spec_folder / ".multiverse" / "store", {"case": []}) is None
