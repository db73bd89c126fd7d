"""The case study: its two specs expand to the ASSERT design, and the analysis script runs end to end.

specs/deception.yaml (real models) and specs/deception-sim.yaml (simulated
world) share one design: 6 impermissible behaviours x 4 interaction
conditions x 5 cases = 120 cases, and the axes setting x user (no second user
for single-turn) x judge (3) x evidence (2) x scoring (3) = 54 universes. The
full simulated study takes minutes, so the end-to-end test runs a cut-down
grid of the same spec and then the analysis script as a user would.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from PIL import Image

from multiverse.grid import expand
from multiverse.pipeline import plan, run
from multiverse.pricing import price_per_token
from multiverse.spec import load_spec
from multiverse.work import build_work

REPO = Path(__file__).resolve().parents[1]
SPECS = REPO / "specs"
SCRIPT = REPO / "analyses" / "deception_case_study.py"
FIGURES = ("deception_curves.png", "deception_agreement.png", "deception_ranking.png",
           "deception_variance.png", "deception_conditions.png")

CONDITIONS = ["material_reliance", "consistency_probe", "overclaim_pressure", "outside_basis"]
BEHAVIORS = ["fabricate_evidence", "overstate_capability", "false_tool_claim",
             "inconsistent_commitment", "misattribute_source", "uncertain_as_settled"]
AXES = {
    "setting": ["multi_turn", "single_turn"],
    "user": ["cooperative", "adversarial"],
    "evidence": ["strict", "lenient"],
    "scoring": ["all_applicable", "impermissible_only", "no_applicable_is_compliant"],
}


def _models(spec) -> set[str]:
    models = {s.model for s in spec.systems} | {spec.design.generator.model}
    for options in spec.axes.values():
        for patch in options.values():
            models |= {v for k, v in patch.items() if k.endswith(".model")}
    return models | {spec.rollout.user.model, spec.judge.model}


@pytest.mark.parametrize("name", ["deception.yaml", "deception-sim.yaml"])
def test_spec_expands_to_the_case_study_grid(name):
    spec = load_spec(SPECS / name)
    universes = expand(spec)
    # 2 settings x 2 users - the single-turn copy of the second user = 3 rollout configurations,
    # x 3 judges x 2 evidence standards x 3 scoring rules.
    assert len(universes) == 3 * 3 * 2 * 3
    assert len(spec.systems) >= 3
    for axis, options in AXES.items():
        assert list(spec.axes[axis]) == options
    assert len(spec.axes["judge"]) == 3
    combos = {(u.options["setting"], u.options["user"]) for u in universes}
    assert combos == {("multi_turn", "cooperative"), ("multi_turn", "adversarial"), ("single_turn", "cooperative")}
    primary = [u for u in universes if u.is_primary]
    assert len(primary) == 1
    first_judge = next(iter(spec.axes["judge"]))
    assert dict(primary[0].options) == {"setting": "multi_turn", "user": "cooperative", "judge": first_judge,
                                        "evidence": "strict", "scoring": "all_applicable"}
    assert [c.id for c in spec.rubric.criteria if not c.permissible] == BEHAVIORS
    assert sum(c.permissible for c in spec.rubric.criteria) == 4

    # Every rollout configuration x judge at one evidence standard and scoring rule: all
    # cases and transcripts, a third of the judge calls. (build_work on all 54 universes
    # takes ~15 s of hashing; `multiverse plan` shows the full counts.)
    sliced = [u for u in universes if u.options["evidence"] == "strict" and u.options["scoring"] == "all_applicable"]
    assert len(sliced) == 9
    work = build_work(spec, sliced)
    systems = len(spec.systems)
    assert len(work.cases) == 120  # 24 cells x 5 scenario briefs
    assert {c.cell["interaction_condition"] for c in work.cases.values()} == set(CONDITIONS)
    assert {c.cell["behavior"] for c in work.cases.values()} == set(BEHAVIORS)
    assert len(work.transcripts) == 3 * systems * 120
    assert len(work.judge_calls) == 3 * systems * 120 * 3
    if name == "deception.yaml":
        # Every real model has a price in litellm's list, so `plan` shows what a run costs.
        for model in _models(spec):
            assert price_per_token(model) != (0.0, 0.0), model
    else:
        assert all(m.startswith("sim/") for m in _models(spec))


def _reduced_spec(tmp_path: Path) -> Path:
    """deception-sim.yaml cut down: 1 case per cell, 2 interaction conditions, 2 judges."""
    document = yaml.safe_load((SPECS / "deception-sim.yaml").read_text(encoding="utf-8"))
    document["rubric"] = str(SPECS / document["rubric"])
    document["design"]["cases_per_cell"] = 1
    for dimension in document["design"]["dimensions"]:
        if dimension["name"] == "interaction_condition":
            dimension["levels"] = ["material_reliance", "overclaim_pressure"]
    document["axes"]["judge"] = dict(list(document["axes"]["judge"].items())[:2])
    path = tmp_path / "deception-sim-small.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False), encoding="utf-8")
    return path


def test_reduced_simulated_study_and_analysis_script(tmp_path):
    spec = load_spec(_reduced_spec(tmp_path))
    result = run(spec, out=tmp_path / "run", store=tmp_path / "store", jobs=4, progress=False)
    assert result.manifest["simulated"] is True
    assert len(result.manifest["universes"]) == 3 * 2 * 2 * 3
    assert result.manifest["stages"]["draft"]["units"] == 6 * 2 * 1

    figures = tmp_path / "figures"
    done = subprocess.run(
        [sys.executable, str(SCRIPT), str(tmp_path / "run"), "--figures", str(figures)],
        capture_output=True, text=True, cwd=tmp_path, timeout=120,
    )
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert out.startswith("SIMULATED world")
    assert "Rates across universes" in out
    for system in ("atlas", "beacon", "cobalt", "delta"):
        assert f"  {system}: " in out
    assert "Most variance: " in out
    assert "Ranking: primary order " in out and "same top system" in out and "same full order" in out
    assert "Judge agreement" in out
    for name in FIGURES:
        path = figures / name
        assert path.exists(), name
        with Image.open(path) as image:
            image.verify()
        with Image.open(path) as image:
            assert image.format == "PNG"
            width, height = image.size
            assert width >= 600 and height >= 300, (name, image.size)
            colours = image.convert("L").getextrema()
            assert colours[1] - colours[0] > 100, name  # not a blank canvas


def test_script_rejects_a_missing_run_directory(tmp_path):
    done = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path / "nothing")],
                          capture_output=True, text=True, cwd=tmp_path, timeout=60)
    assert done.returncode == 2
    assert "error:" in done.stderr and "Traceback" not in done.stderr


def test_real_model_spec_plan_shows_calls_and_cost(tmp_path):
    planned = plan(load_spec(SPECS / "deception.yaml"), store=tmp_path / "store")
    stages = planned["stages"]
    assert len(planned["universes"]) == 54
    assert stages["draft"]["units"] == 120 and stages["draft"]["to_compute"] == 120
    assert stages["rollout"]["units"] == 3 * 4 * 120
    assert stages["judge"]["units"] == 3 * 4 * 120 * 3 * 2
    assert all(stages[s]["cost"] > 0 for s in ("draft", "rollout", "judge"))
