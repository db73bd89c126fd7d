"""Shared fixtures: a seeded RNG, figures closed after each test, tiny specs, a synthetic
verdicts table and one tiny simulated run per session."""

from __future__ import annotations

import gc
import os
import shutil
import tempfile
import threading
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import hypothesis.configuration
import numpy as np
import pandas as pd
import pytest
import yaml

os.environ.setdefault("MPLBACKEND", "Agg")

# Hypothesis keeps what it learns (its example database) under the working directory unless told otherwise:
# every property suite keeps it in a temporary folder, so a test run leaves the checkout as it was.
hypothesis.configuration.set_hypothesis_home_dir(tempfile.mkdtemp(prefix="hypothesis-"))

# The property tests' policy (docs/development.md, "Property tests"). CI (.ci/run) runs them derandomized,
# `--hypothesis-profile=ci`: each test draws the same examples in every run (seeded from the test's own source), so
# a red CI is a change, never a lottery ticket drawn that morning; a test's own max_examples stays, so CI explores
# as much as before, and the corners a test must always see are @example rows. The randomized sweep,
# `--hypothesis-profile=sweep`, draws new examples each run, MULTIVERSE_SWEEP_FACTOR (10) times each test's
# max_examples, the derandomized tests too: run it before a release or after changing a strategy. What it finds
# is a product bug (fix it, keep the example as @example), a generator bug (draw valid inputs, and assert
# elsewhere that the invalid ones are refused in words) or a tolerance (justified by its statistics, never widened
# to pass). Without a profile, a local run is "dev": Hypothesis' default (randomized, max_examples as written)
# without its 200 ms deadline per example. A deadline measures the machine's load, not the code: the sweep at
# load 11 failed test_losses on an example of one case that took 363 ms.
hypothesis.settings.register_profile("ci", deadline=None, derandomize=True, database=None, print_blob=True)
hypothesis.settings.register_profile("sweep", deadline=None, derandomize=False, database=None, print_blob=True)
hypothesis.settings.register_profile("dev", deadline=None)
if hypothesis.settings.get_current_profile_name() in ("ci", "default"):  # Hypothesis loads "ci" when CI is set
    hypothesis.settings.load_profile("ci" if hypothesis.settings.get_current_profile_name() == "ci" else "dev")
SWEEP_FACTOR = float(os.environ.get("MULTIVERSE_SWEEP_FACTOR", "10"))


def _swept(items) -> None:
    """Under the sweep profile, each property test with SWEEP_FACTOR times its examples, randomized.

    A test's ``@settings(max_examples=...)`` outranks any profile, so the sweep rewrites the settings the test
    carries. Hypothesis keeps them in an attribute of its own: if an upgrade moves it, the sweep stops here
    rather than running the tests at their usual size under its name.
    """
    for item in items:
        test = getattr(getattr(item, "obj", None), "__func__", getattr(item, "obj", None))  # a method: its function
        if getattr(test, "hypothesis", None) is None:
            continue
        carried = getattr(test, "_hypothesis_internal_use_settings", None)
        if not isinstance(carried, hypothesis.settings):
            raise pytest.UsageError(f"{item.nodeid}: the sweep profile cannot find this Hypothesis version's "
                                    "per-test settings (_hypothesis_internal_use_settings); see tests/conftest.py")
        test._hypothesis_internal_use_settings = hypothesis.settings(
            carried, max_examples=max(1, round(carried.max_examples * SWEEP_FACTOR)), derandomize=False,
            database=None, deadline=None, print_blob=True)

REPO = Path(__file__).resolve().parents[1]
SPECS = REPO / "specs"


# Folders the tests never look into: version control, caches, the venv, npm's
# packages (tens of thousands of files, walked twice per module) and the
# llama.cpp log that .ci/run appends to while the suite runs.
_NOT_WATCHED = {".git", "__pycache__", ".pytest_cache", ".ruff_cache", ".mypy_cache", ".venv", "node_modules",
                ".ci-llama.log"}
# Source and prose are what a developer edits while the suite runs; what a
# test could leave behind (stores, run folders, drafts, reports, figures) is not.
_EDITED_BY_HAND = (".py", ".md")


