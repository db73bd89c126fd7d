"""One run against another of the same design: per universe and system, how far the candidate moved.

Universes are matched by their options (a universe's id is the digest of its
options, so the ids of two runs of one design agree; an import is matched by
the same options), systems by name and cases by ``case_id``. Per universe x
system the difference ``rate(candidate) - rate(baseline)`` is taken on the
cases both runs rated, paired and clustered by case
(:func:`multiverse.analysis.difference_curve`), and per system the curve's
sign-flip joint test asks whether the candidate is worse across the universes
(:func:`multiverse.analysis.joint_difference_test`, one-sided), Holm across
systems and statistics. Whatever is in only one run is counted in a note.

The frame, the tests and ``to_dict`` (``diff --json``) stay in compliance
terms; ``rate_direction`` (the candidate's reading, or ``rate``) is how the
figure, the text and the report's section show them (``core.orient``: a
difference changes sign, its interval flips, worse stays worse).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, cast

import pandas as pd

from multiverse.analysis import (
    CONTRIBUTION,
    adjust_tests,
    case_matrix,
    difference_curve,
    included_verdicts,
    joint_difference_test,
)
from multiverse.core import check_rate_direction, json_ready, orient, orient_rates
from multiverse.errors import InputError
from multiverse.results import JointTestEntry, Multiplicity, Results, load_run

__all__ = ["Diff", "NotWorseTest", "diff"]

_CANDIDATE, _BASELINE = "candidate", "baseline"
_COLUMNS = ["universe_id", "label", "system", "n_cases", "rate_baseline", "rate_candidate", "difference",
            "ci_low", "ci_high", "z"]


class NotWorseTest(JointTestEntry):
    """One system's joint test that the candidate is worse: the curve's one-sided difference test and its verdict.

    An entry of ``diff --json``'s ``tests``: the joint test's fields in their order (``systems`` names the one
    system compared), then ``p_worse`` and ``worse``; ``model_dump(exclude_unset=True)`` is the entry as printed.
    """

    #: The smallest Holm-adjusted p of the statistics, and whether it is at most the diff's alpha.
    p_worse: float
    worse: bool

    @property
    def system(self) -> str:
        return self.systems[0]

    @classmethod
    def judged(cls, test: Mapping[str, Any], alpha: float) -> NotWorseTest:
        """``test`` (a joint difference test's entry, Holm-adjusted) with its verdict at ``alpha``."""
        entry = JointTestEntry.model_validate(test)
        # adjust_tests gave every statistic a p_holm; None (a p never computed) reads as NaN, as it was written
        p_worse = min(float("nan") if s.p_holm is None else s.p_holm for s in entry.statistics.values())
        return cls.model_validate({**test, "p_worse": p_worse, "worse": bool(p_worse <= alpha)})


@dataclass(frozen=True, eq=False)
class Diff:
    """A comparison of two runs: ``frame`` (one row per universe x system), ``tests`` (one per system) and notes."""

    baseline: str
    candidate: str
    frame: pd.DataFrame
    #: Each system's joint test that the candidate is worse.
    tests: list[NotWorseTest]
    multiplicity: Multiplicity | None
    alpha: float
    mismatch: Mapping[str, int]
    notes: list[str] = field(default_factory=list)
    simulated: bool = False
    #: Which way the figure and text read the rates (``core.orient``); the frame and ``to_dict`` stay compliance.
    rate_direction: str = "compliance"

    @property
    def worse(self) -> list[str]:
        """The systems the joint test finds worse in the candidate (any statistic, Holm-adjusted, at alpha)."""
        return [t.system for t in self.tests if t.worse]

    def read_frame(self) -> pd.DataFrame:
        """``frame`` as ``rate_direction`` reads it: each rate and the difference with its interval flipped
        (``core.orient``), sorted again so each system's universes run from the lowest difference as read."""
        read = self.rate_direction
        if read == "compliance":
            return self.frame
        out = orient_rates(self.frame, read, value="difference", counts=(), position="", difference=True)
        out["rate_baseline"], out["rate_candidate"] = (orient(out["rate_baseline"], read),
                                                       orient(out["rate_candidate"], read))
        return out.sort_values(["system", "difference", "universe_id"], kind="stable", ignore_index=True)

    def summary(self, *, as_read: bool = False) -> pd.DataFrame:
        """Per system: universes compared, the range and median of the differences, universes whose interval
        excludes 0 (either way), and the joint test's smallest Holm-adjusted p that the candidate is worse.
        In compliance terms, or with ``as_read`` as ``rate_direction`` reads them (:meth:`read_frame`)."""
        frame = self.read_frame() if as_read else self.frame
        rows = []
        for test in self.tests:
            system = test.system
            part = frame[frame["system"] == system]
            rows.append({
                "system": system, "universes": len(part), "min": part["difference"].min(),
                "median": part["difference"].median(), "max": part["difference"].max(),
                "below_0": int((part["ci_high"] < 0).sum()), "above_0": int((part["ci_low"] > 0).sum()),
                "p_worse": test.p_worse, "worse": test.worse,
            })
        return pd.DataFrame(rows)

    def to_dict(self) -> dict[str, Any]:
        return cast("dict[str, Any]", json_ready({
            "baseline": self.baseline, "candidate": self.candidate, "alpha": self.alpha,
            "rate_direction": "compliance",  # every rate and difference below, whatever the figure and text read
            "difference": "rate(candidate) - rate(baseline), paired on shared cases, interval clustered by case",
            "systems": self.summary().to_dict(orient="records"), "tests": [t.model_dump(exclude_unset=True) for t in self.tests],
            "multiplicity": None if self.multiplicity is None else self.multiplicity.model_dump(), "mismatch": dict(self.mismatch), "notes": self.notes,
            "universes": self.frame.to_dict(orient="records"),
        }))

    def figure(self, **options: Any) -> Any:
        """The difference curves, one panel per system (:func:`multiverse.plots.plot_diff`)."""
        from multiverse.plots import plot_diff, stamp_simulated

        figure = plot_diff(self.read_frame(), tests=self.tests, **{"rates_read": self.rate_direction, **options})
        return stamp_simulated(figure) if self.simulated else figure


def _options_key(results: Results) -> dict[tuple[Any, ...], str]:
    """Each universe's options (axis, option as text), sorted, mapped to its id."""
    universes = results.universes
    axes = sorted(results.axes)
    options = zip(*(universes[a].astype(str) for a in axes)) if axes else ((),) * len(universes)
    return {tuple(zip(axes, chosen)): str(u) for chosen, u in zip(options, universes["universe_id"])}


def _counted(results: Results) -> pd.DataFrame:
    """The rows that count and what each contributes, as every analysis counts them
    (:func:`multiverse.analysis.included_verdicts`: status ok with a label, or a scored row's contribution)."""
    rows = included_verdicts(results.verdicts, axes=results.axes, keys=())
    return rows.drop(columns=[c for c in results.axes if c in rows.columns])


def _mismatch(base: Results, cand: Results, b_keys: dict[Any, Any], c_keys: dict[Any, Any], b_rows: pd.DataFrame,
              c_rows: pd.DataFrame) -> tuple[dict[str, int], list[str]]:
    b_cases, c_cases = set(b_rows["case_id"].astype(str)), set(c_rows["case_id"].astype(str))
    b_sys, c_sys = set(base.systems), set(cand.systems)
    counts = {
        "universes_only_in_baseline": len(set(b_keys) - set(c_keys)),
        "universes_only_in_candidate": len(set(c_keys) - set(b_keys)),
        "systems_only_in_baseline": len(b_sys - c_sys), "systems_only_in_candidate": len(c_sys - b_sys),
        "cases_only_in_baseline": len(b_cases - c_cases), "cases_only_in_candidate": len(c_cases - b_cases),
    }
    notes = []
    if set(base.axes) != set(cand.axes):
        notes.append(f"the runs vary different axes (baseline: {', '.join(base.axes) or 'none'}; "
                     f"candidate: {', '.join(cand.axes) or 'none'})")
    for what in ("universes", "systems", "cases"):
        only_b, only_c = counts[f"{what}_only_in_baseline"], counts[f"{what}_only_in_candidate"]
        if only_b or only_c:
            notes.append(f"{what} in one run only, left out of the comparison: {only_b} only in the baseline, "
                         f"{only_c} only in the candidate")
    return counts, notes


def diff(baseline: Results | str | os.PathLike[str], candidate: Results | str | os.PathLike[str], *, alpha: float = 0.05,
         boot: int = 1000, seed: int = 0, rate: str | None = None) -> Diff:
    """Compare ``candidate`` with ``baseline`` (two runs or imports of the same design).

    ``rate`` (``compliance`` or ``violation``): how the figure and text read the rates; None: as the candidate
    reads them (``Results.rate_direction``: its spec's ``report.rate``)."""
    if not 0 < alpha < 1:
        raise InputError(f"alpha: expected a number in (0, 1), got {alpha!r}", param="alpha")
    if rate is not None:
        check_rate_direction(rate)
    base = baseline if isinstance(baseline, Results) else load_run(baseline)
    cand = candidate if isinstance(candidate, Results) else load_run(candidate)
    b_keys, c_keys = _options_key(base), _options_key(cand)
    shared = sorted(set(b_keys) & set(c_keys))
    b_rows, c_rows = _counted(base), _counted(cand)
    counts, notes = _mismatch(base, cand, b_keys, c_keys, b_rows, c_rows)
    # Compared on the verdicts, never on a stored rates table: a stale one is only named.
    notes += [f"{which}: {note}" for which, run in (("baseline", base), ("candidate", cand))
              if (note := run.rates_note(full=False)) is not None]
    if not shared:
        raise InputError(f"{_shown(cand)}: expected universes with the options of the baseline {_shown(base)}'s; "
                         f"none of its {len(c_keys)} matches the baseline's {len(b_keys)}")
    # The baseline's universes renamed to the candidate's ids (equal when both runs name them by options).
    rename = {b_keys[k]: c_keys[k] for k in shared}
    b_rows = b_rows[b_rows["universe_id"].isin(rename)].assign(
        universe_id=lambda f: f["universe_id"].map(rename))
    c_rows = c_rows[c_rows["universe_id"].isin(set(rename.values()))]
    cases = set(b_rows["case_id"].astype(str)) & set(c_rows["case_id"].astype(str))
    systems = [s for s in cand.systems if s in set(base.systems)]
    labels = cand.universes.set_index("universe_id")["label"]
    frames, tests = [], []
    for system in systems:
        both = pd.concat([
            b_rows[(b_rows["system"] == system) & b_rows["case_id"].astype(str).isin(cases)].assign(system=_BASELINE),
            c_rows[(c_rows["system"] == system) & c_rows["case_id"].astype(str).isin(cases)].assign(system=_CANDIDATE),
        ], ignore_index=True)
        if both["system"].nunique() < 2:
            notes.append(f"{system}: no case rated in both runs; not compared")
            continue
        both["case_id"] = both["case_id"].astype(str)
        if CONTRIBUTION in both.columns:
            # Scores on either side: every row's contribution, a binary label's as 0 or 1.
            both[CONTRIBUTION] = both["compliant"].astype(float)
        m = case_matrix(both, axes=[], systems=[_CANDIDATE, _BASELINE])
        curve = difference_curve(m, axes=[], a=_CANDIDATE, b=_BASELINE)
        frame = curve.rename(columns={"rate_a": "rate_candidate", "rate_b": "rate_baseline"})
        frame["system"] = system
        frame["label"] = frame["universe_id"].map(labels).fillna(frame["universe_id"])
        frames.append(frame[_COLUMNS])
        joint = joint_difference_test(m, a=_CANDIDATE, b=_BASELINE, direction="less", boot=boot, seed=seed,
                                      alpha=alpha)
        # the one system compared, and its null in words (each key keeps its place in the test's entry)
        tests.append({**joint.to_dict(), "systems": [system],
                      "null": f"rate({system}) is the same in both runs in every universe"})
    adjusted = adjust_tests(tests)  # Holm's p_holm written into each test's statistics
    frame = (pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=_COLUMNS))
    frame = frame.sort_values(["system", "difference", "universe_id"], kind="stable", ignore_index=True)
    multiplicity = None if adjusted is None else Multiplicity.model_validate(adjusted)
    if multiplicity is not None:
        multiplicity = multiplicity.model_copy(
            update={"family": multiplicity.family.replace("difference tests", "systems' not-worse tests")})
    return Diff(baseline=_shown(base), candidate=_shown(cand), frame=frame,
                tests=[NotWorseTest.judged(t, alpha) for t in tests], multiplicity=multiplicity,
                alpha=alpha, mismatch=counts, notes=notes, simulated=base.simulated or cand.simulated,
                rate_direction=rate or cand.rate_direction)


def _shown(results: Results) -> str:
    return str(results.source) if results.source is not None else results.name
