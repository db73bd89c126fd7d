"""The case study: its two specs expand to the ASSERT design, the analysis script runs end to end,
and README's figures and numbers are what the study produces.

specs/deception.yaml (real models) and specs/deception-sim.yaml (simulated
world) share one design: 6 impermissible behaviours x 4 interaction
conditions x 5 cases = 120 cases, and the axes setting x user (no second user
for single-turn) x judge (3) x evidence (2) x scoring (3) = 54 universes. A
cut-down grid of the same spec checks the script quickly; the full study
(minutes: marked slow, and run in CI) runs README's own "Reproduce the
simulated study" block and compares what it writes with the committed
figures' numbers (figures/deception_case_study.json), which README's text
must quote.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import re
import runpy
from pathlib import Path

import pytest
import yaml
from cli_runner import CliResult
from PIL import Image
from readme_blocks import documentation, newcomer_folder, run_shell, section_blocks

from multiverse.engine._pipeline import plan, run
from multiverse.model._pricing import price_per_token
from multiverse.spec import load_spec
from multiverse.spec._grid import expand
from multiverse.work._units import build_work

REPO = Path(__file__).resolve().parents[1]
SPECS = REPO / "specs"
SCRIPT = REPO / "analyses" / "deception_case_study.py"
FIGURES = ("deception_curves.png", "deception_agreement.png", "deception_ranking.png",
           "deception_variance.png", "deception_conditions.png")
NUMBERS = "deception_case_study.json"
COMMITTED = REPO / "figures" / NUMBERS

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


def _script(argv: list[str], *, cwd: Path) -> CliResult:
    """``python analyses/deception_case_study.py <argv>`` as its ``main`` runs it in this process, from ``cwd``.

    The full study below runs the script as README's block does, a process of its own; these tests
    check what it prints and writes, and a second interpreter importing pandas, matplotlib and the
    analyses cost them more than the script's own work.
    """
    main = runpy.run_path(str(SCRIPT), run_name="deception_case_study")["main"]
    out, err = io.StringIO(), io.StringIO()
    with contextlib.chdir(cwd), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    return CliResult(code, out.getvalue(), err.getvalue())


def test_reduced_simulated_study_and_analysis_script(tmp_path):
    spec = load_spec(_reduced_spec(tmp_path))
    result = run(spec, out=tmp_path / "run", store=tmp_path / "store", jobs=4, progress=False)
    assert result.manifest.simulated is True
    assert len(result.manifest.universes) == 3 * 2 * 2 * 3
    assert result.manifest.stages["draft"].units == 6 * 2 * 1

    figures = tmp_path / "figures"
    done = _script([str(tmp_path / "run"), "--figures", str(figures)], cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert out.startswith("SIMULATED world")
    assert "Rates across universes" in out
    for system in ("atlas", "beacon", "cobalt", "delta"):
        assert f"  {system}: " in out
    assert "Most variance: " in out
    assert "Ranking: primary order " in out and "same top system" in out and "same full order" in out
    assert "Judge agreement" in out
    numbers = json.loads((figures / NUMBERS).read_text(encoding="utf-8"))
    assert numbers["simulated"] is True and numbers["universes"] == 3 * 2 * 2 * 3
    assert set(numbers["figures"]) == {"curves", "agreement", "ranking", "variance", "conditions"}
    assert set(numbers["quoted"]["curves"]["primary_positions"]) == {"atlas", "beacon", "cobalt", "delta"}
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
    done = _script([str(tmp_path / "nothing")], cwd=tmp_path)
    assert done.returncode == 2
    assert "error:" in done.stderr and "Traceback" not in done.stderr


def test_real_model_spec_plan_shows_calls_and_cost(tmp_path):
    planned = plan(load_spec(SPECS / "deception.yaml"), store=tmp_path / "store")
    stages = planned.stages
    assert len(planned.universes) == 54
    assert stages["draft"].units == 120 and stages["draft"].to_compute == 120
    assert stages["rollout"].units == 3 * 4 * 120
    assert stages["judge"].units == 3 * 4 * 120 * 3 * 2
    assert all(stages[s].cost > 0 for s in ("draft", "rollout", "judge"))


# --------------------------------------------------------------------------- README's numbers


def _case_study_text() -> str:
    """README's case-study section, whitespace folded, and its End to end and Call economy lines."""
    text = documentation()
    start = text.index("# Case study: conversational misrepresentation")
    return " ".join(text[start:].split())