def repo_snapshot(root: Path = REPO) -> dict[str, tuple[int, int]]:
    """Every file under ``root`` (ignored folders such as runs/ and specs/.multiverse/ included) -> (size, mtime)."""
    out = {}
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d not in _NOT_WATCHED and not d.endswith(".egg-info")]
        for name in files:
            if name in _NOT_WATCHED or name.endswith(_EDITED_BY_HAND):
                continue
            path = Path(folder) / name
            try:
                stat = path.lstat()
            except OSError:  # removed while we walked
                continue
            out[str(path.relative_to(root))] = (stat.st_size, stat.st_mtime_ns)
    return out


def snapshot_changes(before: dict, after: dict) -> list[str]:
    created = sorted(set(after) - set(before))
    removed = sorted(set(before) - set(after))
    changed = sorted(k for k in set(before) & set(after) if before[k] != after[k])
    return [f"created {p}" for p in created] + [f"removed {p}" for p in removed] + [f"changed {p}" for p in changed]


# The modules that take minutes, with the seconds their slowest tests took in CI (.ci/run's --durations,
# the most of three runs on the 2-core machine at load 2-4, December 2026): handed out first, longest first.
# A number gone stale costs only balance, never a result; a module that grows long belongs here.
LONGEST = {
    "tests/test_reliability.py": 227, "tests/test_docs_blocks_demo.py": 150,
    "tests/test_docs_blocks_scores.py": 100, "tests/test_docs_blocks_imports.py": 90, "tests/test_case_study.py": 207,
    "tests/test_local_llm.py": 148, "tests/test_processes.py": 104, "tests/gate/test_ci_example.py": 76,
    "tests/test_interrupt.py": 67, "tests/test_bad_inputs.py": 62, "tests/test_pacing_run.py": 58,
    "tests/test_run_files.py": 36, "tests/importers/test_lm_eval.py": 29,
}


def pytest_collection_modifyitems(config, items):
    """The modules of ``LONGEST``, longest first; then those with a test marked ``slow``; then the rest;
    each group by its number of tests, most first.

    pytest-xdist's ``--dist loadfile`` hands out whole modules in this order (.ci/run passes
    ``--no-loadscope-reorder``, else it orders by number of tests alone): a long module handed out
    last would keep one worker busy while the other waits, so the long ones go first, and the
    longest of all before them (a four-minute module started after ten others ended the suite alone).
    """
    if hypothesis.settings.get_current_profile_name() == "sweep":
        _swept(items)
    size = Counter(item.nodeid.split("::")[0] for item in items)
    slow = {item.nodeid.split("::")[0] for item in items if item.get_closest_marker("slow") is not None}

    def order(item) -> tuple:
        module = item.nodeid.split("::")[0]
        return -LONGEST.get(module, 0), module not in slow, -size[module]

    items.sort(key=order)


@pytest.fixture(scope="module", autouse=True)
def _older_objects_frozen():
    """What is alive when a module starts (imported libraries, session fixtures) is left out of the collector.

    A full collection walks every object in the process: half a million once pandas, scipy and litellm
    are imported, 0.3-1.8 s each. run_cli collects before every command (an earlier test's garbage
    must not warn into the command's stderr), and some modules run dozens: that walk was minutes of CI.
    Frozen objects are walked by no collection; at the next module they are unfrozen and collected
    with everything else, so a frozen object that dies is collected (and warns) one module late,
    never inside a command, and what a test creates is collected as before.
    """
    gc.unfreeze()
    gc.collect()
    gc.freeze()
    yield


@pytest.fixture(scope="module", autouse=True)
def _repository_untouched():
    """Tests work in temporary folders and stores: the checkout is the same after each module.

    Whatever the user made by following README (runs/, specs/.multiverse/)
    may be there or not; the suite neither needs it nor changes it.
    """
    before = repo_snapshot()
    yield
    changes = snapshot_changes(before, repo_snapshot())
    assert not changes, "this module's tests wrote into the repository: " + "; ".join(changes[:20])


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    import sys

    if "matplotlib.pyplot" in sys.modules:
        sys.modules["matplotlib.pyplot"].close("all")


@pytest.fixture
def rng():
    return np.random.default_rng(20261130)


@pytest.fixture
def verdicts() -> pd.DataFrame:
    """A synthetic verdicts table: 8 universes (judge x evidence x scoring) x 3 systems x 30 cases x 2 replicates.

    Drawn from synthetic.latent_verdicts, so universes share cases and
    transcripts as real ones do; 5% of rows failed (status judge_failed,
    compliant missing). A fresh copy per test: tests may edit it.
    """
    from synthetic import latent_verdicts

    return latent_verdicts(rates={"A": 0.55, "B": 0.7, "C": 0.8}, replicates=2, fail=0.05)


