"""Shared fixtures: a seeded RNG, figures closed after each test, tiny specs."""

from __future__ import annotations

import os
import threading
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import yaml

os.environ.setdefault("MPLBACKEND", "Agg")

REPO = Path(__file__).resolve().parents[1]
SPECS = REPO / "specs"


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    import sys

    if "matplotlib.pyplot" in sys.modules:
        sys.modules["matplotlib.pyplot"].close("all")


@pytest.fixture
def rng():
    return np.random.default_rng(20261130)


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
        from multiverse.llm import ModelClient

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
