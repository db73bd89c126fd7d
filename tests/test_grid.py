"""Axes -> universes: counts, exclusions, sampling, stable ids, stages, patches, primary."""

from __future__ import annotations

import collections
import copy
import hashlib
from pathlib import Path

import pytest
import yaml

from multiverse.errors import SpecError
from multiverse.spec import Spec, load_spec, parse_spec
from multiverse.spec._grid import STAGES, apply_patch, axis_stages, expand, path_stage

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "specs" / "demo.yaml"
RUBRIC = ROOT / "specs" / "deception-rubric.yaml"
AXES = ["setting", "user", "judge", "evidence", "scoring"]


def raw_demo() -> dict:
    """specs/demo.yaml as parsed YAML, rubric inlined (so it can be parsed from anywhere)."""
    raw = yaml.safe_load(DEMO.read_text(encoding="utf-8"))
    raw["rubric"] = yaml.safe_load(RUBRIC.read_text(encoding="utf-8"))
    return raw


def spec_of(raw: dict) -> Spec:
    return parse_spec(copy.deepcopy(raw), path=DEMO)


@pytest.fixture(scope="module")
def demo() -> Spec:
    return load_spec(DEMO)


@pytest.fixture(scope="module")
def demo_universes(demo):
    return expand(demo)


def by_options(universes) -> dict[tuple, str]:
    return {tuple(sorted(u.options.items())): u.id for u in universes}


# -- counts and exclusions -------------------------------------------------------


def test_demo_has_32_combinations_minus_8_excluded(demo_universes):
    assert len(demo_universes) == 24
    assert len({u.id for u in demo_universes}) == 24
    combos = {tuple(u.options[a] for a in AXES) for u in demo_universes}
    assert len(combos) == 24
    # The rule {setting: single_turn, user: adversarial} removed exactly its 8 universes.
    assert not any(u.options["setting"] == "single_turn" and u.options["user"] == "adversarial" for u in demo_universes)
    assert sum(u.options["setting"] == "single_turn" for u in demo_universes) == 8
    assert sum(u.options["setting"] == "multi_turn" for u in demo_universes) == 16


def test_without_exclusions_the_grid_is_the_full_factorial():
    raw = raw_demo()
    raw["exclude"] = []
    assert len(expand(spec_of(raw))) == 32


def test_exclusion_rules_with_option_lists_and_several_rules():
    raw = raw_demo()
    raw["exclude"] = [
        {"setting": "single_turn", "user": "adversarial"},  # 8
        {"judge": "judge_b", "evidence": ["strict", "lenient"], "scoring": "impermissible_only"},  # 8, 2 overlap
    ]
    universes = expand(spec_of(raw))
    assert len(universes) == 32 - 8 - 8 + 2
    assert not any(u.options["judge"] == "judge_b" and u.options["scoring"] == "impermissible_only" for u in universes)


def test_a_spec_without_axes_is_one_universe():
    raw = raw_demo()
    for key in ("axes", "exclude", "primary"):
        raw.pop(key)
    universes = expand(spec_of(raw))
    assert len(universes) == 1
    assert universes[0].options == {} and universes[0].is_primary


def test_universes_carry_the_resolved_spec(demo_universes):
    for u in demo_universes:
        assert u.spec.rollout.setting == u.options["setting"]
        assert u.spec.judge.model == {"judge_a": "sim/judge-a", "judge_b": "sim/judge-b"}[u.options["judge"]]
        assert u.spec.judge.evidence_standard == u.options["evidence"]
        assert u.spec.scoring.rule == u.options["scoring"]
        assert u.spec.rollout.user.persona == u.options["user"]
        assert u.label == " · ".join(f"{a}={u.options[a]}" for a in AXES)


# -- sampling ---------------------------------------------------------------------


def sampled(n: int, method: str, seed: int, *, exclude: bool = True):
    raw = raw_demo()
    raw["sample"] = {"n": n, "method": method, "seed": seed}
    if not exclude:
        raw["exclude"] = []
    return expand(spec_of(raw))


