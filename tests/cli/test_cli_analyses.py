"""The analysis, report, import, power and store commands, run as a user would."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_runner import REPO, run_cli


@pytest.fixture
def run_dir(sim_run) -> Path:
    return sim_run.out


@pytest.mark.parametrize(
    "command, keys",
    [
        (["curve", "--threshold", "0.5", "--boot", "200"], {"n_universes", "systems", "tests", "primary"}),
        (["curve", "--diff", "atlas", "beacon", "--boot", "200"], {"tests"}),
        (["agreement"], {"axis", "options", "pairs", "krippendorff_alpha", "confounded", "per_criterion"}),
        (["ranking", "--boot", "100"], {"p_top", "p_above", "kendall_tau", "kendall_w", "flips"}),
        (["variance"], {"terms", "by_axis", "summary"}),
    ],
)
def test_analysis_commands_print_one_json_document_and_write_figures(run_dir, command, keys, tmp_path):
    figure = tmp_path / f"{command[0]}.png"
    done = run_cli([command[0], run_dir, "--json", "--figure", figure, *command[1:]], cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)  # the whole of stdout is one JSON document (NaN would not parse)
    assert keys <= set(document)
    assert figure.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and figure.stat().st_size > 10_000
    if command[0] == "agreement":
        pair = document["pairs"][0]
        assert {pair["a"], pair["b"]} == {"judge_a", "judge_b"} and 0 <= pair["percent"] <= 1
        assert document["confounded"] == []  # behavior is fixed by the case: the same inside every unit
    if "--diff" in command:
        assert document["tests"][0]["kind"] == "difference"


def test_curve_threshold_primary_is_the_apis(run_dir, tmp_path):
    """`--threshold primary` is the API's threshold="primary": each system against its own primary rate."""
    from multiverse import load_run

    done = run_cli(["curve", run_dir, "--json", "--threshold", "PRIMARY", "--boot", "100"], cwd=tmp_path)
    document = json.loads(done.ok())
    api = load_run(run_dir).curve(threshold="primary", boot=100).to_dict()
    assert document["tests"] == json.loads(json.dumps(api["tests"])) and document["tests"]
    rates = {s: v["primary"]["rate"] for s, v in document["systems"].items()}
    assert {t["systems"][0]: t["threshold"] for t in document["tests"]} == pytest.approx(rates)
    refused = run_cli(["curve", run_dir, "--threshold", "primar"], cwd=tmp_path)
    refused.refused("--threshold", "primar")


def test_curve_tests_against_the_primary_by_default_and_names_each_null(run_dir, tmp_path):
    """Issue 48: without --threshold, `curve` runs the report's test (each system against its primary rate) and says
    so; --threshold overrides. Issue 42: every test names the null it ran, in the JSON and in the text."""
    from multiverse import load_run

    default = json.loads(run_cli(["curve", run_dir, "--json", "--boot", "100"], cwd=tmp_path).ok())
    api = load_run(run_dir).curve(threshold="primary", boot=100).to_dict()
    assert default["tests"] == json.loads(json.dumps(api["tests"])) and len(default["tests"]) == len(default["systems"])
    for test in default["tests"]:
        assert test["null_model"]["name"] == test["resampling"] and "latent case-effect null" in test["resampling"]
    text = run_cli(["curve", run_dir, "--boot", "100"], cwd=tmp_path).ok()
    assert "against each system's rate in the primary universe (the default" in text
    assert text.count("    null: latent case-effect null") == len(default["tests"])
    fixed = json.loads(run_cli(["curve", run_dir, "--json", "--boot", "100", "--threshold", "0.4"], cwd=tmp_path).ok())
    assert {t["threshold"] for t in fixed["tests"]} == {0.4}
    flipped = json.loads(run_cli(["curve", run_dir, "--json", "--boot", "100", "--diff", "atlas", "beacon"],
                                 cwd=tmp_path).ok())
    assert [t["null_model"]["name"][:14] for t in flipped["tests"]] == ["case sign flip"]  # --diff: its own test


def test_figure_formats_follow_the_extension(run_dir, tmp_path):
    for suffix, magic in ((".svg", b"<?xml"), (".pdf", b"%PDF")):
        out = tmp_path / f"v{suffix}"
        assert run_cli(["variance", run_dir, "--figure", out], cwd=tmp_path).returncode == 0
        assert out.read_bytes().startswith(magic)
    bad = run_cli(["variance", run_dir, "--figure", tmp_path / "v.gif"], cwd=tmp_path)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "expected a .png, .svg or .pdf" in bad.stderr


