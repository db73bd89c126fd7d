"""Agreement's units read off a run's layout (``agreement_runs``) are the units hashing gives.

Tables are laid out as a run writes them: each universe's rows together, and the universes of a
context listing the same transcripts in the same order. Each test compares the layout's units with
the hashed ones on the same rows, and breaks the layout in one way at a time: the layout must then
be refused, never read wrongly.
"""

from __future__ import annotations

import importlib
import itertools
import json

import numpy as np
import pandas as pd
import pytest

from multiverse.analysis import agreement

runs = importlib.import_module("multiverse.analysis.agreement._runs")
units = importlib.import_module("multiverse.analysis.agreement._units")

AXES = ["prompt", "judge", "scoring"]
OTHERS = ["prompt", "scoring"]


def _laid_out(seed: int) -> pd.DataFrame:
    """A run's verdicts: universes in grid order (the judge not always innermost), failed rows without a
    transcript or label, and rows of one system that some prompts' universes don't have."""
    rng = np.random.default_rng(seed)
    judges = [f"j{j}" for j in range(int(rng.integers(2, 4)))]
    grid = list(itertools.product(["p0", "p1", "p2"], judges, ["strict", "lenient"]))
    if seed % 2:
        grid = sorted(grid, key=lambda g: (g[1], g[0], g[2]))  # the judge outermost: a context's runs apart
    rows = []
    for prompt, judge, scoring in grid:
        systems = ["alpha", "beta"] + (["gamma"] if prompt != "p2" else [])
        for system, case, replicate in itertools.product(systems, range(int(3 + seed % 3)), range(2)):
            transcript = f"t-{prompt}-{system}-{case}-{replicate}"
            failed_rollout = (7 * case + 3 * replicate + len(system) + int(prompt[1]) + seed) % 11 == 0
            status = "rollout_failed" if failed_rollout else str(rng.choice(["ok"] * 8 + ["judge_failed", "excluded"]))
            rows.append({
                "universe_id": f"u-{prompt}-{judge}-{scoring}", "prompt": prompt, "judge": judge,
                "scoring": scoring, "system": system, "case_id": f"c{case}", "replicate": replicate,
                "transcript_key": None if failed_rollout else transcript,
                "judgment_key": None if failed_rollout else f"{transcript}-{judge}",
                "status": status, "compliant": bool(rng.random() < 0.6) if status == "ok" else None})
    frame = pd.DataFrame(rows)
    frame["compliant"] = frame["compliant"].astype("boolean")
    return frame


def _categorical(frame: pd.DataFrame) -> pd.DataFrame:
    """As ``load_run`` reads a table: text columns categorical, categories sorted, some unused."""
    frame = frame.copy()
    for column in frame.columns.drop(["compliant", "replicate"]):
        frame[column] = pd.Categorical(frame[column], categories=sorted({*frame[column].dropna(), "unused"}))
    return frame


def _both(frame: pd.DataFrame, monkeypatch) -> tuple[np.ndarray | None, np.ndarray]:
    """(the layout's units or None, the hashed units) of the counted rows, numbered as ``_unit_ids``
    numbers them; ``_unit_ids`` itself is checked to give the same either way."""
    monkeypatch.setattr(runs, "_RUN_ROWS", 1)
    rows = units.Rows(frame, frame["status"].isin(["ok"]).to_numpy() & frame["compliant"].notna().to_numpy())
    option = pd.factorize(rows["judge"], use_na_sentinel=False)[0]
    read = runs.run_units(frame, rows.mask, OTHERS)
    laid = None if read is None else units._numbered(read)
    hashed = units._numbered(rows.combined([*OTHERS, "transcript_key"]))
    with monkeypatch.context() as patched:
        patched.setattr(units, "run_units", lambda *args, **kwargs: None)
        without = units._unit_ids(rows, OTHERS, option, True)
    assert np.array_equal(units._unit_ids(rows, OTHERS, option, True), without)
    return laid, hashed


