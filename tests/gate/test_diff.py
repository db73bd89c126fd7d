"""``multiverse diff`` and ``mv.diff``: one run against another, paired by universe options and case."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
import yaml
from cli_runner import run_cli
from conftest import sim_run_document, tiny_spec_document

import multiverse as mv
from multiverse.errors import InputError
from multiverse.plots._stamp import is_stamped


@pytest.fixture(scope="module")
def changed_run(sim_run, tmp_path_factory):
    """The session's run with one system's prompt changed, on a copy of its store (only that system reruns)."""
    root = tmp_path_factory.mktemp("changed")
    shutil.copytree(sim_run.store, root / "store")
    document = sim_run_document()
    document["systems"][0]["system_prompt"] = "You are Atlas. Answer fast and sound sure."
    spec = root / "tiny.yaml"
    spec.write_text(yaml.safe_dump(document, sort_keys=False), encoding="utf-8")
    run_cli(["run", spec, "--out", root / "run", "--store", root / "store", "--quiet"], cwd=root).ok()
    return root / "run"


def test_a_run_against_itself_differs_nowhere(sim_run, tmp_path):
    done = run_cli(["diff", sim_run.out, sim_run.out, "--json"])
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    assert {u["difference"] for u in document["universes"]} == {0.0}
    assert all(not t["worse"] and t["p_worse"] == 1.0 for t in document["tests"])
    assert all(s["below_0"] == s["above_0"] == 0 for s in document["systems"])
    assert not any(document["mismatch"].values()) and document["notes"] == []
    assert len(document["universes"]) == 4 * 2  # every universe x system compared


def test_a_changed_prompt_shows_in_that_system_only(sim_run, changed_run, tmp_path):
    result = mv.diff(sim_run.out, changed_run)
    by_system = {s: part["difference"].to_numpy() for s, part in result.frame.groupby("system")}
    assert np.any(by_system["atlas"] != 0), "atlas's prompt changed: its rates should move somewhere"
    assert np.all(by_system["beacon"] == 0), "beacon's work was reused from the store: no change"
    # The paired interval is clustered by case and contains the difference.
    frame = result.frame
    assert (frame["ci_low"] <= frame["difference"]).all() and (frame["difference"] <= frame["ci_high"]).all()
    done = run_cli(["diff", sim_run.out, changed_run, "--figure", tmp_path / "diff.png"])
    assert done.returncode == 0 and (tmp_path / "diff.png").stat().st_size > 10_000
    assert "atlas" in done.stdout and "beacon" in done.stdout
    assert is_stamped(result.figure())  # a simulated comparison says so on its figure


def test_universes_and_cases_in_one_run_only_are_counted_not_dropped_silently(sim_run):
    base = mv.load_run(sim_run.out)
    v = base.verdicts
    one_universe = v["universe_id"].iloc[0]
    one_case = sorted(v["case_id"].unique())[0]
    smaller = mv.Results(v[(v["universe_id"] != one_universe) & (v["case_id"] != one_case)], axes=base.axes,
                         manifest=base.manifest.model_copy(update={"primary": None}))
    result = mv.diff(base, smaller)
    assert result.mismatch["universes_only_in_baseline"] == 1 and result.mismatch["cases_only_in_baseline"] == 1
    assert result.mismatch["universes_only_in_candidate"] == 0
    assert any("universes in one run only" in n for n in result.notes)
    assert any("cases in one run only" in n for n in result.notes)
    assert result.frame["universe_id"].nunique() == 3


def test_runs_of_different_designs_are_refused(sim_run):
    base = mv.load_run(sim_run.out)
    other = mv.Results(base.verdicts.assign(judge="judge_c"), axes=base.axes)
    with pytest.raises(InputError, match="none of its 2 matches the baseline's 4"):
        mv.diff(base, other)


def test_the_report_of_the_candidate_opens_its_comparison_with_the_baseline(sim_run, changed_run, tmp_path):
    done = run_cli(["report", changed_run, "--baseline", sim_run.out, "--out", tmp_path / "report.html",
                    "--no-tests", "--quiet"])
    assert done.returncode == 0, done.stderr
    page = (tmp_path / "report.html").read_text(encoding="utf-8")
    section = page[page.index('<section id="comparison">'):]
    section = section[:section.index("</section>")]
    assert "Compared with the baseline" in section and "data:image/png;base64," in section
    assert section.count("<tr>") == 1 + 2  # header and one row per system
    assert 'href="#comparison"' in page  # reachable from the page's contents


def test_a_report_against_a_baseline_of_another_design_is_refused_before_it_is_written(sim_run, tmp_path):
    other = tmp_path / "other.csv"
    v = mv.load_run(sim_run.out).verdicts
    v.assign(judge="judge_c").drop(columns=["universe_id"]).to_csv(other, index=False)
    done = run_cli(["report", sim_run.out, "--baseline", other, "--out", tmp_path / "r.html", "--no-tests"])
    assert done.returncode == 2 and "none of its" in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "r.html").exists()


ORDINAL = {"type": "ordinal", "min": 1, "max": 10, "anchors": {"1": "misleads throughout", "10": "faithful throughout"}}


@pytest.fixture(scope="module")
def scored_runs(tmp_path_factory):
    """A scored run (1-10 judge; the mean score and the share of 7 or more as two universes) and the same
    design with atlas's prompt changed, on a copy of its store."""
    root = tmp_path_factory.mktemp("scored")
    folders = []
    for name, prompt in (("base", "You are Atlas."), ("changed", "You are Atlas. Answer fast and sound sure.")):
        document = tiny_spec_document(name="scored")
        document["systems"][0]["system_prompt"] = prompt
        document["judge"] = {"model": "sim/judge-a", "evidence_standard": "strict", "scale": ORDINAL}
        document["scoring"] = {"estimator": "mean", "cut": 7}
        document["axes"] = {"estimator": {"mean": {"scoring.estimator": "mean"},
                                          "share_7": {"scoring.estimator": "at_least"}}}
        spec = root / f"{name}.yaml"
        spec.write_text(yaml.safe_dump(document, sort_keys=False), encoding="utf-8")
        run_cli(["run", spec, "--out", root / name, "--store", root / "store", "--quiet"], cwd=root).ok()
        folders.append(root / name)
    return folders