def test_analyses_read_a_bare_table_too(run_dir, tmp_path):
    done = run_cli(["agreement", run_dir / "verdicts.csv", "--axis", "judge", "--json"], cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["axis"] == "judge"


def test_bad_sources_and_axes_exit_2_with_one_line(run_dir, tmp_path):
    for args in (["curve", tmp_path / "missing"], ["ranking", run_dir, "--axis", "nope"], ["agreement", run_dir, "--axis", "nope"]):
        done = run_cli(args, cwd=tmp_path)
        assert done.returncode == 2 and done.stderr.count("\n") == 1 and "Traceback" not in done.stderr


def test_report_import_power_and_store(sim_run, run_dir, tmp_path):
    done = run_cli(["report", run_dir, "--out", tmp_path / "r.html"], cwd=tmp_path)
    assert done.returncode == 0 and (tmp_path / "r.html").stat().st_size > 50_000

    labels = REPO / "analyses" / "data" / "labels.csv"
    done = run_cli(["import", "table", labels, "--system", "model", "--item", "prompt_id", "--label", "verdict",
               "--positive", "pass", "--negative", "fail", "--axis", "grader", "--axis", "standard", "--out", tmp_path / "imported"], cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "4 universes x 4 systems" in done.stdout
    assert json.loads(run_cli(["ranking", tmp_path / "imported", "--json"], cwd=tmp_path).stdout)["universes"] == 4

    done = run_cli(["power", REPO / "specs" / "demo.yaml", "--json"], cwd=tmp_path)
    power = json.loads(done.stdout)
    assert power["comparisons"][0]["n_per_group"] == 36 and 0 < power["comparisons"][0]["detectable_difference"] < 1

    store = sim_run.store
    stats = json.loads(run_cli(["store", "stats", "--store", store, "--json"], cwd=tmp_path).stdout)
    assert stats["entries"] > 0
    gc = json.loads(run_cli(["store", "gc", sim_run.spec, "--store", store, "--dry-run", "--json"], cwd=tmp_path).stdout)
    assert gc["removed"] == 0  # everything in the store belongs to the spec


def test_a_bare_table_tells_axes_from_design_factors(run_dir):
    from multiverse.results._load import load_run

    tables = load_run(run_dir / "verdicts.csv")
    # behavior varies inside each universe: a design factor. (interaction_condition has a
    # single level in this spec, so a bare table cannot tell it from a one-option axis.)
    assert {"judge", "evidence"} <= set(tables.axes) and "behavior" not in tables.axes
    assert "behavior" in tables.factors
    assert tables.verdicts["universe_id"].nunique() == 4


def test_curve_text_names_the_positions_a_tied_primary_shares(tmp_path):
    """Five of six universes at the primary's rate: the text says the range, and its percentile is the range's
    midpoint (issue 25: "13th lowest of 24" beside percentile 62.5)."""
    import itertools

    import pandas as pd

    import multiverse as mv

    rows = [{"judge": j, "prompt": p, "system": "atlas", "case_id": f"c{c}",
             "compliant": c < (2 if (j, p) == ("j2", "terse") else 6)}
            for j, p in itertools.product(["j1", "j2"], ["plain", "strict", "terse"]) for c in range(8)]
    table = tmp_path / "tied.csv"
    pd.DataFrame(rows).to_csv(table, index=False)
    mv.import_table(table, system="system", item="case_id", label="compliant", axes=["judge", "prompt"],
                    out_dir=tmp_path / "imp", primary={"judge": "j1", "prompt": "strict"})
    done = run_cli(["curve", tmp_path / "imp"], cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "2nd–6th lowest of 6 (5 tied), percentile 58" in done.stdout
    summary = json.loads(run_cli(["curve", tmp_path / "imp", "--json"], cwd=tmp_path).stdout)
    primary = summary["systems"]["atlas"]["primary"]
    assert (primary["position_low"], primary["position_high"]) == (2, 6)
    assert primary["percentile"] == pytest.approx(100 * (4 - 0.5) / 6)


def test_agreement_flags_graders_that_compared_against_different_references(tmp_path):
    """Pairwise grading: grader-B compared half the items against another reference output than grader-A.
    The import's design factor carries that, and agreement says the kappa mixes grader and reference."""
    import numpy as np
    import pandas as pd
    from sklearn.metrics import cohen_kappa_score

    rng = np.random.default_rng(7)
    rows = []
    for model in ("atlas", "beacon"):
        for item in range(40):
            truth = rng.random() < 0.6
            for grader in ("grader-A", "grader-B"):
                other = grader == "grader-B" and item % 2 == 0
                label = truth if rng.random() < 0.8 else not truth
                rows.append({"model": model, "item": f"q{item}", "grader": grader, "verdict": int(label),
                             "reference": f"baseline-{item}" + ("-v2" if other else "")})
    table = pd.DataFrame(rows)
    same_reference = table.assign(reference=table["reference"].str.replace("-v2", "", regex=False))
    for name, frame in (("mixed", table), ("same", same_reference)):
        frame.to_csv(tmp_path / f"{name}.csv", index=False)
        run_cli(["import", "table", tmp_path / f"{name}.csv", "--system", "model", "--item", "item", "--label",
                 "verdict", "--axis", "grader", "--factor", "reference", "--out", tmp_path / name], cwd=tmp_path).ok()
    document = json.loads(run_cli(["agreement", tmp_path / "mixed", "--json", "--axis", "grader"], cwd=tmp_path).ok())
    assert document["n_units"] == 80
    assert document["confounded"] == [{"column": "reference", "share": 0.5, "n_units": 40}]
    assert any("'reference'" in n and "(50%)" in n for n in document["notes"])
    wide = table.pivot_table(index=["model", "item"], columns="grader", values="verdict")
    assert document["pairs"][0]["cohen_kappa"] == pytest.approx(cohen_kappa_score(wide["grader-A"], wide["grader-B"]))
    text = run_cli(["agreement", tmp_path / "mixed", "--axis", "grader"], cwd=tmp_path).ok()
    assert "! confounded with reference" in text and "50%" in text
    same = json.loads(run_cli(["agreement", tmp_path / "same", "--json", "--axis", "grader"], cwd=tmp_path).ok())
    assert same["confounded"] == [] and same["pairs"][0]["cohen_kappa"] == document["pairs"][0]["cohen_kappa"]
    assert "confounded" not in run_cli(["agreement", tmp_path / "same", "--axis", "grader"], cwd=tmp_path).ok()
