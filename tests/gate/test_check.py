"""``multiverse check`` and ``mv.check``: a claims file decided on a run, its exit code, table and JUnit XML."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml
from cli_runner import run_cli
from junit_shape import junit_cases

import multiverse as mv
from multiverse.errors import SpecError


def _claims(folder: Path, *claims: dict, name: str = "claims.yaml", **top) -> Path:
    path = folder / name
    path.write_text(yaml.safe_dump({**top, "claims": list(claims)}, sort_keys=False), encoding="utf-8")
    return path


# Claims on the session's tiny run (2 systems, 4 universes, 6 cases): enough cases to break a bound
# by far, not to show one held.
FAILING = {"id": "ceiling", "system": "atlas", "rate": {"at_most": 0.02}, "in": "all"}
OPEN = {"id": "order", "better": "atlas", "worse": "beacon", "in": {"share": 0.5}}


def test_a_failed_claim_exits_1_and_is_a_junit_failure(sim_run, tmp_path):
    claims = _claims(tmp_path, FAILING, OPEN)
    done = run_cli(["check", sim_run.out, "--claims", claims, "--junit", tmp_path / "out.xml"])
    assert done.returncode == 1, done.stderr
    assert "FAILED" in done.stdout and "gate: not passed" in done.stdout
    cases = junit_cases(tmp_path / "out.xml")
    assert cases["ceiling"].find("failure").get("type") == "failed"
    assert cases["order"].find("failure").get("type") == "undecided"


def test_an_undecided_claim_passes_only_under_the_rule_its_file_wrote(sim_run, tmp_path):
    claims = _claims(tmp_path, OPEN)
    done = run_cli(["check", sim_run.out, "--claims", claims])
    assert done.returncode == 1 and "UNDECIDED" in done.stdout
    # The rule is the file's, written before the run: the flag that passed undecided claims is refused.
    done = run_cli(["check", sim_run.out, "--claims", claims, "--allow-undecided", "--junit", tmp_path / "o.xml"])
    assert done.returncode == 2 and "rule: not_refuted" in done.stderr and not (tmp_path / "o.xml").exists()
    lenient = _claims(tmp_path, {**OPEN, "rule": "not_refuted"}, name="lenient.yaml")
    done = run_cli(["check", sim_run.out, "--claims", lenient, "--junit", tmp_path / "o.xml"])
    assert done.returncode == 0, done.stdout + done.stderr
    assert "NOT REFUTED" in done.stdout and "HELD" not in done.stdout and "gate: passed" in done.stdout
    order = junit_cases(tmp_path / "o.xml")["order"]
    assert order.find("failure") is None and order.find("skipped") is None
    # The file's rule is each claim's unless a claim says its own.
    mixed = _claims(tmp_path, OPEN, FAILING, name="mixed.yaml", rule="not_refuted")
    result = mv.check(mv.load_run(sim_run.out), mixed)
    assert [o.status for o in result.outcomes] == ["not_refuted", "failed"] and not result.passed()


def test_json_reports_each_claim_with_its_evidence(sim_run, tmp_path):
    done = run_cli(["check", sim_run.out, "--claims", _claims(tmp_path, FAILING, OPEN), "--json"])
    assert done.returncode == 1
    document = json.loads(done.stdout)
    by_id = {c["id"]: c for c in document["claims"]}
    ceiling = by_id["ceiling"]
    assert ceiling["status"] == "failed" and ceiling["p_fail"] <= 0.05
    assert ceiling["universes"] == ceiling["needed"] == 4
    assert 0 <= ceiling["estimate"]["low"] <= ceiling["estimate"]["high"] <= 1
    assert ceiling["worst_universe"]["universe_id"] in set(mv.load_run(sim_run.out).universes["universe_id"])
    assert by_id["order"]["status"] == "undecided" and by_id["order"]["needed"] == 2
    assert document["passed"] is False
    assert document["counts"] == {"held": 0, "failed": 1, "undecided": 1, "not_refuted": 0}
    assert by_id["order"]["rule"] == "shown" and by_id["order"]["detectable"]["power"] == 0.8


@pytest.mark.parametrize(("claim", "field"), [
    ({"id": "ghost", "system": "zephyr", "rate": {"at_least": 0.5}, "in": "all"}, "claim ghost: system"),
    ({"id": "w", "system": "atlas", "rate": {"at_least": 0.5}, "in": "all", "where": {"grader": "x"}},
     "claim w: where.grader"),
    ({"id": "o", "system": "atlas", "rate": {"at_least": 0.5}, "in": "all", "where": {"judge": "judge_z"}},
     "claim o: where.judge"),
    ({"id": "b", "system": "atlas", "rate": {"at_least": 1.5}, "in": "all"}, "claim b: rate.at_least"),
    ({"id": "q", "system": "atlas", "rate": {"at_least": 0.5}, "in": "most"}, "claim q: in"),
    ({"id": "r", "system": "atlas", "rank": 2, "in": "all"}, "claim r: rank"),
    ({"id": "two", "better": "atlas", "worse": "atlas", "in": "all"}, "claim two"),
    ({"id": "s", "system": "atlas", "in": "all"}, "claim s (line "),
])
def test_a_claim_naming_what_the_run_lacks_is_refused_in_one_line(sim_run, tmp_path, claim, field):
    claims = _claims(tmp_path, {"id": "fine", "system": "atlas", "rate": {"at_least": 0.5}, "in": "all"}, claim)
    done = run_cli(["check", sim_run.out, "--claims", claims, "--junit", tmp_path / "out.xml"])
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {claims}: {field}"), lines
    assert not (tmp_path / "out.xml").exists()  # refused before anything was computed or written


def test_a_claims_file_is_refused_before_the_run_is_read(tmp_path):
    claims = _claims(tmp_path, {"id": "dup", "system": "a", "rate": {"at_least": 0.5}, "in": "all"},
                     {"id": "dup", "system": "a", "rate": {"at_most": 0.5}, "in": "all"})
    # The run does not exist: the claims file's own problem is what is reported.
    done = run_cli(["check", tmp_path / "no-such-run", "--claims", claims])
    assert done.returncode == 2 and "expected each claim's id once" in done.stderr


def test_mv_check_takes_a_mapping_and_says_what_it_decided(sim_run):
    result = mv.check(mv.load_run(sim_run.out), {"claims": [FAILING]})
    (outcome,) = result.outcomes
    assert outcome.status == "failed" and not result.passed()
    assert outcome.claim.statement == "rate(atlas) <= 0.02 in every universe"
    with pytest.raises(SpecError, match="claim x: candidate: expected one of the systems"):
        mv.check(mv.load_run(sim_run.out), {"claims": [
            {"id": "x", "candidate": "atlas-v2", "baseline": "atlas", "margin": 0.02, "in": "primary"}]})


def test_a_primary_claim_needs_a_primary_and_where_narrows_the_universes(sim_run):
    results = mv.load_run(sim_run.out)
    narrowed = mv.check(results, {"claims": [{**FAILING, "where": {"judge": "judge_a"}}]}).outcomes[0]
    assert narrowed.n_universes == 2
    primary = mv.check(results, {"claims": [{**FAILING, "in": "primary"}]}).outcomes[0]
    assert primary.n_universes == 1 and primary.worst["universe_id"] == results.primary


def test_a_claim_on_the_primary_of_results_without_one_is_refused(verdicts):
    results = mv.Results(verdicts, axes=["judge", "evidence", "scoring"])
    with pytest.raises(SpecError, match="claim p: in: expected a primary universe"):
        mv.check(results, {"claims": [{"id": "p", "system": "A", "rate": {"at_least": 0.5}, "in": "primary"}]})
    # The same claim over every universe is decided: the synthetic A sits near 0.55, far from 0.02.
    outcome = mv.check(results, {"claims": [{"id": "p", "system": "A", "rate": {"at_least": 0.02}, "in": "all"}]})
    assert outcome.outcomes[0].status == "held" and outcome.outcomes[0].n_universes == 8


def test_a_claim_decided_on_a_sample_of_a_grid_says_so(sim_run, tmp_path):
    document = yaml.safe_load(sim_run.spec.read_text(encoding="utf-8"))
    document["sample"] = {"n": 2, "seed": 1}
    spec = tmp_path / "sampled.yaml"
    spec.write_text(yaml.safe_dump(document, sort_keys=False), encoding="utf-8")
    shutil.copytree(sim_run.store, tmp_path / "store")
    run_cli(["run", spec, "--out", tmp_path / "run", "--store", tmp_path / "store", "--quiet"], cwd=tmp_path).ok()
    done = run_cli(["check", tmp_path / "run", "--claims", _claims(tmp_path, FAILING)])
    assert done.returncode == 1
    assert "note: decided on a random sample of 2 universes of a grid of up to 4" in done.stdout
    assert "not of the whole grid" in done.stdout


def test_options_that_no_universe_combines_are_refused_before_any_claim_is_decided(verdicts):
    kept = verdicts[~((verdicts["judge"] == "j1") & (verdicts["evidence"] == "strict"))]
    results = mv.Results(kept, axes=["judge", "evidence", "scoring"])
    claims = {"claims": [{"id": "fine", "system": "A", "rate": {"at_least": 0.02}, "in": "all"},
                         {"id": "none", "system": "A", "rate": {"at_least": 0.02}, "in": "all",
                          "where": {"judge": "j1", "evidence": "strict"}}]}
    with pytest.raises(SpecError, match="claim none: where: expected at least one universe with these options"):
        mv.check(results, claims)


def test_the_commands_json_is_the_api_documents(sim_run, tmp_path):
    claims = _claims(tmp_path, FAILING, OPEN, {**OPEN, "id": "lenient", "rule": "not_refuted"},
                     {"id": "nr", "candidate": "atlas", "baseline": "beacon", "margin": 0.1, "in": "primary"})
    done = run_cli(["check", sim_run.out, "--claims", claims, "--json"])
    document = json.loads(done.stdout)
    result = mv.check(sim_run.out, claims)
    assert document.pop("passed") is result.passed() is False
    assert document == json.loads(json.dumps(result.to_dict()))
    # Each warning is also a line of the command's stderr.
    assert [ln.removeprefix("warning: ") for ln in done.stderr.splitlines()] == list(result.warnings)
