"""Importers (multiverse.importers): ASSERT run directories and generic label tables.

The ASSERT runs are built by hand from shared/formats/assert.md; every expected
verdict and rate below is worked out by hand in the comments.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from pandas.testing import assert_frame_equal

from multiverse.core import SCHEMA_VERSION
from multiverse.core._keys import digest
from multiverse.core._universe import universe_id
from multiverse.errors import InputError
from multiverse.importers import import_assert, import_table
from multiverse.results._load import load_run
from multiverse.results._results import Results
from multiverse.tables._tables import read_table

# ----------------------------------------------------------------------------- ASSERT runs

FAB, OVER, DISC = "Fabricate evidence", "Overclaim capability", "Disclose uncertainty"

# The taxonomy the runs were judged with (v0001) ...
TAXONOMY_V1 = [(FAB, False), (OVER, False), (DISC, True)]
# ... and a newer one at the suite root (v0002): reordered, and OVER turned permissible.
# Reading the root, or matching nodes by position, would change the verdicts below.
TAXONOMY_V2 = [(DISC, True), (OVER, True), (FAB, False)]

CASES = {  # test_case_id: (type, behavior, interaction_condition)
    "test_case_000001": ("prompt", FAB, "material_reliance"),
    "test_case_000002": ("prompt", OVER, "consistency_probe"),
    "test_case_000003": ("scenario", FAB, "consistency_probe"),
    "test_case_000004": ("scenario", OVER, "material_reliance"),
}
TEST_SET_HASH = "abcdef0123456789" * 4


def taxonomy(categories):
    return {
        "behavior": {"name": "deception", "definition": "conversational misrepresentation"},
        "definition_of_terms": [],
        "behavior_categories": [
            {"name": name, "definition": f"{name}.", "examples": [], "permissible": permissible}
            for name, permissible in categories
        ],
    }


def write_json(path: Path, document) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document, indent=1), encoding="utf-8")


def write_jsonl(path: Path, rows) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")


def make_suite(root: Path) -> Path:
    suite = root / "results" / "deception"
    write_json(suite / "taxonomy.json", taxonomy(TAXONOMY_V2))
    for version, categories in (("v0001", TAXONOMY_V1), ("v0002", TAXONOMY_V2)):
        write_json(suite / "artifacts" / "systematize" / version / "taxonomy.json", taxonomy(categories))
        write_json(suite / "artifacts" / "systematize" / version / "artifact.json", {"version": version})
    test_set = [
        {"type": kind, "test_case_id": case, "behavior": "deception",
         "seed": {"title": case, "description": f"brief of {case}"},
         "dimensions": {"behavior": behavior, "interaction_condition": condition}}
        for case, (kind, behavior, condition) in CASES.items()
    ]
    write_jsonl(suite / "artifacts" / "test_set" / "v0001" / "test_set.jsonl", test_set)
    write_jsonl(suite / "artifacts" / "test_set" / "v0002" / "test_set.jsonl", test_set[:2])
    write_jsonl(suite / "test_set.jsonl", test_set[:2])
    return suite


def ref(stage, version, path, input_hash):
    return {"artifact_type": stage, "version": version, "input_hash": input_hash, "config_hash": "c" * 64,
            "path": path, "artifact_dir": str(Path(path).parent), "metadata_path": "x", "file_hashes": {}}


def node(name, index, relevant, violated=None):
    return {"node_index": index, "node_name": name, "relevant": relevant,
            "violated": violated if relevant else None, "confidence": "high" if relevant else None,
            "evidence_turns": [1] if relevant else [], "reasoning": f"{name}: {violated}" if relevant else ""}


def verdict(*nodes):
    """A verdict listing all three v0001 nodes; ``nodes`` gives (name, violated) of relevant ones."""
    relevant = dict(nodes)
    judgments = [
        node(name, index, name in relevant, relevant.get(name)) for index, (name, _) in enumerate(TAXONOMY_V1)
    ]
    return {"dimensions": {"policy_violation": any(v for v in relevant.values()), "overrefusal": False},
            "node_judgments": judgments, "narrative": "..."}


def make_run(suite: Path, name: str, *, judge="judge-1", tester="tester-1", judge_n=1, test_set="v0001",
             inference=("test_case_000001", "test_case_000002", "test_case_000003", "test_case_000004"),
             scores=(), conversation="same") -> Path:
    run = suite / name
    write_json(run / "manifest.json", {"status": "completed"})
    test_hash = TEST_SET_HASH if test_set == "v0001" else "99" * 32
    write_json(run / "artifacts.json", {"schema_version": 1, "artifacts": {
        "systematize": ref("systematize", "v0001", "artifacts/systematize/v0001/taxonomy.json", "d" * 64),
        "test_set": ref("test_set", test_set, f"artifacts/test_set/{test_set}/test_set.jsonl", test_hash),
    }})
    config = {
        "suite": "deception", "run": name,
        "pipeline": {
            "inference": {"max_turns": 3, "target": {"model": {"name": "target-x"}},
                          "tester": {"model": {"name": tester, "temperature": 0.0}}},
            "judge": {"model": {"name": judge, "temperature": 0.0, "max_tokens": 4000}, "n": judge_n},
        },
    }
    (run / "config.yaml").write_text(json.dumps(config), encoding="utf-8")  # JSON is YAML
    (run / ".judge_config_hash").write_text(digest({"judge": judge, "n": judge_n}), encoding="utf-8")
    rows = []
    for case in inference:
        kind = CASES[case][0]
        # Multi-turn conversations depend on the simulated user; single-turn ones do not.
        said = f"{conversation}/{tester}" if kind == "scenario" else "prompt"
        rows.append({"type": kind, "test_case_id": case, "behavior": "deception",
                     "dimensions": {"behavior": CASES[case][1], "interaction_condition": CASES[case][2]},
                     "target": "target-x", "tester_model": tester if kind == "scenario" else None,
                     "stop_reason": "completed",
                     "events": [{"view": ["target"], "actor": "tester",
                                 "edit": {"type": "add_message", "message": {"role": "user", "content": f"{case} {said}"}}}],
                     "llm_calls": []})
    write_jsonl(run / "inference_set.jsonl", rows)
    score_rows = []
    for case, status, content in scores:
        kind = CASES[case][0]
        row = {"type": kind, "test_case_id": case, "behavior": "deception", "judge_model": judge,
               "target": "target-x", "tester_model": tester if kind == "scenario" else "",
               "judge_status": status, "judge_error": None,
               "dimensions": {"behavior": CASES[case][1], "interaction_condition": CASES[case][2]}}
        if status == "ok" and isinstance(content, dict) and "verdicts" in content:
            row["multi_judge"] = content
            row["verdict"] = content["verdicts"][0]
        elif status == "ok":
            row["verdict"] = content
        else:
            row["judge_error"] = content
            row["verdict"] = {"error": status}
        score_rows.append(row)
    write_jsonl(run / "scores.jsonl", score_rows)
    return run


C1, C2, C3, C4 = (f"test_case_00000{i}" for i in range(1, 5))


def three_runs(tmp_path: Path) -> list[Path]:
    """Runs A and B differ in judge model; run C differs from A in the simulated user.

    all_applicable verdicts (C = compliant, N = non-compliant):
      A: c1 N (FAB violated)      c2 C (OVER, DISC fine)      c3 excluded (nothing relevant)
         c4 rollout_failed (absent from inference_set)
      B: c1 judge_failed          c2 N (OVER violated)        c3 N (DISC violated)
         c4 excluded (scoring_skipped)
      C: c1 C   c2 N   c3 C   c4 C
    """
    suite = make_suite(tmp_path)
    run_a = make_run(suite, "run_a", inference=(C1, C2, C3), scores=[
        (C1, "ok", verdict((FAB, True), (DISC, False))),
        (C2, "ok", verdict((OVER, False), (DISC, False))),
        (C3, "ok", verdict()),
    ])
    run_b = make_run(suite, "run_b", judge="judge-2", scores=[
        (C1, "judge_failed", "rate limited"),
        (C2, "ok", verdict((OVER, True))),
        (C3, "ok", verdict((DISC, True))),
        (C4, "scoring_skipped", "target_error"),
    ])
    run_c = make_run(suite, "run_c", tester="tester-2", scores=[
        (C1, "ok", verdict((FAB, False), (OVER, False))),
        (C2, "ok", verdict((OVER, True))),
        (C3, "ok", verdict((FAB, False), (DISC, False))),
        (C4, "ok", verdict((OVER, False))),
    ])
    return [run_a, run_b, run_c]


def universe(judge, user, rule="all_applicable", **extra):
    return universe_id({"judge": judge, "user": user, **extra})


def case_id(case):
    return f"v0001@abcdef01:{CASES[case][0]}:{case}"


ROLLOUT = "no transcript in inference_set.jsonl (the rollout errored)"


def test_import_assert_verdicts_by_hand(tmp_path):
    result = import_assert(three_runs(tmp_path), tmp_path / "out")
    assert isinstance(result, Results)
    assert result.axes == ["judge", "user"]
    assert result.factors == ["behavior", "interaction_condition", "setting"]
    a, b, c = universe("judge-1", "tester-1"), universe("judge-2", "tester-1"), universe("judge-1", "tester-2")
    assert result.manifest.universe_ids == [a, b, c]

    got = result.verdicts[["universe_id", "judge", "user", "system", "case_id", "status", "reason", "compliant"]]
    want = pd.DataFrame(
        [
            (a, "judge-1", "tester-1", "target-x", case_id(C1), "ok", "", False),
            (a, "judge-1", "tester-1", "target-x", case_id(C2), "ok", "", True),
            (a, "judge-1", "tester-1", "target-x", case_id(C3), "excluded", "no applicable criterion", pd.NA),
            (a, "judge-1", "tester-1", "target-x", case_id(C4), "rollout_failed", ROLLOUT, pd.NA),
            (b, "judge-2", "tester-1", "target-x", case_id(C1), "judge_failed", "rate limited", pd.NA),
            (b, "judge-2", "tester-1", "target-x", case_id(C2), "ok", "", False),
            (b, "judge-2", "tester-1", "target-x", case_id(C3), "ok", "", False),
            (b, "judge-2", "tester-1", "target-x", case_id(C4), "excluded", "scoring_skipped: target_error", pd.NA),
            (c, "judge-1", "tester-2", "target-x", case_id(C1), "ok", "", True),
            (c, "judge-1", "tester-2", "target-x", case_id(C2), "ok", "", False),
            (c, "judge-1", "tester-2", "target-x", case_id(C3), "ok", "", True),
            (c, "judge-1", "tester-2", "target-x", case_id(C4), "ok", "", True),
        ],
        columns=got.columns,
    )
    want["compliant"] = want["compliant"].astype("boolean")
    assert_frame_equal(got, want, check_dtype=False)
    assert list(result.verdicts.columns) == [
        "universe_id", "judge", "user", "system", "case_id", "behavior", "interaction_condition", "setting",
        "replicate", "transcript_key", "judgment_key", "status", "reason", "compliant", "score",
    ]
    verdicts = result.verdicts.set_index(["universe_id", "case_id"])
    assert verdicts.loc[(a, case_id(C3)), "setting"] == "multi_turn"
    assert verdicts.loc[(a, case_id(C1)), "setting"] == "single_turn"
    assert verdicts.loc[(c, case_id(C4)), "behavior"] == OVER
    # A and B judged the same single- and multi-turn conversations; C's simulated user differs.
    assert verdicts.loc[(a, case_id(C3)), "transcript_key"] == verdicts.loc[(b, case_id(C3)), "transcript_key"]
    assert verdicts.loc[(a, case_id(C1)), "transcript_key"] == verdicts.loc[(c, case_id(C1)), "transcript_key"]
    assert verdicts.loc[(a, case_id(C3)), "transcript_key"] != verdicts.loc[(c, case_id(C3)), "transcript_key"]
    assert verdicts.loc[(a, case_id(C3)), "judgment_key"] != verdicts.loc[(b, case_id(C3)), "judgment_key"]


def test_import_assert_criteria_from_the_runs_taxonomy_version(tmp_path):
    result = import_assert(three_runs(tmp_path), tmp_path / "out")
    criteria = result.criteria
    assert list(criteria.columns) == [
        "judgment_key", "sample", "criterion", "permissible", "applicable", "compliant", "rationale"
    ]
    # 3 nodes per ok judgment: A 3 + B 2 + C 4 judgments.
    assert len(criteria) == 3 * 9
    verdicts = result.verdicts.set_index(["judge", "user", "case_id"])
    key = verdicts.loc[("judge-1", "tester-1", case_id(C2)), "judgment_key"]
    rows = criteria[criteria["judgment_key"] == key].set_index("criterion")
    # v0001 says OVER is impermissible (the newer suite root says permissible).
    assert rows.loc[OVER, "permissible"] == False  # noqa: E712
    assert rows.loc[FAB, "permissible"] == False  # noqa: E712
    assert rows.loc[DISC, "permissible"] == True  # noqa: E712
    assert rows["applicable"].to_dict() == {FAB: False, OVER: True, DISC: True}
    assert pd.isna(rows.loc[FAB, "compliant"])
    assert bool(rows.loc[OVER, "compliant"]) is True and bool(rows.loc[DISC, "compliant"]) is True
    assert rows.loc[OVER, "rationale"] == f"{OVER}: False"
    assert (criteria["sample"] == 0).all()


def test_import_assert_rates_by_hand(tmp_path):
    """Included = status ok.

    A: c1 N, c2 C              -> all 1/2; single_turn 1/2; multi_turn 0/0
    B: c2 N, c3 N              -> all 0/2; single_turn 0/1; multi_turn 0/1
    C: c1 C, c2 N, c3 C, c4 C  -> all 3/4; single_turn 1/2; multi_turn 2/2
    By behavior (FAB = c1, c3; OVER = c2, c4) and condition (material = c1, c4; probe = c2, c3):
    A: FAB 0/1, OVER 1/1, material 0/1, probe 1/1
    B: FAB 0/1, OVER 0/1, material 0/0, probe 0/2
    C: FAB 2/2, OVER 1/2, material 2/2, probe 1/2
    """
    result = import_assert(three_runs(tmp_path), tmp_path / "out")
    rates = result.rates.set_index(["judge", "user", "subgroup"])
    expected = {
        ("judge-1", "tester-1"): {"all": (2, 1), "setting=single_turn": (2, 1), "setting=multi_turn": (0, 0),
                                  f"behavior={FAB}": (1, 0), f"behavior={OVER}": (1, 1),
                                  "interaction_condition=material_reliance": (1, 0),
                                  "interaction_condition=consistency_probe": (1, 1)},
        ("judge-2", "tester-1"): {"all": (2, 0), "setting=single_turn": (1, 0), "setting=multi_turn": (1, 0),
                                  f"behavior={FAB}": (1, 0), f"behavior={OVER}": (1, 0),
                                  "interaction_condition=material_reliance": (0, 0),
                                  "interaction_condition=consistency_probe": (2, 0)},
        ("judge-1", "tester-2"): {"all": (4, 3), "setting=single_turn": (2, 1), "setting=multi_turn": (2, 2),
                                  f"behavior={FAB}": (2, 2), f"behavior={OVER}": (2, 1),
                                  "interaction_condition=material_reliance": (2, 2),
                                  "interaction_condition=consistency_probe": (2, 1)},
    }
    for (judge, user), subgroups in expected.items():
        for subgroup, (n, n_compliant) in subgroups.items():
            row = rates.loc[(judge, user, subgroup)]
            assert (row["n"], row["n_compliant"]) == (n, n_compliant), (judge, user, subgroup)
    assert rates.loc[("judge-1", "tester-1", "all"), "rate"] == pytest.approx(0.5)
    assert rates.loc[("judge-2", "tester-1", "all"), "rate"] == pytest.approx(0.0)
    assert rates.loc[("judge-1", "tester-2", "all"), "rate"] == pytest.approx(0.75)
    assert len(result.rates) == 3 * 7
    assert (result.rates["system"] == "target-x").all()


def test_import_assert_writes_the_import_directory(tmp_path):
    out = tmp_path / "out"
    result = import_assert(three_runs(tmp_path), out)
    for table in ("verdicts", "criteria", "rates"):
        assert (out / f"{table}.parquet").is_file() and (out / f"{table}.csv").is_file()
    assert not list(out.glob(".*tmp"))
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["schema_version"] == SCHEMA_VERSION
    assert manifest["source"] == "assert"
    assert manifest["axes"] == ["judge", "user"]
    assert manifest["factors"] == ["behavior", "interaction_condition", "setting"]
    assert manifest["primary"] is None
    assert [u["id"] for u in manifest["universes"]] == result.manifest.universe_ids
    assert manifest["warnings"] == []
    back = pd.read_parquet(out / "verdicts.parquet")
    assert_frame_equal(back, result.verdicts, check_dtype=False)
    assert str(back["compliant"].dtype) == "boolean"
    # Every analysis reads it through load_run, from parquet or (failing that) csv.
    loaded = load_run(out)
    assert (loaded.axes, loaded.factors, loaded.primary) == (["judge", "user"], result.factors, None)
    # load_run's repeating text columns are categoricals; their values are the importer's.
    text = {c: result.criteria[c].dtype for c in loaded.criteria.columns
            if isinstance(loaded.criteria[c].dtype, pd.CategoricalDtype)}
    assert_frame_equal(loaded.criteria.astype(text), result.criteria, check_dtype=False)
    from_csv = read_table(out / "verdicts.csv")
    assert from_csv["compliant"].tolist() == result.verdicts["compliant"].tolist()
    # Stable: importing again gives the same universes, keys and verdicts.
    again = import_assert(three_runs(tmp_path / "again"), tmp_path / "out2")
    assert again.manifest.universe_ids == result.manifest.universe_ids
    assert again.verdicts["judgment_key"].tolist() == result.verdicts["judgment_key"].tolist()


def test_import_assert_scoring_rules_become_an_axis(tmp_path):
    """impermissible_only (FAB, OVER count; DISC does not):
    A: c1 N, c2 C (OVER fine; with the suite root's taxonomy it would be excluded), c3 excluded
    B: c2 N, c3 excluded (only DISC relevant)
    C: c1 C, c2 N, c3 C, c4 C
    """
    result = import_assert(three_runs(tmp_path), tmp_path / "out", scoring=["all_applicable", "impermissible_only"])
    assert result.axes == ["judge", "user", "scoring"]
    assert len(result.manifest.universes) == 6
    verdicts = result.verdicts.set_index(["judge", "user", "scoring", "case_id"])
    imp = ("judge-1", "tester-1", "impermissible_only")
    assert verdicts.loc[(*imp, case_id(C2)), "status"] == "ok"
    assert bool(verdicts.loc[(*imp, case_id(C2)), "compliant"]) is True
    b_imp = verdicts.loc[("judge-2", "tester-1", "impermissible_only", case_id(C3))]
    assert (b_imp["status"], b_imp["reason"]) == ("excluded", "no applicable impermissible criterion")
    rates = result.rates.set_index(["judge", "user", "scoring", "subgroup"])
    assert tuple(rates.loc[(*imp, "all"), ["n", "n_compliant"]]) == (2, 1)
    assert tuple(rates.loc[("judge-2", "tester-1", "impermissible_only", "all"), ["n", "n_compliant"]]) == (1, 0)
    assert tuple(rates.loc[("judge-1", "tester-2", "impermissible_only", "all"), ["n", "n_compliant"]]) == (4, 3)
    a_imp = universe("judge-1", "tester-1", "impermissible_only", scoring="impermissible_only")
    assert a_imp in result.manifest.universe_ids
    # One criteria table serves every rule: judgments are shared across the scoring axis.
    assert len(result.criteria) == 27


def test_import_assert_explicit_axes(tmp_path):
    runs = three_runs(tmp_path)
    specs = [f"judge={runs[0]}:small", f"judge={runs[1]}:large", f"judge={runs[2]}:small",
             f"user={runs[0]}:calm", f"user={runs[1]}:calm", f"user={runs[2]}:pushy"]
    result = import_assert(runs, tmp_path / "out", axes=specs)
    assert result.axes == ["judge", "user"]
    assert set(result.verdicts["judge"]) == {"small", "large"}
    assert result.manifest.universe_ids[0] == universe("small", "calm")

    with pytest.raises(InputError, match="have the same options and target 'target-x'"):
        import_assert(runs, tmp_path / "bad", axes=specs[:3])
    with pytest.raises(InputError, match=r"^axis judge: .*run_c: no option"):
        import_assert(runs, tmp_path / "bad", axes={"judge": {runs[0]: "s", runs[1]: "l"}})
    with pytest.raises(InputError, match="expected name=run_dir:option"):
        import_assert(runs, tmp_path / "bad", axes=["judge"])
    assert not (tmp_path / "bad").exists()


def test_import_assert_majority_of_samples(tmp_path):
    """Judge sampled 3 times.
    c1: successful samples [N, C], one failed -> tie among ok samples -> N; sample 0 -> N
    c2: samples [C, C, N]                     -> majority C;            sample 0 -> C
    c3: samples [N, C, C]                     -> majority C;            sample 0 -> N
    """
    suite = make_suite(tmp_path)
    run = make_run(suite, "run_m", judge_n=3, inference=(C1, C2, C3), scores=[
        (C1, "ok", {"n": 3, "n_failed": 1, "verdicts": [verdict((FAB, True)), verdict((FAB, False))]}),
        (C2, "ok", {"n": 3, "n_failed": 0, "verdicts": [verdict((OVER, False)), verdict((OVER, False)),
                                                           verdict((OVER, True))]}),
        (C3, "ok", {"n": 3, "n_failed": 0, "verdicts": [verdict((FAB, True)), verdict((FAB, False)),
                                                           verdict((FAB, False))]}),
    ])
    result = import_assert([run], tmp_path / "out", scoring=["majority_of_samples", "all_applicable"])
    verdicts = result.verdicts.set_index(["scoring", "case_id"])
    majority = [bool(verdicts.loc[("majority_of_samples", case_id(c)), "compliant"]) for c in (C1, C2, C3)]
    first = [bool(verdicts.loc[("all_applicable", case_id(c)), "compliant"]) for c in (C1, C2, C3)]
    assert majority == [False, True, True]
    assert first == [False, True, False]
    c1 = verdicts.loc[("majority_of_samples", case_id(C1)), "judgment_key"]
    assert sorted(result.criteria.loc[result.criteria["judgment_key"] == c1, "sample"].unique()) == [0, 1]
    # C4 is in the test set but has no transcript.
    assert verdicts.loc[("all_applicable", case_id(C4)), "status"] == "rollout_failed"


def test_import_assert_warns_when_test_sets_differ(tmp_path):
    suite = make_suite(tmp_path)
    run_a = make_run(suite, "run_a", inference=(C1, C2), scores=[(C1, "ok", verdict((FAB, False)))])
    run_d = make_run(suite, "run_d", judge="judge-2", test_set="v0002", inference=(C1, C2),
                     scores=[(C1, "ok", verdict((FAB, True)))])
    result = import_assert([run_a, run_d], tmp_path / "out")
    assert len(result.warnings) == 1
    warning = result.warnings[0]
    assert "different test sets" in warning and "v0001@abcdef01" in warning and "v0002@99999999" in warning
    assert "v0001@abcdef01: deception/run_a; v0002@99999999: deception/run_d" in warning
    assert "(0 cases are common to all runs)" in warning
    # run_a's test set has four cases (two never rolled out); run_d's has two.
    cases = result.verdicts.groupby("judge")["case_id"].agg(set).to_dict()
    assert cases == {
        "judge-1": {case_id(c) for c in (C1, C2, C3, C4)},
        "judge-2": {"v0002@99999999:prompt:test_case_000001", "v0002@99999999:prompt:test_case_000002"},
    }
    assert json.loads((tmp_path / "out" / "manifest.json").read_text())["warnings"] == [warning]


def test_import_assert_same_choices_get_a_run_axis(tmp_path):
    suite = make_suite(tmp_path)
    first = make_run(suite, "run_a", inference=(C1,), scores=[(C1, "ok", verdict((FAB, False)))])
    second = make_run(suite, "run_a2", inference=(C1,), scores=[(C1, "ok", verdict((FAB, True)))])
    result = import_assert([first, second], tmp_path / "out")
    assert result.axes == ["run"]
    assert set(result.verdicts["run"]) == {"deception/run_a", "deception/run_a2"}
    assert "added axis 'run'" in result.warnings[0]


def test_import_assert_bad_input_writes_nothing(tmp_path):
    suite = make_suite(tmp_path)
    out = tmp_path / "out"
    run = make_run(suite, "run_x", inference=(C1,), scores=[(C1, "ok", verdict((FAB, False)))])
    scores = run / "scores.jsonl"
    row = json.loads(scores.read_text())
    row["verdict"]["node_judgments"][0]["node_name"] = "Invented category"
    write_jsonl(scores, [row])
    with pytest.raises(InputError) as err:
        import_assert([run], out)
    message = str(err.value)
    assert "scores.jsonl: line 1: verdict.node_judgments[0].node_name: 'Invented category'" in message
    assert "v0001" in message and "\n" not in message

    scores.write_text("{not json\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"scores.jsonl: line 1: expected a JSON object"):
        import_assert([run], out)

    write_json(run / "artifacts.json", {"schema_version": 1, "artifacts": {}})
    (run / "manifest.json").unlink()
    with pytest.raises(InputError, match=r"artifacts.json: artifacts.systematize.path: expected the taxonomy"):
        import_assert([run], out)
    with pytest.raises(InputError, match="expected an ASSERT run directory"):
        import_assert([tmp_path / "nowhere"], out)
    with pytest.raises(InputError, match="scoring: unknown rule"):
        import_assert([run], out, scoring="strictest")
    assert not out.exists()


# ----------------------------------------------------------------------------- label tables

TABLE = """judge,evidence,model,item,label
j1,strict,A,i1,1
j1,strict,A,i2,0
j1,strict,A,i3,1
j1,strict,B,i1,0
j1,strict,B,i2,0
j1,strict,B,i3,1
j1,lenient,A,i1,1
j1,lenient,A,i2,1
j1,lenient,A,i3,1
j2,strict,A,i1,1
j2,strict,A,i2,
j2,strict,A,i3,0
"""


def write_table(tmp_path: Path, text: str, name="labels.csv") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def table_universe(judge, evidence):
    return universe_id({"judge": judge, "evidence": evidence})


def test_import_table_two_axes_by_hand(tmp_path):
    """Universes (j1,strict), (j1,lenient), (j2,strict).
    (j1,strict) A: 2/3, B: 1/3; (j1,lenient) A: 3/3; (j2,strict) A: i2 empty -> excluded, 1/2.
    """
    path = write_table(tmp_path, TABLE)
    result = import_table(path, system="model", item="item", label="label", axes=["judge", "evidence"],
                          out_dir=tmp_path / "out")
    assert result.criteria is None
    assert result.axes == ["judge", "evidence"] and result.factors == []
    ids = [table_universe("j1", "strict"), table_universe("j1", "lenient"), table_universe("j2", "strict")]
    assert result.manifest.universe_ids == ids
    got = result.rates[["universe_id", "judge", "evidence", "system", "subgroup", "n", "n_compliant"]]
    want = pd.DataFrame(
        [
            (ids[0], "j1", "strict", "A", "all", 3, 2),
            (ids[0], "j1", "strict", "B", "all", 3, 1),
            (ids[1], "j1", "lenient", "A", "all", 3, 3),
            (ids[2], "j2", "strict", "A", "all", 2, 1),
        ],
        columns=got.columns,
    )
    assert_frame_equal(got, want, check_dtype=False)
    assert result.rates["rate"].tolist() == pytest.approx([2 / 3, 1 / 3, 1.0, 0.5])
    excluded = result.verdicts[result.verdicts["status"] != "ok"]
    assert excluded[["judge", "system", "case_id", "reason"]].values.tolist() == [["j2", "A", "i2", "missing label"]]
    assert list(result.verdicts.columns) == [
        "universe_id", "judge", "evidence", "system", "case_id", "replicate", "transcript_key", "judgment_key",
        "status", "reason", "compliant", "score",
    ]
    out = tmp_path / "out"
    assert {p.name for p in out.iterdir()} == {
        "verdicts.parquet", "verdicts.csv", "rates.parquet", "rates.csv", "manifest.json"
    }
    manifest = json.loads((out / "manifest.json").read_text())
    assert (manifest["schema_version"], manifest["source"], manifest["primary"]) == (SCHEMA_VERSION, "table", None)
    assert "1 rows have a missing label and are excluded" in manifest["warnings"][0]
    # Nothing in the table says the universes judged the same answer: no transcript key (agreement then
    # pairs on system, item and replicate), and each universe's label is its own judgment.
    verdicts = result.verdicts.set_index(["judge", "evidence", "system", "case_id"])
    assert result.verdicts["transcript_key"].isna().all()
    assert verdicts.loc[("j1", "strict", "A", "i1"), "judgment_key"] != verdicts.loc[
        ("j2", "strict", "A", "i1"), "judgment_key"]


def test_import_table_categories_booleans_and_parquet(tmp_path):
    text = "model,item,verdict\nA,i1,safe\nA,i2,unsafe\nA,i3,safe\nB,i1,unsafe\n"
    result = import_table(write_table(tmp_path, text), system="model", item="item", label="verdict",
                          positive="safe", negative=["unsafe"], out_dir=tmp_path / "cat")
    assert result.rates[["system", "n", "n_compliant"]].values.tolist() == [["A", 3, 2], ["B", 1, 0]]
    assert len(result.manifest.universes) == 1

    frame = pd.DataFrame({"model": ["A", "A", "B"], "item": ["i1", "i2", "i1"], "ok": [True, False, True],
                          "judge": ["x", "x", "x"]})
    frame.to_parquet(tmp_path / "labels.parquet")
    result = import_table(tmp_path / "labels.parquet", system="model", item="item", label="ok", axes=["judge"],
                          out_dir=tmp_path / "pq")
    assert result.rates[["system", "n", "n_compliant"]].values.tolist() == [["A", 2, 1], ["B", 1, 1]]
    # --positive on a binary label names which value is compliant.
    flipped = import_table(tmp_path / "labels.parquet", system="model", item="item", label="ok",
                           positive="false", out_dir=tmp_path / "flip")
    assert flipped.rates[["system", "n_compliant"]].values.tolist() == [["A", 1], ["B", 0]]


@pytest.mark.parametrize(
    ("text", "flags", "message"),
    [
        (TABLE, {"label": "verdict"}, "labels.csv: verdict: column not found (the `label` column; the table has: judge, evidence, model, item, label)"),
        (TABLE, {"axes": ["judge", "grader"]}, "labels.csv: grader: column not found (an `axes` column; the table has: judge, evidence, model, item, "
         "label)"),
        ("model,item,label\nA,i1,safe\nA,i2,unsafe\n", {},
         "labels.csv: label: expected a binary label (true/false or 0/1), found safe, unsafe; "
         "name the compliant value (`positive`) and the non-compliant ones (`negative`)"),
        ("model,item,label\nA,i1,safe\nA,i2,unsafe\n", {"positive": "fine"},
         "labels.csv: label: 2 labels are neither `positive` 'fine' nor in `negative`: safe, unsafe; "
         "expected each value named, by `positive` or `negative` naming the non-compliant ones "
         "(labels are never guessed)"),
        (TABLE + "j1,strict,A,i2,1\n", {"axes": ["judge", "evidence"]},
         "labels.csv: judge, evidence, model, item: duplicate rows for universe (judge=j1, evidence=strict), "
         "model=A, item=i2; expected one label per universe, system and item (repeated runs of an item, such as "
         "epochs, need a `replicate` column)"),
        (TABLE, {},
         "labels.csv: model, item: duplicate rows for model=A, item=i1; "
         "expected one label per universe, system and item (repeated runs of an item, such as epochs, need a "
         "`replicate` column; without axis columns the whole table is one universe: is a column missing from "
         "`axes`, e.g. the judge or grader?)"),
        ("model,item,label\nA,,1\n", {}, "labels.csv: item: empty value in data row 1; expected a name in every row"),
    ],
)
def test_import_table_bad_input_raises_and_writes_nothing(tmp_path, text, flags, message):
    path = write_table(tmp_path, text)
    arguments = {"system": "model", "item": "item", "label": "label", **flags}
    with pytest.raises(InputError) as err:
        import_table(path, out_dir=tmp_path / "out", **arguments)
    assert str(err.value) == f"{path}: {message.split(': ', 1)[1]}"
    assert "\n" not in str(err.value)
    assert not (tmp_path / "out").exists()


def test_import_table_unreadable_files(tmp_path):
    with pytest.raises(InputError, match="file not found"):
        import_table(tmp_path / "missing.csv", system="s", item="i", label="l", out_dir=tmp_path / "out")
    with pytest.raises(InputError, match=r"expected a \.csv, \.parquet or \.jsonl file"):
        import_table(write_table(tmp_path, "x", "labels.xlsx"), system="s", item="i", label="l",
                     out_dir=tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_reimport_replaces_tables_and_drops_stale_criteria(tmp_path):
    out = tmp_path / "out"
    import_assert(three_runs(tmp_path), out)
    assert (out / "criteria.parquet").exists()
    import_table(write_table(tmp_path, TABLE), system="model", item="item", label="label",
                 axes=["judge", "evidence"], out_dir=out)
    assert not (out / "criteria.parquet").exists() and not (out / "criteria.csv").exists()
    assert json.loads((out / "manifest.json").read_text())["source"] == "table"


def test_import_assert_turn_checkpoints_and_setting_axis(tmp_path):
    """Checkpoint rows judge c3 at turns 1 and 2 besides its final judgment:
    turn 1: nothing relevant -> excluded; turn 2: FAB violated -> N; final: FAB fine -> C.
    An explicit axis named setting replaces the setting factor.
    """
    suite = make_suite(tmp_path)
    run = make_run(suite, "run_t", inference=(C1, C3), scores=[
        (C1, "ok", verdict((FAB, False))),
        (C3, "ok", verdict()),
        (C3, "ok", verdict((FAB, True))),
        (C3, "ok", verdict((FAB, False))),
    ])
    rows = [json.loads(line) for line in (run / "scores.jsonl").read_text().splitlines()]
    rows[1]["checkpoint_turn"], rows[2]["checkpoint_turn"] = 1, 2
    write_jsonl(run / "scores.jsonl", rows)
    result = import_assert([run], tmp_path / "out", axes=[f"setting={run}:mixed"])
    assert result.axes == ["setting", "checkpoint_turn"]
    assert result.factors == ["behavior", "interaction_condition"]
    verdicts = result.verdicts.set_index(["checkpoint_turn", "case_id"])
    assert verdicts.loc[("1", case_id(C3)), "status"] == "excluded"
    assert bool(verdicts.loc[("2", case_id(C3)), "compliant"]) is False
    assert bool(verdicts.loc[("final", case_id(C3)), "compliant"]) is True
    assert bool(verdicts.loc[("final", case_id(C1)), "compliant"]) is True
    assert verdicts.loc[("final", case_id(C2)), "status"] == "rollout_failed"
    keys = verdicts.xs(case_id(C3), level="case_id")
    assert keys["transcript_key"].nunique() == 1 and keys["judgment_key"].nunique() == 3


def test_imported_criteria_reapply_scoring_rules(tmp_path):
    from multiverse.analysis.rates._scoring import rescore

    runs = three_runs(tmp_path)
    imported = import_assert(runs, tmp_path / "all")
    direct = import_assert(runs, tmp_path / "imp", scoring="impermissible_only")
    again = rescore(pd.read_parquet(tmp_path / "all" / "verdicts.parquet"),
                    pd.read_parquet(tmp_path / "all" / "criteria.parquet"), "impermissible_only")
    columns = ["judge", "user", "case_id", "status", "reason", "compliant"]
    assert_frame_equal(again[columns], direct.verdicts[columns], check_dtype=False)
    assert not again[columns].equals(imported.verdicts[columns])


def test_import_assert_counts_each_lost_judgment_and_rollout_once(tmp_path):
    # Run D: a third judge over run A's conversations (same simulated user), its C4 rollout lost as A's is,
    # and its C1 judgment failed as B's did: two lost judgments (two judges), one lost rollout.
    runs = three_runs(tmp_path)
    runs.append(make_run(runs[0].parent, "run_d", judge="judge-3", inference=(C1, C2, C3), scores=[
        (C1, "judge_failed", "timeout"), (C2, "ok", verdict((OVER, False))), (C3, "ok", verdict()),
    ]))
    result = import_assert(runs, tmp_path / "out")
    assert result.axes == ["judge", "user"]
    # From scratch, from the runs' own files: a judgment is (judge, case), a rollout (simulated user, case).
    judgments, rollouts, lost_judgments, lost_rollouts = set(), set(), set(), set()
    for run in runs:
        config = json.loads((run / "config.yaml").read_text())["pipeline"]
        judge, user = config["judge"]["model"]["name"], config["inference"]["tester"]["model"]["name"]
        ran = {json.loads(line)["test_case_id"] for line in (run / "inference_set.jsonl").read_text().splitlines()}
        scores = [json.loads(line) for line in (run / "scores.jsonl").read_text().splitlines()]
        judgments |= {(judge, user, case) for case in CASES}
        rollouts |= {(user, case) for case in CASES}
        lost_rollouts |= {(user, case) for case in set(CASES) - ran}
        lost_judgments |= {(judge, user, s["test_case_id"]) for s in scores if s["judge_status"] == "judge_failed"}
    losses = result.manifest.losses
    assert (losses["grader_error"].lost, losses["grader_error"].of) == (len(lost_judgments), len(judgments)) == (2, 16)
    assert (losses["system_error"].lost, losses["system_error"].of) == (len(lost_rollouts), len(rollouts)) == (1, 8)
    assert losses["system_error"].rows == 2  # run A's and run D's row of the one lost rollout
    assert losses["system_error"].message.startswith("1 of 8 rollouts (2 of 16 verdict rows across the universes)")


def test_import_table_over_several_judges_reports_no_loss_where_the_table_records_none(tmp_path):
    # A table has labels or empty cells (excluded, the table's own "no answer"): nothing it recorded is lost.
    result = import_table(write_table(tmp_path, TABLE), system="model", item="item", label="label",
                          axes=["judge", "evidence"], out_dir=tmp_path / "out")
    assert result.manifest.losses == {}
    assert result.manifest.statuses == {"ok": len(result.verdicts) - 1, "excluded": 1, "not_run": 0,
                                        "rollout_failed": 0, "judge_failed": 0}
