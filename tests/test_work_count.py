"""Work units counted without listing them (issue 17 item 5) equal what ``build_work`` lists.

Grids are built so universes share and overlap in every way the keys allow:
the same drafted cells with more or fewer cases, more or fewer replicates
and judge samples, judge-only and system-only axes, cases from a file. Then
the run cap: a grid past ``max_units`` is refused in one line before any
model call, through the API and the CLI.
"""

from __future__ import annotations

import itertools
import random
import shutil
import time
import tracemalloc
from pathlib import Path

import pytest
import yaml
from cli_runner import run_cli
from conftest import tiny_spec_document

import multiverse as mv
from multiverse.engine._forecast import forecast
from multiverse.engine._pipeline import _store
from multiverse.engine._workcount import _union_volume, count_work
from multiverse.errors import InputError
from multiverse.spec._grid import axis_stages, expand
from multiverse.work._units import build_work

ROOT = Path(__file__).resolve().parents[1]


def listed(spec) -> dict:
    universes = expand(spec)
    work = build_work(spec, universes)
    return {
        "case": sum(c.given is None for c in work.cases.values()),
        "transcript": len(work.transcripts),
        "judgment": len(work.judge_calls),
        "rows": len(work.rows),
    }


def counted(spec) -> dict:
    universes = expand(spec)
    count = count_work(universes)
    # Reusing what universes that differ only in later stages share changes nothing.
    shortcut = count_work(universes, axis_stages(spec))
    assert (shortcut.units, shortcut.calls, shortcut.cost, shortcut.rows, shortcut.naive_calls) == \
        (count.units, count.calls, count.cost, count.rows, count.naive_calls)
    # Every call is some provider's.
    assert sum(count.calls_by_endpoint.values()) == sum(count.calls.values())
    return {**count.units, "rows": count.rows}


def write(folder: Path, document: dict) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "spec.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


def test_union_of_anchored_boxes_equals_brute_force():
    rng = random.Random(0)
    for _ in range(300):
        dims = rng.randint(1, 3)
        boxes = [tuple(rng.randint(0, 5) for _ in range(dims)) for _ in range(rng.randint(1, 5))]
        points = {p for b in boxes for p in itertools.product(*(range(x) for x in b))}
        assert _union_volume(boxes) == len(points), boxes


def test_the_demo_counts_equal_the_listed_units():
    spec = mv.load_spec(ROOT / "specs" / "demo.yaml")
    assert counted(spec) == listed(spec)


@pytest.mark.parametrize("axes", [
    # The same drafted cells with 2 or 3 cases; 1 or 2 replicates; 1 or 3 judge samples: staircases.
    {"cases": {"two": {"design.cases_per_cell": 2}, "three": {"design.cases_per_cell": 3}},
     "replicates": {"one": {"rollout.replicates": 1}, "two": {"rollout.replicates": 2}},
     "samples": {"one": {"judge.samples": 1}, "three": {"judge.samples": 3}}},
    # Judge-only and system-only axes share transcripts and cases; turns change every transcript.
    {"judge": {"a": {"judge.model": "sim/judge-a"}, "b": {"judge.model": "sim/judge-b"}},
     "scoring": {"all": {"scoring.rule": "all_applicable"}, "impermissible": {"scoring.rule": "impermissible_only"}},
     "evidence": {"strict": {}, "lenient": {"judge.evidence_standard": "lenient"}},
     "atlas": {"plain": {}, "hot": {"systems.atlas.params.temperature": 0.9}},
     "turns": {"two": {}, "three": {"rollout.max_turns": 3}}},
    # Single turn against multi turn; a generator change drafts new cases.
    {"setting": {"multi": {}, "single": {"rollout.setting": "single_turn"}},
     "generator": {"a": {}, "b": {"design.generator.params.temperature": 0.3}},
     "replicates": {"one": {}, "three": {"rollout.replicates": 3}}},
])
def test_counts_equal_the_listed_units_when_universes_overlap(tmp_path, axes):
    document = tiny_spec_document(axes=axes)
    document["design"]["generator"] = {"model": "sim/generator"}
    spec = mv.load_spec(write(tmp_path, document))
    got, expected = counted(spec), listed(spec)
    assert got == expected
    # The universes really share units: counted one universe at a time, there are more.
    alone = [count_work([u]).units for u in expand(spec)]
    assert sum(a["transcript"] for a in alone) > expected["transcript"]
    assert sum(a["judgment"] for a in alone) > expected["judgment"]