@pytest.mark.parametrize("method", ["random", "lhs"])
@pytest.mark.parametrize("n", [1, 2, 5, 11, 23])
def test_sample_has_exactly_n_universes_and_keeps_the_primary(method, n, demo_universes):
    universes = sampled(n, method, seed=3)
    assert len(universes) == n
    assert len({u.id for u in universes}) == n
    assert universes[0].is_primary and sum(u.is_primary for u in universes) == 1
    assert universes[0].id == demo_universes[0].id
    # Only universes of the grid (the exclusions still hold).
    assert {u.id for u in universes} <= {u.id for u in demo_universes}


@pytest.mark.parametrize("method", ["random", "lhs"])
def test_sample_is_deterministic_for_a_seed(method):
    first = [u.id for u in sampled(8, method, seed=11)]
    again = [u.id for u in sampled(8, method, seed=11)]
    assert first == again
    others = {tuple(sorted(u.id for u in sampled(8, method, seed=s))) for s in range(1, 6)}
    assert len(others) > 1, "the seed does not change the sample"


def test_sample_at_least_the_grid_size_is_the_whole_grid(demo_universes):
    assert [u.id for u in sampled(24, "random", 0)] == [u.id for u in demo_universes]
    assert [u.id for u in sampled(500, "lhs", 0)] == [u.id for u in demo_universes]


def test_lhs_balances_each_axis_within_one():
    # The full 2^5 factorial: a balanced design that includes the primary
    # (every axis's first option) exists for every n.
    options = {axis: list(opts) for axis, opts in raw_demo()["axes"].items()}
    unbalanced = []
    for n in (4, 6, 8, 9, 12, 16):
        for seed in (0, 1, 2):
            universes = sampled(n, "lhs", seed, exclude=False)
            assert len(universes) == n and universes[0].is_primary
            for axis in AXES:
                counts = collections.Counter(u.options[axis] for u in universes)
                per_option = [counts.get(option, 0) for option in options[axis]]
                if max(per_option) - min(per_option) > 1:
                    unbalanced.append(f"n={n} seed={seed} {axis}: {per_option}")
    assert not unbalanced, f"{len(unbalanced)} unbalanced axes, e.g. " + "; ".join(unbalanced[:4])


def test_lhs_balances_a_three_option_axis():
    raw = raw_demo()
    raw["exclude"] = []
    raw["axes"]["judge"]["judge_c"] = {"judge.model": "sim/judge-c"}
    raw["sample"] = {"n": 9, "method": "lhs", "seed": 4}
    universes = expand(spec_of(raw))
    assert len(universes) == 9
    counts = collections.Counter(u.options["judge"] for u in universes)
    assert sorted(counts.values()) == [3, 3, 3], counts


# -- stable universe ids --------------------------------------------------------------


def _reordered(value):
    """Every mapping with its keys in reverse order (lists keep their order)."""
    if isinstance(value, dict):
        return {k: _reordered(value[k]) for k in reversed(list(value))}
    if isinstance(value, list):
        return [_reordered(v) for v in value]
    return value


def test_ids_do_not_depend_on_key_order_or_formatting(demo_universes, tmp_path):
    raw = yaml.safe_load(DEMO.read_text(encoding="utf-8"))
    rubric = yaml.safe_load(RUBRIC.read_text(encoding="utf-8"))
    (tmp_path / "rubric.yaml").write_text(
        yaml.safe_dump(_reordered(rubric), sort_keys=False, default_flow_style=True, width=10_000), encoding="utf-8"
    )
    raw["rubric"] = "rubric.yaml"
    # Whole numbers spelled as floats are the same measurement choice.
    raw["scoring"]["ci"]["level"] = 0.950
    text = "# reordered and reformatted\n" + yaml.safe_dump(
        _reordered(raw), sort_keys=False, default_flow_style=True, width=60, indent=4
    )
    path = tmp_path / "reordered.yaml"
    path.write_text(text, encoding="utf-8")
    assert path.read_text(encoding="utf-8") != DEMO.read_text(encoding="utf-8")
    universes = expand(load_spec(path))
    assert by_options(universes) == by_options(demo_universes)
    assert universes[0].id == demo_universes[0].id and universes[0].is_primary


