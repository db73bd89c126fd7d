"""Huge grids (issue 17 item 5): counted exactly with exclusions, listed and sampled without listing the grid.

Counts are checked against brute force on random small grids with random
exclusion rules (single options, option lists, overlapping rules, rules
naming every axis); the huge-grid paths are checked for what they return,
and for staying within a memory bound and seconds on 10^8 and 10^12 grids,
counted in this process's CPU time, which other work on a loaded machine does
not stretch (timings proper: tests/bench/bench_huge_grids.py).
"""

from __future__ import annotations

import itertools
import json
import random
import time
import tracemalloc
from pathlib import Path

import pytest
import yaml
from cli_runner import run_cli
from conftest import tiny_spec_document

from multiverse.errors import SpecError
from multiverse.spec import load_spec
from multiverse.spec._counting import KeptGrid, count_kept
from multiverse.spec._grid import count_grid, expand


def brute(axes: dict, rules: list) -> list[dict]:
    names = list(axes)
    out = []
    for values in itertools.product(*(axes[a] for a in names)):
        combo = dict(zip(names, values))
        if not any(all(combo[a] in (v if isinstance(v, list) else [v]) for a, v in r.items()) for r in rules):
            out.append(combo)
    return out


def random_grid(rng: random.Random) -> tuple[dict, list]:
    axes = {f"a{i}": [f"o{j}" for j in range(rng.randint(1, 4))] for i in range(rng.randint(1, 6))}
    rules = []
    for _ in range(rng.randint(0, 7)):
        named = rng.sample(list(axes), rng.randint(1, len(axes)))
        rules.append({a: rng.choice(axes[a]) if rng.random() < 0.5 else rng.sample(axes[a], rng.randint(1, len(axes[a])))
                      for a in named})
    return axes, rules


def key(combo: dict) -> tuple:
    return tuple(sorted(combo.items()))


@pytest.mark.parametrize("seed", range(6))
def test_kept_counts_listings_and_ranks_equal_brute_force(seed):
    rng = random.Random(seed)
    for _ in range(120):
        axes, rules = random_grid(rng)
        expected = brute(axes, rules)
        count = count_kept(axes, rules)
        assert count.exact and count.kept == len(expected), (axes, rules)
        assert count.combinations == len(list(itertools.product(*axes.values())))
        grid = KeptGrid(axes, rules)
        assert grid.count == len(expected)
        # Listing order is the factorial's (last axis fastest), as for a listed grid.
        assert grid.combinations() == expected
        # Every rank decodes to a distinct kept universe: a uniform rank is a uniform kept universe.
        ranked = [grid.at(r) for r in range(grid.count)]
        assert sorted(map(key, ranked)) == sorted(map(key, expected))


def test_an_estimated_count_says_so_and_its_interval_covers_the_truth():
    rng = random.Random(7)
    covered, checked = 0, 0
    for _ in range(200):
        axes, rules = random_grid(rng)
        truth = len(brute(axes, rules))
        estimate = count_kept(axes, rules, max_states=0, draws=2000)
        if estimate.exact:
            # The walk stayed within zero states: every branch closed at once.
            assert estimate.kept == truth
            continue
        assert "estimate" in estimate.describe() and "interval" in estimate.describe()
        assert estimate.low <= estimate.kept <= estimate.high
        covered += estimate.low <= truth <= estimate.high
        checked += 1
    # A 95% interval: nearly every one holds the brute-force count (the draws are seeded).
    assert checked > 60 and covered / checked >= 0.9, (covered, checked)


def test_counting_a_trillion_universes_with_overlapping_rules_is_exact_and_small():
    axes = {f"a{i}": [f"o{j}" for j in range(10)] for i in range(12)}
    rng = random.Random(3)
    rules = [{a: rng.choice(axes[a]) for a in rng.sample(list(axes), 3)} for _ in range(40)]
    tracemalloc.start()
    started = time.process_time()
    count = count_kept(axes, rules)
    seconds = time.process_time() - started
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert count.exact and count.combinations == 10**12
    # Each rule drops 10^9 universes; pairs of rules overlap: the count lies between
    # the sum of the drops and the sum less every pairwise overlap.
    assert 10**12 - 40 * 10**9 <= count.kept <= 10**12 - 40 * 10**9 + 40 * 39 // 2 * 10**8
    assert peak < 20 * 2**20 and seconds < 5, (peak, seconds)