def test_counts_equal_the_listed_units_with_cases_from_a_file(tmp_path):
    for name in ("local-llm.yaml", "local-llm.cases.yaml"):
        shutil.copy(ROOT / "specs" / name, tmp_path / name)
    document = yaml.safe_load((tmp_path / "local-llm.yaml").read_text())
    document["axes"] = {**document.get("axes", {}),
                        "replicates": {"one": {}, "two": {"rollout.replicates": 2}},
                        "samples": {"one": {}, "two": {"judge.samples": 2}}}
    spec = mv.load_spec(write(tmp_path, document))
    assert counted(spec) == listed(spec)


def test_the_plan_of_many_units_is_counted_not_listed(tmp_path):
    # 200 system variants x 2 systems x 120 cases x 30 replicates: 1.45 million transcripts and judge calls.
    document = tiny_spec_document(axes={"p": {f"v{i}": {"systems.atlas.params.temperature": i / 200} for i in range(200)}})
    document["design"]["cases_per_cell"] = 60
    document["rollout"]["replicates"] = 30
    spec = mv.load_spec(write(tmp_path, document))
    tracemalloc.start()
    started = time.process_time()
    result = mv.plan(spec, store=tmp_path / "store")
    seconds = time.process_time() - started
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    stages = result.stages
    # atlas differs in every universe, beacon never: 200 x 3,600 + 3,600 transcripts.
    assert stages["rollout"].units == 200 * 120 * 30 + 120 * 30
    assert stages["judge"].units == stages["rollout"].units
    assert stages["draft"].units == 120
    assert stages["rollout"].calls == stages["rollout"].units * 4
    assert stages["rollout"].stored is None and any("not read" in n for n in result.notes)
    # Listing them would build ~1.5 million units and 1.4 million rows (gigabytes, minutes).
    assert peak < 200 * 2**20 and seconds < 60, (peak, seconds)
    printed = run_cli(["plan", tmp_path / "spec.yaml", "--store", tmp_path / "store"]).ok()
    rollout = next(line.split() for line in printed.splitlines() if line.startswith("rollout"))
    assert rollout[1] == str(stages["rollout"].units) and rollout[2:7] == ["?"] * 5
    assert "the store was not read" in printed


def test_a_small_plan_reads_the_store_and_agrees_with_the_count(tmp_path):
    spec = mv.load_spec(ROOT / "specs" / "demo.yaml")
    result = mv.plan(spec, store=tmp_path / "store")
    count = count_work(expand(spec))
    for stage, key in (("draft", "case"), ("rollout", "transcript"), ("judge", "judgment")):
        assert result.stages[stage].units == count.units[key]
        assert result.stages[stage].calls == count.calls[key]
    assert result.naive_calls == count.naive_calls
    universes = expand(spec)
    direct = forecast(spec, universes, build_work(spec, universes), _store(spec, tmp_path / "store"))
    assert direct.stages == result.stages


# -- the run cap -------------------------------------------------------------------


class NoCalls:
    """A model client that fails the test if the run reaches it."""

    def __getattr__(self, name):
        raise AssertionError(f"the run called the model client ({name}) before refusing")


