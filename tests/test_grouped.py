"""Grouped analyses (``by=``, ``--by FACTOR``): each group's figure is the ungrouped analysis of that group's rows."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from cli_runner import run_cli
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import multiverse as mv
from multiverse.analysis import CONTRIBUTION, OPPONENT
from multiverse.errors import InputError
from multiverse.results import BradleyTerryDocument
from multiverse.tables._tables import write_json, write_table


def table(seed: int, n_cases: int, n_subsets: int, systems: tuple[str, ...] = ("atlas", "beacon", "comet")) -> pd.DataFrame:
    """Two judges x systems x cases, each case in one subset (a design factor), judges agreeing 80% of the time."""
    rng = np.random.default_rng(seed)
    rows = []
    for system in systems:
        rate = rng.uniform(0.3, 0.9)
        for case in range(n_cases):
            truth = bool(rng.random() < rate)
            for judge in ("j1", "j2"):
                said = truth if rng.random() < 0.8 else not truth
                rows.append({"judge": judge, "system": system, "case_id": f"c{case:03d}",
                             "subset": f"s{case % n_subsets}", "replicate": 0, "status": "ok", "compliant": said})
    verdicts = pd.DataFrame(rows)
    verdicts["universe_id"] = "u-" + verdicts["judge"]
    return verdicts


def same(a: dict, b: dict) -> None:
    assert json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 1000), n_subsets=st.integers(1, 3), by=st.sampled_from(["subset", "system"]))
def test_grouped_agreement_is_the_agreement_of_each_groups_rows(seed, n_subsets, by):
    verdicts = table(seed, 24, n_subsets)
    results = mv.Results(verdicts, axes=["judge"], factors=["subset"], primary="u-j1")
    grouped = results.agreement("judge", by=by)
    document = grouped.to_dict()
    values = list(dict.fromkeys(verdicts[by]))
    assert document["by"] == by and [g["group"] for g in document["groups"]] == values
    for group in document["groups"]:
        rows = verdicts[verdicts[by] == group["group"]].reset_index(drop=True)
        alone = mv.Results(rows, axes=["judge"], factors=["subset"], primary="u-j1").agreement("judge")
        same(group["document"], alone.to_dict())
    # One table: the group a column, first, every group's pairs stacked.
    assert grouped.frame.columns[0] == by and len(grouped.frame) == len(values)
    assert grouped.document.groups[0].document.pairs[0].n == document["groups"][0]["document"]["pairs"][0]["n"]


@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 1000), by=st.sampled_from(["subset", "judge"]))
def test_grouped_ranking_is_the_ranking_of_each_groups_rows(seed, by):
    verdicts = table(seed, 18, 2)
    results = mv.Results(verdicts, axes=["judge"], factors=["subset"], primary="u-j1")
    document = results.ranking(boot=20, by=by).to_dict()
    for group in document["groups"]:
        rows = verdicts[verdicts[by] == group["group"]].reset_index(drop=True)
        alone = mv.Results(rows, axes=["judge"], factors=["subset"], primary="u-j1").ranking(boot=20)
        same(group["document"], alone.to_dict())


def test_unknown_or_meaningless_groups_are_refused_in_one_line():
    results = mv.Results(table(1, 12, 2), axes=["judge"], factors=["subset"])
    for call, fragment in ((lambda: results.agreement("judge", by="colour"), "by colour: expected an axis"),
                           (lambda: results.agreement("judge", by="judge"), "by judge: the options compared"),
                           (lambda: results.ranking(by="system"), "by system: a ranking compares systems")):
        with pytest.raises(InputError, match=fragment) as refused:
            call()
        assert "\n" not in str(refused.value)


def pairwise_run(tmp_path, seed: int = 3):
    """A folder of pairwise games (opponent column), two judges, each game in one subset."""
    rng = np.random.default_rng(seed)
    strength = {"atlas": 0.8, "beacon": 0.0, "comet": -0.6}
    rows = []
    for judge, lean in (("j1", 0.0), ("j2", 0.4)):
        for case in range(60):
            for a, b in (("atlas", "beacon"), ("beacon", "comet"), ("atlas", "comet")):
                p = 1 / (1 + np.exp(strength[b] - strength[a] - lean * (b == "comet")))
                y = 0.5 if rng.random() < 0.1 else float(rng.random() < p)
                rows.append({"universe_id": f"u-{judge}", "judge": judge, "system": a, OPPONENT: b,
                             "case_id": f"c{case:03d}", "subset": f"s{case % 2}", "status": "ok",
                             "compliant": y >= 0.5, CONTRIBUTION: y})
    folder = tmp_path / "games"
    folder.mkdir()
    # As a pairwise import keeps them: the preference in ``score``, on a pairwise scale with a reference.
    frame = pd.DataFrame(rows)
    write_table(frame.drop(columns=[CONTRIBUTION]).assign(score=frame[CONTRIBUTION]), folder, "verdicts")
    write_json({"schema_version": 1, "axes": ["judge"], "factors": ["subset"], "primary": "u-j1",
                "scale": {"type": "pairwise", "min": 0.0, "max": 1.0, "anchors": {}, "reference": "beacon"},
                "reference": "beacon",
                # Each universe reads its scores as a win rate (a tie half a win), as an import records it.
                "universes": [{"id": f"u-{judge}", "label": f"judge={judge}", "options": {"judge": judge},
                               "primary": judge == "j1", "scoring": {"estimator": "win_rate"}} for judge in ("j1", "j2")]},
               folder / "manifest.json")
    return folder, frame


def test_cli_ranking_by_bt_and_by_subset_as_a_user_runs_them(tmp_path):
    folder, rows = pairwise_run(tmp_path)
    code, out, err = run_cli(["ranking", folder, "--method", "bt", "--boot", "50", "--json"])
    assert code == 0, err
    document = BradleyTerryDocument.model_validate(json.loads(out))
    # The reference is the anchor by default; the games are the rows' own (their opponent column).
    assert document.anchor == "beacon" and len(document.scores) == 6
    assert {s.system for s in document.scores if s.score == 0.0} == {"beacon"}
    assert document.stability.p_top["atlas"] == 1.0
    expected = mv.load_run(folder).ranking(method="bt", boot=50).to_dict()
    assert json.loads(out)["scores"] == expected["scores"]
    j1 = rows[rows["judge"] == "j1"]
    atlas = next(s for s in document.scores if s.universe_id == "u-j1" and s.system == "atlas")
    shares = j1[(j1["system"] == "atlas") & (j1[OPPONENT] == "beacon")][CONTRIBUTION]
    assert 0 < atlas.score and atlas.wins >= shares.sum() and atlas.games == 120
    # As text, a universe is named by its label, the primary starred, as every other table names it; never by id.
    code, out, err = run_cli(["ranking", folder, "--method", "bt", "--boot", "0"])
    assert code == 0, err
    named = [line.split("  ")[0] for line in out.splitlines() if line.startswith(("* judge=", "judge="))]
    assert sorted(set(named)) == ["* judge=j1", "judge=j2"] and len(named) == 6, out
    assert "u-j1" not in out and "u-j2" not in out
    code, out, err = run_cli(["ranking", folder, "--method", "bt", "--boot", "50", "--by", "subset"])
    assert code == 0, err
    assert out.splitlines()[1].split()[:3] == ["subset", "universe", "system"]
    assert sum(line.startswith(("s0 ", "s1 ")) for line in out.splitlines()) == 2 * 6 + 2 * 3
    code, out, err = run_cli(["agreement", folder, "--by", "subset"])
    assert code == 0, err
    assert "agreement across judge per subset" in out
    code, out, err = run_cli(["ranking", folder, "--by", "colour"])
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1 and "by colour" in err