def test_diff_of_a_scored_run_counts_each_rows_contribution_as_its_rates_do(scored_runs):
    base, changed = (mv.load_run(f) for f in scored_runs)
    itself = mv.diff(base, base)
    # Every universe x system compared (a mean-of-scores row has no pass/fail label, and still counts).
    assert len(itself.frame) == len(base.universes) * len(base.systems) == 4
    assert (itself.frame["difference"] == 0).all() and not itself.worse
    # The baseline's rate in the comparison is the run's own rate of that universe and system: the mean
    # score rescaled to [0, 1] in one universe, the share of 7 or more in the other.
    rates = base.rate_table()
    overall = rates[rates["subgroup"] == "all"]
    expected = overall.set_index(["universe_id", "system"])["rate"]
    got = itself.frame.set_index(["universe_id", "system"])["rate_baseline"]
    assert np.allclose(got.sort_index().to_numpy(), expected.loc[got.sort_index().index].to_numpy())
    assert got.nunique() > 2  # means, not 0/1 labels
    # On as many cases as the run's own rates count: the analyses' counted rows (every scored row), one home.
    counted = overall.set_index(["universe_id", "system"])["n"]
    cases = itself.frame.set_index(["universe_id", "system"])["n_cases"].sort_index()
    assert (cases.to_numpy() == counted.loc[cases.index].to_numpy()).all() and (cases > 0).all()
    moved = mv.diff(base, changed)
    by_system = {s: part["difference"].to_numpy() for s, part in moved.frame.groupby("system")}
    assert np.any(by_system["atlas"] != 0) and np.all(by_system["beacon"] == 0)
    done = run_cli(["diff", scored_runs[0], scored_runs[1], "--json"])
    assert done.returncode == 0, done.stderr
    assert len(json.loads(done.stdout)["universes"]) == 4
