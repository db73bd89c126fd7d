"""An axis over the judge's scale: each universe's scores are read on its own scale (issue 42).

Every universe used to be rescaled on the base spec's scale: a 1-5 universe
of a 1-10 spec got (mean - 1) / 9, and a 1-10 universe of a 1-5 spec rates
above 1. Here each rate of a run, and of the same folder loaded again, is
recomputed from scratch from the verdicts with the universe's own scale, both
ways round; a scale axis beside an estimator axis takes no variance of its
own when the judge's view does not change with the scale; and what cannot be
read on one scale is refused in one line.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from cli_runner import run_cli
from conftest import tiny_spec_document

from multiverse import load_run
from multiverse.engine import run
from multiverse.errors import InputError, SpecError
from multiverse.spec import expand, load_spec

ROOT = Path(__file__).resolve().parents[1]


def _world(tmp_path: Path) -> str:
    """The built-in world with a judge whose score is the transcript's quality exactly (no noise)."""
    world = yaml.safe_load((ROOT / "multiverse" / "sim" / "worlds" / "deception.yaml").read_text(encoding="utf-8"))
    world["models"]["judge-exact"] = {"kind": "judge", "failure": 0.0, "scores": {"noise": 0.0}}
    (tmp_path / "world.yaml").write_text(yaml.safe_dump(world, sort_keys=False), encoding="utf-8")
    return "world.yaml"


def _spec(tmp_path: Path, scale: dict, axes: dict, *, scoring: dict | None = None, judge: str = "sim/judge-a",
          world: str = "deception") -> Path:
    document = tiny_spec_document(world=world)
    document["design"]["cases_per_cell"] = 3
    document["judge"] = {"model": judge, "evidence_standard": "strict", "scale": scale}
    document["scoring"] = scoring or {"estimator": "mean"}
    document["axes"] = axes
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


def _own_scales(spec_path: Path) -> dict[str, tuple[float, float, str, float | None]]:
    """Each universe's (min, max, estimator, cut) as its own resolved spec has them."""
    spec = load_spec(spec_path)
    return {u.id: (u.spec.judge.scale.min, u.spec.judge.scale.max, u.spec.scoring.estimator, u.spec.scoring.cut)
            for u in expand(spec)}


def _from_scratch(verdicts: pd.DataFrame, scales: dict) -> pd.DataFrame:
    """Rate and native mean per universe x system, from the ok verdicts' scores and each universe's own scale."""
    rows = []
    ok = verdicts[verdicts["status"].astype(str) == "ok"]
    for (universe, system), group in ok.groupby([ok["universe_id"].astype(str), ok["system"].astype(str)]):
        low, high, estimator, cut = scales[universe]
        score = group["score"].to_numpy(dtype=float)
        if estimator == "mean":
            rate, mean = float(np.mean((score - low) / (high - low))), float(np.mean(score))
        else:
            rate, mean = float(np.mean(score >= cut)), np.nan
        rows.append({"universe_id": universe, "system": system, "n": len(score), "rate": rate, "mean": mean})
    return pd.DataFrame(rows).set_index(["universe_id", "system"]).sort_index()


def _overall(rates: pd.DataFrame) -> pd.DataFrame:
    rates = rates[rates["subgroup"] == "all"]
    out = rates.assign(universe_id=rates["universe_id"].astype(str), system=rates["system"].astype(str))
    return out.set_index(["universe_id", "system"]).sort_index()


def _check_rates(out: Path, scales: dict) -> None:
    verdicts = pd.read_parquet(out / "verdicts.parquet")
    expected = _from_scratch(verdicts, scales)
    written = _overall(pd.read_parquet(out / "rates.parquet"))
    loaded = load_run(out)
    for rates in (written, _overall(loaded.rate_table())):
        assert rates.index.tolist() == expected.index.tolist()
        np.testing.assert_allclose(rates["rate"], expected["rate"], rtol=0, atol=1e-12)
        np.testing.assert_allclose(rates["mean"], expected["mean"], rtol=0, atol=1e-12)
        assert ((rates["ci_low"] <= rates["rate"]) & (rates["rate"] <= rates["ci_high"])).all()
        assert ((rates["ci_low"] >= 0) & (rates["ci_high"] <= 1)).all()
    # The curve and the system rates read the verdicts' contributions, not the rates file.
    curve = loaded.curve_frame().assign(universe_id=lambda f: f["universe_id"].astype(str),
                                        system=lambda f: f["system"].astype(str))
    curve = curve.set_index(["universe_id", "system"]).sort_index()
    np.testing.assert_allclose(curve["rate"], expected["rate"], rtol=0, atol=1e-12)
    system_rates = loaded.system_rates().assign(universe_id=lambda f: f["universe_id"].astype(str),
                                                system=lambda f: f["system"].astype(str))
    np.testing.assert_allclose(system_rates.set_index(["universe_id", "system"]).sort_index()["rate"],
                               expected["rate"], rtol=0, atol=1e-12)
    # Recounted from the verdicts alone (no rates file), the folder gives the same rates.
    again = out.parent / (out.name + "-recounted")
    shutil.copytree(out, again, ignore=shutil.ignore_patterns(".index", "rates.*"))
    recounted = _overall(load_run(again).rate_table())
    np.testing.assert_allclose(recounted["rate"], expected["rate"], rtol=0, atol=1e-12)