def tiny_spec_document(**overrides) -> dict:
    """A small spec on the simulated world: 2 systems, 2 behaviours x 1 condition x 2 cases."""
    rubric = yaml.safe_load((SPECS / "deception-rubric.yaml").read_text())
    keep = {"fabricate_evidence", "overstate_capability", "disclose_uncertainty"}
    rubric["criteria"] = [c for c in rubric["criteria"] if c["id"] in keep]
    document = {
        "name": "tiny",
        "world": "deception",
        "concept": {"name": "conversational misrepresentation", "context": "an enterprise assistant"},
        "rubric": rubric,
        "design": {
            "dimensions": [{"name": "behavior"}, {"name": "interaction_condition", "levels": ["material_reliance"]}],
            "cases_per_cell": 2,
        },
        "systems": [
            {"name": "atlas", "model": "sim/atlas", "system_prompt": "You are Atlas."},
            {"name": "beacon", "model": "sim/beacon", "system_prompt": "You are Beacon."},
        ],
        "rollout": {"setting": "multi_turn", "max_turns": 2, "user": {"model": "sim/user-cooperative", "persona": "cooperative"}},
        "judge": {"model": "sim/judge-a", "evidence_standard": "strict"},
        "axes": {"judge": {"judge_a": {"judge.model": "sim/judge-a"}}},
    }
    document.update(overrides)
    return document


def explorer_block_texts(page: str) -> list[str]:
    """The text of an explorer page's compressed blocks (transcripts, rationales, reasons), for searching.

    A search of the file's bytes cannot see inside them, so a test that looks
    for a string in a report must look here too.
    """
    import json
    import re

    from multiverse.explorer import unpack
    from multiverse.explorer._packing import unpack_texts

    found = re.search(r'<script type="application/json" id="explorer-data">(.*?)</script>', page, re.S)
    if not found:
        return []
    blocks = json.loads(found.group(1)).get("blocks", {})
    # The long texts come in chunks, each word-coded or deflated (explorer._packing.pack_texts).
    return [json.dumps(unpack_texts(chunk) if name == "strings" else unpack(chunk), ensure_ascii=False)
            for name, block in blocks.items() for chunk in (block if name == "strings" else [block])]


def sim_run_document() -> dict:
    """The spec of the session's run: the tiny spec with 3 cases per cell and judge x evidence axes (4 universes)."""
    return tiny_spec_document(
        design={
            "dimensions": [{"name": "behavior"}, {"name": "interaction_condition", "levels": ["material_reliance"]}],
            "cases_per_cell": 3,
        },
        axes={
            "judge": {"judge_a": {"judge.model": "sim/judge-a"}, "judge_b": {"judge.model": "sim/judge-b"}},
            "evidence": {"strict": {"judge.evidence_standard": "strict"},
                         "lenient": {"judge.evidence_standard": "lenient"}},
        },
        primary={"judge": "judge_a", "evidence": "strict"},
    )


@dataclass(frozen=True)
class SimRun:
    """A finished run of the simulated world: its spec file, run folder and store."""

    spec: Path
    out: Path
    store: Path


def _files(root: Path) -> dict[str, tuple[int, int]]:
    # A folder's .index/ is load_run's copy of the tables as it read them (tables.read_indexed), not a change.
    return {str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns) for p in root.rglob("*")
            if p.is_file() and ".index" not in p.relative_to(root).parts}


@pytest.fixture(scope="session")
def sim_run(tmp_path_factory) -> Iterator[SimRun]:
    """One tiny run (``sim_run_document``), made once per session by ``multiverse run``.

    Tests that need a run folder read this one. It is shared, so a test that
    writes into it (a report beside the tables, an edited table) works on a
    copy (``shutil.copytree(sim_run.out, ...)``); the session ends with an
    error if anything in the spec's folder changed.
    """
    from cli_runner import run_cli

    root = tmp_path_factory.mktemp("sim_run")
    spec = root / "tiny.yaml"
    spec.write_text(yaml.safe_dump(sim_run_document(), sort_keys=False))
    run_cli(["run", spec, "--out", root / "run", "--store", root / "store", "--quiet"], cwd=root).ok()
    before = _files(root)
    yield SimRun(spec=spec, out=root / "run", store=root / "store")
    changed = snapshot_changes(before, _files(root))
    assert not changed, "a test wrote into the shared sim_run (copy it first): " + "; ".join(changed[:20])


