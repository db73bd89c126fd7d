"""The public API: the names `import multiverse as mv` offers, and what importing them costs."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import multiverse as mv
import multiverse.analysis
import multiverse.plots

ROOT = Path(__file__).resolve().parents[1]

PUBLIC = [
    "load_spec", "expand", "plan", "run", "draft", "load_run", "import_table", "import_assert", "import_inspect",
    "import_promptfoo", "import_lm_eval",
    "report", "label", "power", "validate", "count_universes", "store_stats", "store_gc", "store_migrate", "check",
    "diff",
    "Results", "Analysis",
    "MultiverseError", "SpecError", "InputError", "StoreError", "ModelError", "BudgetExceeded", "ModelUnusable",
    "__version__",
]

ANALYSIS = [
    "case_matrix", "spec_curve", "difference_curve", "indicator_matrix", "curve_summary", "CaseMatrix",
    "joint_rate_test", "joint_curve_test", "joint_mean_test", "joint_difference_test", "JointTest",
    "compute_rates", "included_verdicts", "system_rates",
    "agreement", "cohen_kappa", "gwet_ac1", "pair_matrix",
    "score_agreement", "weighted_kappa", "krippendorff_alpha", "icc", "exact_agreement", "mean_difference",
    "ranking", "universe_ranks", "rank_distribution", "order_universes", "bootstrap_ranks", "separability",
    "rank_stability", "bradley_terry", "fit_bradley_terry", "pairwise_games", "OPPONENT",
    "order_consistency", "verdict_agreement", "three_way",
    "position_words",
    "kendall_tau_b", "kendall_w",
    "variance", "variance_decomposition", "variance_by_axis", "variance_summary", "aliasing",
    "design_power", "detectable_difference", "cases_needed",
    "adjust_tests",
    "rate_claim_tests", "difference_claim_tests", "rank_claim_tests", "partial_conjunction", "universes_needed", "holm",
    "read_labels", "labels_by_key", "calibrate", "Calibration", "calibration_document", "ppi_mean",
    "anchored_curve", "paired_curves", "ranking_change", "anchored_width", "human_power",
    # The doors the other rooms (results, engine, importers, gate, labelling, plots) use, now that none of
    # them imports a module of analysis (tests/test_house.py): the estimators' column and kinds, and helpers.
    "CONTRIBUTION", "MEAN_ESTIMATORS", "with_contributions", "scoring_choices", "ci_settings", "count_unparsed",
    "score_judgments", "score_verdicts", "counted_unparsed", "counts_of_rates", "counts_of_matrix", "rates_of_matrix", "dropped_notes",
    "tied_positions", "cut_flips", "cut_table", "transcript_keys", "rollout_configurations",
]
CONSTANTS = {"CONTRIBUTION", "MEAN_ESTIMATORS", "OPPONENT", "__version__"}

PLOTS = [
    "plot_curve", "plot_curves", "plot_difference_curve", "agreement_figure", "plot_agreement", "score_agreement_figure",
    "ranking_figure", "plot_rank_bump", "plot_rank_distribution", "plot_variance", "plot_factor_rates",
    "plot_calibration", "plot_diff", "cut_figure", "stamp_simulated",
]


@pytest.mark.parametrize(("package", "names"), [(mv, PUBLIC), (multiverse.analysis, ANALYSIS),
                                                 (multiverse.plots, PLOTS)], ids=["multiverse", "analysis", "plots"])
def test_the_public_names_are_pinned_and_each_resolves(package, names):
    assert sorted(package.__all__) == sorted(names) and len(package.__all__) == len(names)
    for name in names:
        value = getattr(package, name)
        assert value is not None
        if name not in CONSTANTS:
            # A function or class, never a module that happens to share the name
            # (multiverse.analysis.ranking is both a sub-room and a function).
            assert callable(value), name
    assert set(names) <= set(dir(package))


def test_the_facade_hands_out_the_real_objects():
    from multiverse.importers import import_table
    from multiverse.results._load import load_run
    from multiverse.results._results import Results
    from multiverse.spec import load_spec

    assert mv.load_run is load_run and mv.Results is Results and mv.load_spec is load_spec
    assert mv.import_table is import_table
    assert issubclass(mv.InputError, mv.MultiverseError) and issubclass(mv.BudgetExceeded, mv.ModelError)


def test_an_unknown_name_is_an_attribute_error():
    with pytest.raises(AttributeError, match="no attribute 'load_runs'"):
        mv.load_runs  # noqa: B018
    with pytest.raises(AttributeError):
        multiverse.analysis.plot_curve  # noqa: B018  (a figure, not an analysis)
    with pytest.raises(AttributeError):
        multiverse.plots.spec_curve  # noqa: B018


def _fresh(code: str) -> list[str]:
    env = {k: v for k, v in os.environ.items() if k != "LITELLM_LOCAL_MODEL_COST_MAP"}
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120, env=env,
                          check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


def test_importing_multiverse_and_reading_results_never_imports_litellm():
    out = _fresh(
        "import sys, multiverse\n"
        "print('litellm' in sys.modules)\n"
        "multiverse.load_run, multiverse.Results, multiverse.import_table, multiverse.import_assert\n"
        "multiverse.load_spec, multiverse.expand, multiverse.plan\n"
        "print('litellm' in sys.modules, 'matplotlib' in sys.modules)\n"
        "import os; print(os.environ.get('LITELLM_LOCAL_MODEL_COST_MAP', 'unset'))\n"
    )
    # litellm's local price map is asked for where litellm is imported (model.load_litellm), not here.
    assert out == ["False", "False", "False", "unset"]


def test_the_analyses_never_import_matplotlib_or_litellm():
    out = _fresh("import sys, multiverse.analysis\nprint('matplotlib' in sys.modules, 'litellm' in sys.modules)")
    assert out == ["False", "False"]


def _imports(path: Path) -> set[str]:
    """Every module ``path`` imports, relative imports resolved, at any depth of the file."""
    import ast

    package = ".".join(path.relative_to(ROOT).with_suffix("").parts[:-1])
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package if node.level else ""
            module = ".".join(p for p in (base, node.module or "") if p)
            found.add(module)
            found.update(f"{module}.{alias.name}" for alias in node.names)
    return found


def _modules(folder: str) -> list[Path]:
    return sorted((ROOT / folder).rglob("*.py"))


@pytest.mark.parametrize(("folder", "forbidden"), [
    # Analyses read tables: they never draw, call a model or reach back into the engine.
    ("multiverse/analysis", ("matplotlib", "litellm", "multiverse.stages", "multiverse.engine._pipeline", "multiverse.model._llm",
                             "multiverse.plots", "multiverse.reporting", "multiverse.cli")),
    # The report reads Results; rates and verdicts come from the analyses, not the scorer.
    ("multiverse/reporting", ("multiverse.stages", "multiverse.engine._pipeline", "multiverse.model._llm", "multiverse.cli")),
    ("multiverse/importers", ("multiverse.cli", "multiverse.reporting", "multiverse.engine._pipeline")),
    ("multiverse/plots", ("multiverse.cli", "multiverse.reporting", "multiverse.stages", "litellm")),
])
def test_data_flows_one_way(folder, forbidden):
    for path in _modules(folder):
        bad = sorted(m for m in _imports(path) if m.startswith(forbidden))
        assert not bad, f"{path.relative_to(ROOT)} imports {bad}"


def test_the_case_matrix_sits_below_both_the_curve_and_the_joint_tests():
    inference = set().union(*map(_imports, _modules("multiverse/analysis/inference")))
    case_matrix = set().union(*map(_imports, _modules("multiverse/analysis/cases")))
    assert not any(m.startswith("multiverse.analysis.curve") for m in inference)
    assert not any(m.startswith(("multiverse.analysis.curve", "multiverse.analysis.inference")) for m in case_matrix)
    assert any(m.startswith("multiverse.analysis.cases") for m in inference)  # the walk sees the sub-room's imports


def test_the_library_never_names_a_command_line_flag():
    import re

    flag = re.compile(r"""InputError\(\s*f?["'][^"']*--[a-z]""")
    paths = []
    for folder in ("multiverse/results", "multiverse/tables", "multiverse/analysis", "multiverse/reporting",
                   "multiverse/importers"):
        paths += _modules(folder)
    for path in paths:
        assert not flag.search(path.read_text(encoding="utf-8")), f"{path.relative_to(ROOT)} names a flag in an error"


def test_every_subpackage_is_installed():
    """pyproject lists packages by name: a new subpackage missing there is absent from every install."""
    import tomllib

    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]["packages"])
    found = {".".join(p.parent.relative_to(ROOT).parts) for p in (ROOT / "multiverse").rglob("__init__.py")}
    assert found <= listed, sorted(found - listed)