@pytest.mark.parametrize(("base", "other"), [(10, 5), (5, 10)])
def test_each_universe_of_an_axis_over_the_scale_gets_the_rate_of_its_own_scale(tmp_path, base, other):
    axes = {"scale": {f"to{base}": {"judge.scale.max": base}, f"to{other}": {"judge.scale.max": other}}}
    spec_path = _spec(tmp_path, {"type": "ordinal", "min": 1, "max": base}, axes)
    assert run_cli(["validate", spec_path]).returncode == 0
    run(load_spec(spec_path), out=tmp_path / "run", store=tmp_path / "store", progress=False)
    scales = _own_scales(spec_path)
    assert sorted(high for _, high, _, _ in scales.values()) == sorted([base, other])
    _check_rates(tmp_path / "run", scales)
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    own = {u["id"]: u.get("scale") for u in manifest["universes"]}
    assert [s["max"] for s in own.values() if s is not None] == [other]  # the base universe needs no entry


def test_a_scale_axis_beside_an_estimator_axis_takes_no_variance_when_the_view_does_not_change(tmp_path):
    # The judge scores each transcript's quality exactly: on 0..1 and on 0..100 it says the same thing.
    axes = {
        "scale": {"unit": {}, "percent": {"judge.scale.max": 100, "scoring.cut": 50}},
        "estimator": {"mean": {}, "share": {"scoring.estimator": "at_least"}},
    }
    spec_path = _spec(tmp_path, {"type": "continuous", "min": 0, "max": 1}, axes,
                      scoring={"estimator": "mean", "cut": 0.5}, judge="sim/judge-exact", world=_world(tmp_path))
    assert run_cli(["validate", spec_path]).returncode == 0
    run(load_spec(spec_path), out=tmp_path / "run", store=tmp_path / "store", progress=False)
    scales = _own_scales(spec_path)
    _check_rates(tmp_path / "run", scales)
    results = load_run(tmp_path / "run")
    rates = results.system_rates().assign(universe_id=lambda f: f["universe_id"].astype(str))
    # The universes that differ only in their scale have the same rate, to the judge's 4 decimals.
    by = rates.pivot_table(index=["estimator", "system"], columns="scale", values="rate")
    np.testing.assert_allclose(by["unit"], by["percent"], atol=1e-3)
    assert (rates.groupby("estimator")["rate"].nunique() > 0).all()
    terms = results.variance().source["terms"]
    # The scale, alone and with the systems, explains nothing: the estimator and the systems explain it all.
    assert sum(t["share"] for t in terms if t.get("axis") == "scale") < 0.01, terms
    assert sum(t["share"] for t in terms if t.get("axis") == "estimator") > 0.1, terms


def test_a_cut_off_the_universes_own_scale_is_refused_at_validate(tmp_path):
    axes = {"scale": {"ten": {}, "five": {"judge.scale.max": 5}}}
    spec_path = _spec(tmp_path, {"type": "ordinal", "min": 1, "max": 10}, axes,
                      scoring={"estimator": "at_least", "cut": 7})
    code, _, err = run_cli(["validate", spec_path])
    assert code == 2 and "axes.scale.five" in err and "scoring.cut" in err and "from 1 to 5" in err
    assert len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("patch", [
    {"judge.scale": {"type": "pairwise", "min": 0, "max": 1, "reference": "atlas"}, "scoring.estimator": "win_rate"},
])
def test_an_axis_turning_the_scale_pairwise_is_refused_at_validate(tmp_path, patch):
    spec_path = _spec(tmp_path, {"type": "ordinal", "min": 1, "max": 10}, {"kind": {"scores": {}, "pairs": patch}})
    with pytest.raises(SpecError, match="pairwise"):
        load_spec(spec_path)
    code, _, err = run_cli(["validate", spec_path])
    assert code == 2 and "axes.kind.pairs" in err and len(err.strip().splitlines()) == 1