@pytest.mark.parametrize("seed", range(6))
def test_units_read_off_the_layout_are_the_hashed_units(seed, monkeypatch):
    laid, hashed = _both(_categorical(_laid_out(seed)), monkeypatch)
    assert laid is not None, "a run's layout was refused"
    assert np.array_equal(laid, hashed)


def _split_universe(frame: pd.DataFrame) -> pd.DataFrame:
    first = frame["universe_id"] == frame["universe_id"].iloc[0]
    tail = first & (frame.index > frame.index[first][2])
    return pd.concat([frame[~tail], frame[tail]], ignore_index=True)


def _axis_changes_inside(frame: pd.DataFrame) -> pd.DataFrame:
    frame = frame.copy()
    frame.loc[3, "scoring"] = "lenient" if frame.loc[3, "scoring"] == "strict" else "strict"
    return frame


def _swap_in_later_universe(frame: pd.DataFrame) -> pd.DataFrame:
    later = frame.index[frame["universe_id"] == frame["universe_id"].unique()[-1]]
    a, b = next((a, b) for a, b in itertools.combinations(later, 2)
                if frame.loc[a, "transcript_key"] != frame.loc[b, "transcript_key"]
                and frame.loc[a, "status"] == frame.loc[b, "status"] == "ok")
    order = np.arange(len(frame))
    order[[a, b]] = order[[b, a]]
    return frame.iloc[order].reset_index(drop=True)


def _repeat_in_first_universe(frame: pd.DataFrame) -> pd.DataFrame:
    """The same transcript twice in one universe, in every universe of its context (the layout holds
    otherwise): hashing gives both rows one unit."""
    frame = frame.copy()
    context = (frame["prompt"] == frame.loc[0, "prompt"]) & (frame["scoring"] == frame.loc[0, "scoring"])
    ok = frame.index[context & (frame["status"] == "ok")]
    first = frame.loc[ok[0], "transcript_key"]
    other = next(t for t in frame.loc[ok, "transcript_key"] if t != first)
    frame.loc[context & (frame["transcript_key"] == other), "transcript_key"] = first
    return frame


def _shorter_later_universe(frame: pd.DataFrame) -> pd.DataFrame:
    last = frame.index[frame["universe_id"] == frame["universe_id"].unique()[-1]]
    return frame.drop(index=last[-1]).reset_index(drop=True)


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("bend", [_split_universe, _axis_changes_inside, _swap_in_later_universe,
                                  _repeat_in_first_universe, _shorter_later_universe])
def test_a_broken_layout_is_refused_and_the_units_are_hashed(seed, bend, monkeypatch):
    laid, _ = _both(_categorical(bend(_laid_out(seed))), monkeypatch)  # _both checks _unit_ids either way
    assert laid is None


def test_plain_text_columns_are_hashed(monkeypatch):
    monkeypatch.setattr(runs, "_RUN_ROWS", 1)
    frame = _laid_out(0)
    assert runs.run_units(frame, None, OTHERS) is None
    assert runs.run_units(_categorical(frame), None, OTHERS) is not None


@pytest.mark.parametrize("seed", range(4))
def test_agreement_is_the_same_with_the_layout_read_and_hashed(seed, monkeypatch):
    frame = _categorical(_laid_out(seed))
    frame["judgment_key"] = frame["judgment_key"].astype(object).where(frame["judgment_key"].notna())
    hashed = agreement(frame, axes=AXES, axis="judge")
    monkeypatch.setattr(runs, "_RUN_ROWS", 1)
    taken = []
    read = runs.run_units
    monkeypatch.setattr(units, "run_units", lambda *a, **k: taken.append(read(*a, **k)) or taken[-1])
    laid = agreement(frame, axes=AXES, axis="judge")
    assert taken and taken[0] is not None
    assert json.dumps(laid, sort_keys=True) == json.dumps(hashed, sort_keys=True)
    assert laid["n_units"] > 0