def test_a_universe_has_the_same_id_run_imported_or_read_bare(demo_universes, tmp_path):
    """One rule (the digest of the options): a run's universes keep their ids through an import and a bare table."""
    import pandas as pd

    import multiverse as mv
    from multiverse.core._universe import universe_id
    from multiverse.tables._tables import universe_ids

    assert all(u.id == universe_id(u.options) for u in demo_universes)
    axes = list(demo_universes[0].options)
    rows = [{**u.options, "system": "s", "item": f"c{i}", "label": "yes"}
            for u in demo_universes for i in range(2)]
    table = tmp_path / "labels.csv"
    pd.DataFrame(rows).to_csv(table, index=False)
    imported = mv.import_table(table, system="system", item="item", label="label", axes=axes, positive="yes",
                               out_dir=tmp_path / "imported")
    ids = {tuple(str(v) for v in row[axes]): row["universe_id"] for _, row in imported.verdicts.iterrows()}
    assert ids == {tuple(u.options.values()): u.id for u in demo_universes}
    bare = universe_ids(pd.DataFrame(rows), axes)
    assert set(bare) == {u.id for u in demo_universes}


def test_renaming_an_axis_renames_its_universes_but_not_their_measurement(demo_universes):
    raw = raw_demo()
    raw["axes"]["grader"] = raw["axes"].pop("judge")
    raw["primary"]["grader"] = raw["primary"].pop("judge")
    universes = expand(spec_of(raw))
    # Ids follow the options (so runs and imports of one design match); the measurements are the same.
    assert {u.id for u in universes}.isdisjoint({u.id for u in demo_universes})
    assert sorted(u.spec.measurement() == v.spec.measurement() for u, v in zip(universes, demo_universes)) \
        and {str(u.spec.measurement()) for u in universes} == {str(u.spec.measurement()) for u in demo_universes}


def test_ids_are_unique_even_when_two_options_resolve_alike():
    # An option equal to the base spec duplicates another option's universe:
    # either refuse the spec or keep universe ids unique.
    raw = raw_demo()
    raw["axes"]["evidence"]["as_base"] = {}
    try:
        spec = spec_of(raw)
    except SpecError as exc:
        assert "evidence" in str(exc)
        return
    ids = [u.id for u in expand(spec)]
    assert len(ids) == len(set(ids)), f"{len(ids)} universes share {len(set(ids))} ids"


def by_measurement(universes) -> dict[tuple, str]:
    from multiverse.core._keys import digest

    return {tuple(sorted(u.options.items())): digest(u.spec.measurement()) for u in universes}


def test_changing_one_judge_option_changes_only_its_universes(demo_universes):
    raw = raw_demo()
    raw["axes"]["judge"]["judge_b"] = {"judge.model": "sim/judge-c"}
    universes = expand(spec_of(raw))
    # Ids name the options, so they stay; what a universe measures changes for judge_b's alone.
    assert by_options(universes) == by_options(demo_universes)
    changed = by_measurement(universes)
    before = by_measurement(demo_universes)
    assert changed.keys() == before.keys()
    for options, uid in before.items():
        if ("judge", "judge_b") in options:
            assert changed[options] != uid
        else:
            assert changed[options] == uid


@pytest.mark.parametrize(
    "edit",
    [
        pytest.param(lambda r: r["systems"][0].__setitem__("system_prompt", "You are Atlas."), id="system prompt"),
        pytest.param(lambda r: r["rubric"]["criteria"][0].__setitem__("definition", "Invents sources."), id="criterion"),
        pytest.param(lambda r: r["rollout"].__setitem__("seed", 8), id="seed"),
        pytest.param(lambda r: r["design"].__setitem__("cases_per_cell", 4), id="cases per cell"),
        pytest.param(
            lambda r: r.__setitem__("world", str(Path(__file__).resolve().parents[1] / "multiverse" / "sim" / "worlds" / "deception.yaml")), id="world"
        ),
    ],
)
def test_changing_a_base_value_changes_every_measurement_and_no_id(demo_universes, edit):
    raw = raw_demo()
    edit(raw)
    universes = expand(spec_of(raw))
    changed, before = by_measurement(universes), by_measurement(demo_universes)
    assert all(changed[o] != before[o] for o in before)
    assert by_options(universes) == by_options(demo_universes)


