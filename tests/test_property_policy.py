"""The property tests' policy (tests/conftest.py, docs/development.md): CI draws the same examples in every run,
and the sweep draws new ones, many more of them, for every property test."""

from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace

import conftest
import hypothesis
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

REPO = Path(__file__).resolve().parents[1]


def test_ci_runs_the_suite_under_the_derandomized_profile():
    pytest_lines = [line for line in (REPO / ".ci" / "run").read_text().splitlines()
                    if line.startswith("python -m pytest")]
    assert pytest_lines and all("--hypothesis-profile=ci" in line for line in pytest_lines), pytest_lines
    ci = hypothesis.settings.get_profile("ci")
    assert ci.derandomize and ci.database is None and ci.deadline is None


def test_no_profile_times_an_example_against_a_deadline():
    # A wall-clock deadline on a shared 2-core machine fails a test for the load it ran under.
    assert all(hypothesis.settings.get_profile(name).deadline is None for name in ("ci", "sweep", "dev"))
    assert hypothesis.settings.get_current_profile_name() in ("ci", "sweep", "dev")


def _drawn(profile: str) -> list[int]:
    seen: list[int] = []

    @settings(hypothesis.settings.get_profile(profile), max_examples=15)
    @given(st.integers(0, 10**9))
    def record(value):
        seen.append(value)

    record()
    return seen


def test_the_ci_profile_draws_the_same_examples_every_run_and_the_sweep_new_ones():
    assert _drawn("ci") == _drawn("ci")
    first, second = _drawn("sweep"), _drawn("sweep")
    # 15 draws from a billion values each: the same list twice would take a fixed seed, not chance.
    assert first != second


def test_the_sweep_multiplies_each_tests_own_examples_and_randomizes_even_a_derandomized_one(monkeypatch):
    @settings(max_examples=7, derandomize=True, database=None)
    @given(st.booleans())
    def fixed(value):
        pass

    @given(st.booleans())
    def plain(value):
        pass

    def not_a_property():
        pass

    monkeypatch.setattr(conftest, "SWEEP_FACTOR", 3.0)
    conftest._swept([SimpleNamespace(obj=fixed), SimpleNamespace(obj=plain), SimpleNamespace(obj=not_a_property)])
    for test, examples in ((fixed, 21), (plain, 300)):
        carried = test._hypothesis_internal_use_settings
        assert (carried.max_examples, carried.derandomize, carried.database) == (examples, False, None)
    assert not hasattr(not_a_property, "_hypothesis_internal_use_settings")


def test_the_sweep_stops_when_hypothesis_no_longer_carries_a_tests_settings_where_it_looks():
    @given(st.booleans())
    def moved(value):
        pass

    del moved._hypothesis_internal_use_settings
    with pytest.raises(pytest.UsageError, match="sweep profile cannot find"):
        conftest._swept([SimpleNamespace(obj=moved, nodeid="tests/x.py::moved")])


def test_every_property_test_is_a_module_level_function_the_sweep_reaches():
    # A @given inside another test is out of the sweep's reach. The claims file's counts what its examples did
    # (both doors tried) after they ran, so it is defined inside its test: 300 derandomized examples, in CI too.
    reached_elsewhere = {"tests/gate/test_claims_file.py", "tests/test_property_policy.py"}  # this one: specimens
    nested = []
    for path in sorted((REPO / "tests").rglob("test_*.py")):
        text = path.read_text(encoding="utf-8")
        for match in re.finditer(r"^( +)@(?:hypothesis\.)?given\(", text, re.M):
            nested.append(f"{path.relative_to(REPO)}:{text[:match.start()].count(chr(10)) + 1}")
    assert {n.split(":")[0] for n in nested} <= reached_elsewhere, nested