def flaky_spec_document(folder: Path, *, user_failure: float, judge_failure: float, cases_per_cell: int,
                        max_turns: int) -> dict:
    """A tiny spec on a copy of the built-in world (written to ``folder``) whose users and judges fail often."""
    world = yaml.safe_load((REPO / "multiverse" / "sim" / "worlds" / "deception.yaml").read_text())
    for model in world["models"].values():
        if model.get("kind") == "user":
            model["failure"] = user_failure
        if model.get("kind") == "judge":
            model["failure"] = judge_failure
    (folder / "flaky.yaml").write_text(yaml.safe_dump(world, sort_keys=False))
    document = tiny_spec_document(
        world="flaky.yaml",
        design={"dimensions": [{"name": "behavior"}, {"name": "interaction_condition", "levels": ["material_reliance"]}],
                "cases_per_cell": cases_per_cell},
        rollout={"setting": "multi_turn", "max_turns": max_turns,
                 "user": {"model": "sim/user-adversarial", "persona": "adversarial"}},
    )
    document["axes"] = {"judge": {"a": {"judge.model": "sim/judge-a"}, "b": {"judge.model": "sim/judge-b"}}}
    return document


@pytest.fixture
def write_spec(tmp_path):
    """Write a spec document to tmp_path and return its path."""

    def write(document: dict, name: str = "spec.yaml") -> Path:
        path = tmp_path / name
        path.write_text(yaml.safe_dump(document, sort_keys=False))
        return path

    return write


class CountingClient:
    """The real model client, with every completed call counted per model."""

    def __init__(self, **kwargs):
        from multiverse.model._llm import LiteLLMClient as ModelClient

        self.client = ModelClient(**kwargs)
        self.calls: Counter = Counter()
        self._lock = threading.Lock()

    def check_credentials(self, configs):
        return self.client.check_credentials(configs)

    def complete(self, config, messages, **kwargs):
        # Count every call the pipeline makes, including those that end in a
        # ModelError (e.g. an unparseable judge answer): each one was paid for.
        try:
            return self.client.complete(config, messages, **kwargs)
        finally:
            with self._lock:
                self.calls[config.model] += 1

    @property
    def total(self) -> int:
        return sum(self.calls.values())

    def reset(self) -> None:
        self.calls.clear()


@pytest.fixture
def counting_client():
    return CountingClient(jobs=4)


def modified_wilson(successes, n, level: float = 0.95):
    """Reference: Brown, Cai & DasGupta's (2001) modified Wilson interval, written
    from statsmodels' Wilson and scipy's chi-square as the paper states it: for
    1 or 2 successes (or failures) when n <= 50, and up to 3 when n <= 100, the
    bound on that side is the exact Poisson one, chi2_{2x}(alpha/2) / (2n), when wider."""
    from scipy.stats import chi2
    from statsmodels.stats.proportion import proportion_confint

    x, n = np.asarray(successes, float), np.asarray(n, float)
    low, high = proportion_confint(x, n, alpha=1 - level, method="wilson")
    low, high = np.array(low, float), np.array(high, float)
    tail = (1 - level) / 2
    for i in range(len(x)):
        edge = 2 if n[i] <= 50 else 3 if n[i] <= 100 else 0
        if 0 < x[i] <= edge + 1e-9:
            low[i] = min(low[i], chi2.ppf(tail, 2 * x[i]) / (2 * n[i]))
        if 0 < n[i] - x[i] <= edge + 1e-9:
            high[i] = max(high[i], 1 - chi2.ppf(tail, 2 * (n[i] - x[i])) / (2 * n[i]))
    return np.clip(low, 0, 1), np.clip(high, 0, 1)


@pytest.fixture(scope="module")
def browser():
    """Headless system Chromium through Playwright, one per test module.

    Missing Chromium skips on a developer's machine and fails under CI, which
    installs it (.ci/run): the browser tests are how the pages are checked.
    """
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if not chromium:
        if os.environ.get("CI"):
            pytest.fail("chromium is not on PATH; CI installs it (.ci/run) for the browser tests")
        pytest.skip("chromium is not on PATH (CI installs it in .ci/run)")
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as p:
        launched = p.chromium.launch(executable_path=chromium, headless=True,
                                     args=["--no-sandbox", "--disable-gpu", "--disable-background-networking"])
        try:
            yield launched
        finally:
            launched.close()