def test_an_axis_from_labels_to_scores_counts_each_universe_its_own_way(tmp_path):
    document = tiny_spec_document()
    document["design"]["cases_per_cell"] = 3
    document["axes"] = {"kind": {"labels": {}, "scores": {"judge.scale": {"type": "ordinal", "min": 1, "max": 5},
                                                          "scoring.estimator": "mean"}}}
    spec_path = tmp_path / "spec.yaml"
    spec_path.write_text(yaml.safe_dump(document, sort_keys=False))
    run(load_spec(spec_path), out=tmp_path / "run", store=tmp_path / "store", progress=False)
    loaded = load_run(tmp_path / "run")
    rates = _overall(loaded.rate_table())
    verdicts = loaded.verdicts[loaded.verdicts["status"].astype(str) == "ok"]
    for (universe, system), row in rates.iterrows():
        mine = verdicts[(verdicts["universe_id"] == universe) & (verdicts["system"].astype(str) == system)]
        if row["estimator"] == "mean":
            assert row["rate"] == pytest.approx(float(np.mean((mine["score"] - 1) / 4)), abs=1e-12)
        else:
            assert row["rate"] == pytest.approx(float(mine["compliant"].astype(bool).mean()), abs=1e-12)


def test_a_score_off_its_universes_own_scale_is_refused_on_load(tmp_path):
    axes = {"scale": {"ten": {}, "five": {"judge.scale.max": 5}}}
    spec_path = _spec(tmp_path, {"type": "ordinal", "min": 1, "max": 10}, axes)
    run(load_spec(spec_path), out=tmp_path / "run", store=tmp_path / "store", progress=False)
    verdicts = pd.read_parquet(tmp_path / "run" / "verdicts.parquet")
    five = next(u for u, (_, high, _, _) in _own_scales(spec_path).items() if high == 5)
    # A 9 is a fine score on the base scale, and none on the universe's own 1..5.
    at = np.flatnonzero((verdicts["universe_id"] == five).to_numpy() & verdicts["score"].notna().to_numpy())[0]
    verdicts.loc[at, "score"] = 9.0
    verdicts.to_parquet(tmp_path / "run" / "verdicts.parquet", index=False)
    (tmp_path / "run" / "verdicts.csv").unlink()
    with pytest.raises(InputError) as refused:
        load_run(tmp_path / "run")
    message = str(refused.value)
    assert "\n" not in message and f"universe {five}" in message and "from 1 to 5" in message and "got 9" in message


def test_a_folder_written_before_universes_recorded_their_own_scale_is_refused(tmp_path):
    # Its rates file read every universe on the base scale: it is refused, never shown as if right.
    axes = {"scale": {"ten": {}, "five": {"judge.scale.max": 5}}}
    spec_path = _spec(tmp_path, {"type": "ordinal", "min": 1, "max": 10}, axes)
    run(load_spec(spec_path), out=tmp_path / "run", store=tmp_path / "store", progress=False)
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    for universe in manifest["universes"]:
        universe.pop("scale", None)
    (tmp_path / "run" / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(InputError) as refused:
        load_run(tmp_path / "run")
    message = str(refused.value)
    assert "\n" not in message and "manifest.json" in message and "does not record" in message
    code, _, err = run_cli(["curve", tmp_path / "run"])
    assert code == 2 and "judge.scale" in err


def test_calibrate_refuses_human_scores_for_universes_on_different_scales(tmp_path):
    # People score a transcript once, on one scale: a run whose universes read 1-5 and 1-10 cannot be anchored by
    # one column of human scores, and reading it on the base spec's scale would anchor the 1-10 universe wrongly.
    axes = {"scale": {"to5": {}, "to10": {"judge.scale.max": 10}}}
    spec_path = _spec(tmp_path, {"type": "ordinal", "min": 1, "max": 5}, axes)
    run(load_spec(spec_path), out=tmp_path / "run", store=tmp_path / "store", progress=False)
    results = load_run(tmp_path / "run")
    keys = results.verdicts.drop_duplicates("transcript_key")[["transcript_key", "system", "case_id"]].head(20)
    human = keys.assign(score=3)
    with pytest.raises(InputError, match=r"different scales \(ordinal 1-10; ordinal 1-5.*single scale"):
        results.calibrate(human)
    human.to_csv(tmp_path / "human.csv", index=False)
    out = run_cli(["calibrate", tmp_path / "run", "--human", tmp_path / "human.csv"])
    assert out.returncode == 2
    assert "different scales" in out.stderr and len(out.stderr.strip().splitlines()) == 1