def _one(pattern: str, text: str) -> tuple[str, ...]:
    found = re.findall(pattern, text)
    assert len(found) == 1, f"README should say this once: {pattern!r}; found {found}"
    return found[0] if isinstance(found[0], tuple) else (found[0],)


def readme_quotes(numbers: dict) -> list[str]:
    """Every number README's case study quotes, against ``numbers`` (the script's JSON); the mismatches."""
    text, q = _case_study_text(), numbers["quoted"]
    curves, agreement, ranking = q["curves"], q["agreement"], q["ranking"]
    variance, conditions = q["variance"], q["conditions"]
    wrong = []

    def check(what: str, said, produced) -> None:
        if said != produced:
            wrong.append(f"{what}: README says {said!r}, the study gives {produced!r}")

    system, position = _one(r'its position counted from the lowest \((\w+): "([^"]+)"\)', text)
    check(f"{system}'s primary position", position, curves["primary_positions"].get(system))
    low, high = _one(r"rate ranges from ([\d.–]+) \(its lowest universe\) to ([\d.–]+) \(its highest\)", text)
    check("lowest rates", low, curves["rate_min"])
    check("highest rates", high, curves["rate_max"])
    rejects, p, draws, holm = _one(r'rejects "the primary rate holds everywhere" for (every system|no system|\d+ of \d+ '
                                   r"systems) \(p = ([\d.–]+) with ([\d,]+) null draws; Holm-adjusted, at most ([\d.]+)\)",
                                   text)
    check("count test", (rejects, p, draws, holm),
          (curves["count_rejects"], curves["count_p"], curves["null_draws"], curves["count_p_holm_max"]))
    (cancel,) = _one(r"in which universes above and below the primary rate cancel, reject it for "
                     r"(every system|no system|\d+ of \d+ systems)", text)
    check("median effect", cancel, curves["median_rejects"])
    check("Stouffer's Z", cancel, curves["stouffer_rejects"])

    kappa, harshest, higher, by, lower = _one(r"agree only moderately \(kappa ([\d.–]+)\), and (\w+) is the "
                                              r"harshest: rates under (\w+) are ([\d.]+) higher than under (\w+)", text)
    check("kappa", kappa, agreement["kappa"])
    check("harshest judge", harshest, agreement["harshest"])
    check("widest judge gap", {"higher": higher, "lower": lower, "by": by}, agreement["widest_gap"])

    top, same_top, order, same_order = _one(r"(\w+) tops the primary universe but only (\d+%) of all universes, and "
                                            r"the primary universe's full order \(([^)]+)\) holds in just (\d+%)", text)
    check("ranking", (top.lower(), same_top, order, same_order),
          (ranking["primary_top"], ranking["same_top"], ranking["primary_order"], ranking["same_order"]))

    check("noise floor", _one(r"noise floor here is ([\d.]+%)", text)[0], variance["noise_floor"])
    check("axes", _one(r"main effect and interaction together\): ((?:\w+ [\d.]+%(?:, )?)+)\.", text)[0],
          variance["by_axis"])
    check("reordering", _one(r"reorders systems most \((\w+ × system [\d.]+%)\)", text)[0], variance["reorders_most"])
    share, noise = _one(r"systems' own differences \(([\d.]+%)\) are (not distinguishable from noise|beyond noise)", text)
    check("systems' share", (share, noise), (variance["system_share"], variance["system_beyond_noise"]))
    check("sum of shares", _one(r"the bars add up to ([\d.]+%), not 100%", text)[0], variance["shares_sum"])

    away = conditions["one_axis_away"]
    pulled, k, n = _one(r"An adversarial user pulls (\w+) down in (\d+) of (\d+) conditions", text)
    moved = away["primary, but user = adversarial"][pulled]
    check(f"adversarial user on {pulled}", (int(k), int(n)), (moved["lower"], moved["of"]))
    k, n = _one(r"single-turn prompts raise every system in (\d+) of (\d+) conditions", text)
    single = away["primary, but setting = single_turn"].values()
    check("single-turn", (int(k), int(n)), (min(m["higher"] for m in single), min(m["of"] for m in single)))
    weak, condition = _one(r"(\w+) is weakest when questions fall `(\w+)`", text)
    check(f"{weak}'s weakest condition", condition, conditions["weakest_condition"].get(weak))

    everything = " ".join(documentation().split())
    check("calls (End to end)", _one(r"simulated case study \((?:\d+) universes, ([\d,]+) calls\)", everything)[0],
          numbers["calls"])
    check("calls (Call economy)", _one(r"\| `specs/deception-sim\.yaml` \(\d+ universes\) \| ([\d,]+) \|", everything)[0],
          numbers["calls"])
    check("universes", _one(r"simulated case study \((\d+) universes", everything)[0], str(numbers["universes"]))
    return wrong