# -- through a spec -------------------------------------------------------------


def write(folder: Path, **overrides) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "spec.yaml"
    path.write_text(yaml.safe_dump(tiny_spec_document(**overrides), sort_keys=False))
    return path


def huge_axes(n_axes: int, n_options: int = 10) -> dict:
    # Each axis sets its own parameter of one system: every combination is a distinct universe.
    return {f"a{i}": {f"o{j}": {f"systems.atlas.params.p{i}": j} for j in range(n_options)} for i in range(n_axes)}


def not_first(axis: str) -> dict:
    return {axis: [f"o{j}" for j in range(1, 10)]}


def measured(fn):
    tracemalloc.start()
    started = time.process_time()
    try:
        value = fn()
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    return value, peak, time.process_time() - started


def test_validate_names_the_exact_count_after_exclusions(tmp_path):
    # 10^8 combinations; the rule drops a tenth of them. An upper bound (10^8) would be a wrong number.
    spec = write(tmp_path, axes=huge_axes(8), exclude=[{"a0": "o1"}])
    code, _, err = run_cli(["validate", spec])
    assert code == 2 and "90,000,000 universes" in err and "100,000,000" not in err, err


def test_a_huge_grid_whose_exclusions_keep_few_universes_is_listed_without_listing_the_grid(tmp_path):
    # 10^8 combinations, 100 kept: a0..a5 must be o0.
    spec_path = write(tmp_path, axes=huge_axes(8), exclude=[not_first(f"a{i}") for i in range(6)],
                      primary={"a0": "o0", "a6": "o4", "a7": "o2"})
    spec = load_spec(spec_path)
    assert count_grid(spec).kept == 100
    universes, peak, seconds = measured(lambda: expand(spec))
    assert len(universes) == 100 and len({u.id for u in universes}) == 100
    assert all(u.options[f"a{i}"] == "o0" for u in universes for i in range(6))
    assert {(u.options["a6"], u.options["a7"]) for u in universes} == {(f"o{i}", f"o{j}") for i in range(10) for j in range(10)}
    assert universes[0].is_primary and universes[0].options["a6"] == "o4"
    assert peak < 100 * 2**20 and seconds < 30, (peak, seconds)


def test_a_sample_of_a_sparse_huge_grid_draws_among_the_kept_universes(tmp_path):
    # 10^8 combinations, 1,000 kept (a share of 10^-5): drawing indices of the whole grid
    # would need ~5 million tries for 50 universes.
    exclude = [not_first(f"a{i}") for i in range(5)]
    primary = {"a0": "o0", "a5": "o7"}
    for method in ("random", "lhs"):
        spec_path = write(tmp_path / method, axes=huge_axes(8), exclude=exclude, primary=primary,
                          sample={"n": 50, "method": method, "seed": 2})
        spec = load_spec(spec_path)
        universes, peak, seconds = measured(lambda spec=spec: expand(spec))
        assert len({u.id for u in universes}) == 50
        assert all(u.options[f"a{i}"] == "o0" for u in universes for i in range(5))
        assert universes[0].is_primary and universes[0].options["a5"] == "o7"
        assert [u.id for u in expand(load_spec(spec_path))] == [u.id for u in universes]
        assert peak < 100 * 2**20 and seconds < 30, (peak, seconds)


def test_a_sample_at_least_as_large_as_what_is_kept_is_everything_kept(tmp_path):
    spec = load_spec(write(tmp_path, axes=huge_axes(8), exclude=[not_first(f"a{i}") for i in range(7)],
                           sample={"n": 500, "seed": 1}))
    universes = expand(spec)
    assert len(universes) == 10
    assert sorted(u.options["a7"] for u in universes) == [f"o{j}" for j in range(10)]


def test_expand_refuses_to_list_a_grid_too_large_to_run_before_listing_it(tmp_path):
    spec = load_spec(write(tmp_path, axes=huge_axes(12), exclude=[{"a0": "o1"}]), cap_universes=False)

    def refused():
        with pytest.raises(SpecError, match="900,000,000,000 universes; expected at most 100,000"):
            expand(spec)

    _, peak, seconds = measured(refused)
    assert peak < 20 * 2**20 and seconds < 5