def test_run_refuses_more_units_than_max_units_before_any_call(tmp_path):
    spec = mv.load_spec(ROOT / "specs" / "demo.yaml")
    units = count_work(expand(spec)).total
    with pytest.raises(InputError) as refused:
        mv.run(spec, out=tmp_path / "run", store=tmp_path / "store", client=NoCalls(), max_units=units - 1)
    message = str(refused.value)
    assert refused.value.param == "max_units"
    assert f"{units:,} work units" in message and f"{units - 1:,}" in message and "`max_units`" in message
    assert not (tmp_path / "run").exists() and not (tmp_path / "store").exists()


def test_the_cli_refuses_past_max_units_in_one_line_naming_the_flag(tmp_path):
    spec_path = ROOT / "specs" / "demo.yaml"
    units = count_work(expand(mv.load_spec(spec_path))).total
    result = run_cli(["run", spec_path, "--out", tmp_path / "run", "--store", tmp_path / "store", "--max-units", "100"])
    line = result.refused(f"{units:,} work units", "100", "--max-units")
    assert "max_units" not in line
    assert not (tmp_path / "run").exists() and not (tmp_path / "store").exists()
    assert run_cli(["run", spec_path, "--max-units", "-1"]).returncode == 2


def test_the_default_cap_is_documented():
    from readme_blocks import documentation

    from multiverse.core._bounds import MAX_UNITS

    readme = documentation()
    assert f"{MAX_UNITS:,}" in readme and "--max-units" in readme


def test_counted_cost_and_calls_per_provider_equal_the_forecast_of_listed_units(tmp_path):
    # Priced hosted models (never called: nothing runs), so the cost is not 0.
    document = tiny_spec_document(axes={
        "judge": {"mini": {"judge.model": "openai/gpt-4o-mini"}, "big": {"judge.model": "openai/gpt-4o"}},
        "turns": {"two": {}, "three": {"rollout.max_turns": 3}},
    })
    document["design"]["generator"] = {"model": "openai/gpt-4o-mini"}
    document["systems"][0]["model"] = "openai/gpt-4o-mini"
    document["rollout"]["user"]["model"] = "openai/gpt-4o-mini"
    spec = mv.load_spec(write(tmp_path, document))
    universes = expand(spec)
    count = count_work(universes, axis_stages(spec))
    listed_plan = forecast(spec, universes, build_work(spec, universes), _store(spec, tmp_path / "store"))
    for stage, key in (("draft", "case"), ("rollout", "transcript"), ("judge", "judgment")):
        assert listed_plan.stages[stage].calls == count.calls[key]
        assert count.cost[key] == pytest.approx(listed_plan.stages[stage].cost, rel=1e-12)
    assert sum(count.cost.values()) > 0
    # The rollout's system (atlas, priced) and user share one endpoint: 2 x turns calls per transcript.
    work = build_work(spec, universes)
    per_endpoint: dict = {}
    for t in work.transcripts.values():
        for role, n in (("system", t.max_turns), ("user", t.max_turns)):
            config = t.configs[role]
            per_endpoint[(config.model, config.api_base)] = per_endpoint.get((config.model, config.api_base), 0) + n
    for c in work.cases.values():
        if c.generator is not None:
            key = (c.generator.model, c.generator.api_base)
            per_endpoint[key] = per_endpoint.get(key, 0) + 1
    for j in work.judge_calls.values():
        key = (j.config.model, j.config.api_base)
        per_endpoint[key] = per_endpoint.get(key, 0) + 1
    assert count.calls_by_endpoint == per_endpoint


@pytest.mark.parametrize("bad", [0, -3, True, 2.5, "100"])
def test_a_bad_max_units_is_refused_by_name_before_anything_runs(tmp_path, bad):
    spec = mv.load_spec(ROOT / "specs" / "demo.yaml")
    with pytest.raises(InputError) as refused:
        mv.run(spec, out=tmp_path / "run", store=tmp_path / "store", client=NoCalls(), max_units=bad)
    assert refused.value.param == "max_units" and "max_units" in str(refused.value)
    assert not (tmp_path / "store").exists()