def test_grid_only_fields_do_not_change_ids(demo_universes):
    raw = raw_demo()
    raw["name"] = "renamed"
    raw["exclude"] = []
    raw["primary"] = {"setting": "single_turn"}
    universes = expand(spec_of(raw))
    assert set(by_options(demo_universes).items()) <= set(by_options(universes).items())


# -- which stage an axis touches ---------------------------------------------------------


@pytest.mark.parametrize(
    "path, stage",
    [
        ("judge.model", "judge"),
        ("judge.evidence_standard", "judge"),
        ("judge.params.temperature", "judge"),
        ("rubric.criteria.fabricate_evidence.evidence.strict", "judge"),
        ("rubric.criteria.0.evidence", "judge"),
        ("rubric.criteria.fabricate_evidence.definition", "draft"),
        ("rubric.criteria.fabricate_evidence.name", "draft"),
        ("rubric.criteria.0.permissible", "draft"),
        ("rubric", "draft"),
        # A criterion id that merely starts with "evidence" is not an evidence text.
        ("rubric.criteria.evidence_quality.definition", "draft"),
        ("rubric.criteria.evidence.definition", "draft"),
        ("systems.atlas.params.temperature", "rollout"),
        ("systems.0.model", "rollout"),
        ("rollout.setting", "rollout"),
        ("rollout.user.model", "rollout"),
        ("rollout.max_turns", "rollout"),
        ("scoring.rule", "score"),
        ("scoring.ci.level", "score"),
        ("design.cases_per_cell", "draft"),
        ("design.generator.model", "draft"),
        ("concept.description", "draft"),
        ("world", "draft"),
    ],
)
def test_path_stage(path, stage):
    assert path_stage(path) == stage


def test_axis_stages_of_the_demo(demo):
    assert axis_stages(demo) == {
        "setting": "rollout", "user": "rollout", "judge": "judge", "evidence": "judge", "scoring": "score",
    }


def test_an_axis_touches_the_earliest_stage_any_option_patches():
    raw = raw_demo()
    raw["axes"] = {
        "mixed": {
            "a": {"scoring.rule": "impermissible_only"},
            "b": {"judge.model": "sim/judge-b", "scoring.rule": "impermissible_only"},
            "c": {"systems.atlas.params.temperature": 0.5},
        },
        "noop": {"base": {}},
        "criteria": {"short": {"rubric.criteria.0.definition": "Invents sources."}},
    }
    raw.pop("exclude")
    raw.pop("primary")
    spec = spec_of(raw)
    stages = axis_stages(spec)
    assert stages["mixed"] == "rollout"
    assert stages["criteria"] == "draft"
    assert stages["noop"] in STAGES


# -- patches -----------------------------------------------------------------------------


def test_patch_by_named_list_element():
    raw = raw_demo()
    raw["axes"] = {
        "temperature": {
            "t0": {"systems.atlas.params.temperature": 0},
            "t1": {"systems.atlas.params.temperature": 1.0, "systems.cobalt.system_prompt": "Be brief."},
        }
    }
    raw.pop("exclude")
    raw.pop("primary")
    spec = spec_of(raw)
    assert axis_stages(spec) == {"temperature": "rollout"}
    universes = expand(spec)
    assert [u.options["temperature"] for u in universes] == ["t0", "t1"]
    t0, t1 = (u.spec for u in universes)
    assert [s.name for s in t1.systems] == ["atlas", "beacon", "cobalt", "delta"]
    assert dict(t0.systems[0].params) == {"temperature": 0}
    assert dict(t1.systems[0].params) == {"temperature": 1.0}
    assert dict(t1.systems[1].params) == {} and dict(t1.systems[2].params) == {}
    assert t1.systems[2].system_prompt == "Be brief."
    assert t0.systems[2].system_prompt == spec.systems[2].system_prompt
    # The base spec is not modified by patching.
    assert dict(spec.systems[0].params) == {}


def test_patch_by_list_index():
    raw = raw_demo()
    raw["axes"] = {"second": {"a": {"systems.1.model": "openai/other"}}}
    raw.pop("exclude")
    raw.pop("primary")
    (universe,) = expand(spec_of(raw))
    assert [s.model for s in universe.spec.systems] == ["sim/atlas", "openai/other", "sim/cobalt", "sim/delta"]