@pytest.mark.parametrize(("n_axes", "exclude", "kept"), [
    (6, [{"a0": "o1", "a1": ["o1", "o2"]}], 10**6 - 2 * 10**4),
    (8, [{"a0": "o1"}, {"a1": "o1"}], 10**8 - 2 * 10**7 + 10**6),
    (12, [{"a0": "o1", "a3": "o2"}, {"a3": "o2", "a7": ["o0", "o9"]}], 10**12 - 10**10 - 2 * 10**10 + 2 * 10**9),
])
def test_expand_count_counts_any_grid_exactly(tmp_path, n_axes, exclude, kept):
    spec = write(tmp_path, axes=huge_axes(n_axes), exclude=exclude)
    result, peak, seconds = measured(lambda: run_cli(["expand", spec, "--count", "--format", "json"]))
    doc = json.loads(result.ok())
    assert doc["combinations"] == 10**n_axes and doc["kept"] == kept and doc["exact"] is True
    assert doc["universes"] == kept and doc["sample"] is None
    line = run_cli(["expand", spec, "--count"]).ok()
    assert f"{kept:,} kept" in line
    assert ("run a sample" in line) == (kept > 100_000)
    # Loading the spec resolves every option once; counting adds almost nothing.
    assert peak < 60 * 2**20 and seconds < 20, (peak, seconds)


def test_expand_count_of_a_sample(tmp_path):
    spec = write(tmp_path, axes=huge_axes(9), exclude=[{"a0": "o1"}], sample={"n": 40, "seed": 0})
    doc = json.loads(run_cli(["expand", spec, "--count", "--format", "json"]).ok())
    assert (doc["kept"], doc["sample"], doc["universes"]) == (9 * 10**8, 40, 40)
    assert "a sample of 40 universes" in run_cli(["expand", spec, "--count"]).ok()


def test_a_grid_too_entangled_to_count_is_estimated_and_labelled_everywhere(tmp_path, monkeypatch):
    # Rules that overlap past the walk's width are simulated by a width of zero.
    import multiverse.spec._counting as counting

    monkeypatch.setattr(counting, "MAX_STATES", 0)
    exclude = [{"a0": "o1", "a1": "o1"}, {"a2": ["o1", "o2"]}]
    spec = write(tmp_path / "whole", axes=huge_axes(8), exclude=exclude)
    code, _, err = run_cli(["validate", spec])
    assert code == 2 and "about" in err and "estimate" in err and "run a sample" in err, err
    doc = json.loads(run_cli(["expand", spec, "--count", "--format", "json"]).ok())
    truth = 10**8 - 10**6 - 2 * 10**7 + 2 * 10**5
    assert doc["exact"] is False and doc["universes"] is None
    assert doc["kept_low"] <= truth <= doc["kept_high"] and doc["kept_low"] <= doc["kept"] <= doc["kept_high"]
    assert "not countable exactly" in run_cli(["expand", spec, "--count"]).ok()
    # A sample of it is still drawn (by index, rejecting excluded universes).
    sampled = load_spec(write(tmp_path / "sampled", axes=huge_axes(8), exclude=exclude, sample={"n": 20, "seed": 3}))
    universes = expand(sampled)
    assert len({u.id for u in universes}) == 20
    assert not any(u.options["a2"] in ("o1", "o2") for u in universes)


def test_kept_universes_too_entangled_to_walk_are_refused_in_one_line_not_crashed(tmp_path, monkeypatch):
    # Counting keeps one layer of the walk; listing keeps them all. A width of 1 lets the
    # count through (each layer has one state) but not the listing (nine layers).
    import multiverse.spec._counting as counting

    monkeypatch.setattr(counting, "MAX_STATES", 1)
    spec = write(tmp_path, axes=huge_axes(8), exclude=[not_first(f"a{i}") for i in range(6)])
    doc = json.loads(run_cli(["expand", spec, "--count", "--format", "json"]).ok())
    assert doc["exact"] is True and doc["kept"] == 100
    run_cli(["expand", spec]).refused("overlap too much to list", "sample")