def test_readme_quotes_the_committed_numbers():
    """README's case-study text says what figures/deception_case_study.json (the script's output) says."""
    numbers = json.loads(COMMITTED.read_text(encoding="utf-8"))
    assert numbers["simulated"] and numbers["run"] == "deception-sim" and numbers["universes"] == 54
    assert not readme_quotes(numbers), "\n".join(readme_quotes(numbers))
    for name in FIGURES:  # the committed figures are there, and the numbers name them all
        with Image.open(REPO / "figures" / name) as image:
            assert image.format == "PNG"
    assert set(numbers["figures"]) == {"curves", "agreement", "ranking", "variance", "conditions"}


def test_a_changed_number_is_caught():
    """The check is not vacuous: each kind of quoted number, changed in the JSON, is reported."""
    committed = COMMITTED.read_text(encoding="utf-8")

    def reverse(axes: str) -> str:
        return ", ".join(reversed(axes.split(", ")))

    changes = (
        lambda n: n["quoted"]["agreement"].update(kappa="0.43–0.54"),
        lambda n: n["quoted"]["ranking"].update(same_top="46%"),
        lambda n: n["quoted"]["variance"].update(shares_sum="75.0%"),
        lambda n: n["quoted"]["variance"].update(by_axis=reverse(n["quoted"]["variance"]["by_axis"])),
        lambda n: n["quoted"]["curves"]["primary_positions"].update(atlas="21st lowest of 24"),
        lambda n: n["quoted"]["conditions"]["weakest_condition"].update(delta="material_reliance"),
        lambda n: n.update(calls="17,242"),
    )
    for change in changes:
        numbers = json.loads(committed)
        change(numbers)
        assert readme_quotes(numbers), "a changed number went unnoticed"


def _differences(produced, committed, where: str = "") -> list[str]:
    """Where two JSON documents differ; floats within 1e-3 (rounded to 4 decimals, and p-values of seeded nulls)."""
    if isinstance(committed, dict) and isinstance(produced, dict):
        keys = sorted(set(produced) | set(committed))
        return [d for k in keys for d in _differences(produced.get(k), committed.get(k), f"{where}.{k}")]
    if isinstance(committed, list) and isinstance(produced, list):
        if len(produced) != len(committed):
            return [f"{where}: {len(produced)} items, committed {len(committed)}"]
        return [d for i, (a, b) in enumerate(zip(produced, committed)) for d in _differences(a, b, f"{where}[{i}]")]
    if isinstance(committed, float) and isinstance(produced, (int, float)) and not isinstance(produced, bool):
        return [] if math.isclose(produced, committed, abs_tol=1e-3) else [f"{where}: {produced} != {committed}"]
    return [] if produced == committed else [f"{where}: {produced!r} != committed {committed!r}"]


@pytest.mark.slow
def test_the_full_simulated_study_reproduces_the_committed_figures(tmp_path):
    """README's "Reproduce the simulated study" block, run as written, writes the committed figures' numbers."""
    (block,) = section_blocks("Reproduce the simulated study")
    folder = newcomer_folder(tmp_path)
    summary = run_shell(block, folder, timeout=1800)
    assert "\nSIMULATED world (deception-sim)" in summary  # after the run's own summary
    produced = json.loads((folder / "figures" / NUMBERS).read_text(encoding="utf-8"))
    differences = _differences(produced, json.loads(COMMITTED.read_text(encoding="utf-8")))
    assert not differences, ("the committed figures no longer match the script; rerun README's block and commit "
                             "figures/: " + "; ".join(differences[:20]))
    assert not readme_quotes(produced), "\n".join(readme_quotes(produced))
    for name in FIGURES:
        with Image.open(folder / "figures" / name) as image:
            assert image.format == "PNG" and min(image.size) >= 300, (name, image.size)