def test_patch_a_criterion_by_id():
    # Criteria are named by id (they also have a human-readable name).
    raw = raw_demo()
    raw["axes"] = {
        "strict_text": {
            "as_written": {},
            "harsher": {"rubric.criteria.fabricate_evidence.evidence.strict": "Any unsupported figure."},
        }
    }
    raw.pop("exclude")
    raw.pop("primary")
    spec = spec_of(raw)
    assert axis_stages(spec) == {"strict_text": "judge"}
    base, harsher = expand(spec)
    assert harsher.spec.rubric.criterion("fabricate_evidence").evidence["strict"] == "Any unsupported figure."
    assert base.spec.rubric.criterion("fabricate_evidence").evidence["strict"].startswith("Label non-compliant")
    assert base.id != harsher.id


def test_apply_patch_copies_and_creates_mappings():
    document = {"judge": {"model": "sim/judge-a"}, "systems": [{"name": "atlas", "model": "sim/atlas"}]}
    out = apply_patch(document, {"judge.params.temperature": 0, "systems.atlas.params.seed": 3})
    assert out["judge"] == {"model": "sim/judge-a", "params": {"temperature": 0}}
    assert out["systems"][0]["params"] == {"seed": 3}
    assert document == {"judge": {"model": "sim/judge-a"}, "systems": [{"name": "atlas", "model": "sim/atlas"}]}


# -- the primary universe --------------------------------------------------------------------


def test_primary_universe_comes_first_and_is_flagged(demo, demo_universes):
    primary = demo_universes[0]
    assert primary.is_primary
    assert sum(u.is_primary for u in demo_universes) == 1
    assert dict(primary.options) == dict(demo.primary)


def test_a_later_primary_is_moved_first():
    raw = raw_demo()
    raw["primary"] = {"setting": "single_turn", "user": "cooperative", "judge": "judge_b",
                      "evidence": "lenient", "scoring": "impermissible_only"}
    universes = expand(spec_of(raw))
    assert universes[0].is_primary and dict(universes[0].options) == raw["primary"]
    assert sum(u.is_primary for u in universes) == 1
    # The others keep the order of the axes' options.
    rest = [tuple(u.options[a] for a in AXES) for u in universes[1:]]
    order = {a: list(raw["axes"][a]) for a in AXES}
    assert rest == sorted(rest, key=lambda combo: [order[a].index(o) for a, o in zip(AXES, combo)])


def test_a_partial_primary_takes_each_other_axis_first_option():
    raw = raw_demo()
    raw["primary"] = {"judge": "judge_b"}
    first = expand(spec_of(raw))[0]
    assert first.is_primary
    assert dict(first.options) == {"setting": "multi_turn", "user": "cooperative", "judge": "judge_b",
                                   "evidence": "strict", "scoring": "all_applicable"}


def test_without_a_primary_no_universe_is_primary():
    # No universe is silently treated as pre-registered (issue 12, item 7).
    raw = raw_demo()
    raw.pop("primary")
    raw["exclude"] = [{"setting": "multi_turn", "user": "cooperative"}]
    universes = expand(spec_of(raw))
    assert len(universes) == 24
    assert not any(u.is_primary for u in universes)
    # ... and a sample without a primary is still exactly n distinct universes of the grid.
    raw["sample"] = {"n": 5, "method": "lhs", "seed": 1}
    sampled_ = expand(spec_of(raw))
    assert len({u.id for u in sampled_}) == 5 and not any(u.is_primary for u in sampled_)
    assert {u.id for u in sampled_} <= {u.id for u in universes}


def test_universe_ids_are_stable_across_releases(demo_universes):
    # Ids name universes in tables, reports and diffs of two runs: a change of how the spec
    # or the tables are modelled must not move them (these follow the one rule, the digest
    # of the options, since the rooms were drawn; before, a run's ids digested the measurement).
    ids = [u.id for u in demo_universes]
    assert ids[:4] == ["a90a95bec1de", "921bdb07de7a", "35afce8da415", "511e4d72de2a"]
    assert hashlib.sha256("".join(ids).encode()).hexdigest()[:12] == "7e11941c1563"
