"""Every ``import table`` option that reshapes or filters values, against every kind of value column (issue 45).

``--no-grade`` was silently not applied to a ``--verdict`` column. The class: an option that reshapes or
filters values (``--no-grade``, ``--positive``/``--negative``, ``--unparsed``, ``--order``, ``--combine``,
``--cut``, ``--scale``, ``--reference``; ``--order`` is given throughout, as ``--combine`` needs it) on a column of labels, category labels, scores, pairwise scores or
three-way verdicts. Each cell of that table either applies (the import with the option differs from the
same import without it) or is refused in one line naming the flag and the column, exit 2, nothing written.
Never silently ignored.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from cli_runner import CliResult, run_cli

#: Each kind of value column: the flags that read it, and a value of it to name as no grade.
KINDS = {
    "labels": (["--label", "binary"], "0"),
    "categories": (["--label", "category", "--positive", "yes", "--negative", "no", "maybe"], "maybe"),
    "scores": (["--score", "grade", "--scale", "1:5"], "5"),
    "pairwise": (["--score", "preference", "--scale", "0:1", "--reference", "ref"], "0"),
    "verdicts": (["--verdict", "verdict", "--reference", "ref"], "tie"),
}
#: Each option: (flags given with and without it, the option's flags); NG stands for the kind's no-grade value.
OPTIONS = {
    "no-grade": ([], ["--no-grade", "NG"]),
    "positive": ([], ["--positive", "0"]),
    "negative": ([], ["--negative", "0"]),
    "unparsed against": ([], ["--unparsed", "against"]),
    "unparsed against, no-grade": (["--no-grade", "NG"], ["--unparsed", "against"]),
    "unparsed tie, no-grade": (["--no-grade", "NG"], ["--unparsed", "tie"]),
    "unparsed axis, no-grade": (["--no-grade", "NG"], ["--unparsed", "exclude", "--unparsed", "against"]),
    "combine both": ([], ["--combine", "both"]),
    "combine agree": ([], ["--combine", "agree"]),
    "combine mean": ([], ["--combine", "mean"]),
    "cut": ([], ["--cut", "CUT"]),
    "scale": ([], ["--scale", "0:10"]),
    "reference": ([], ["--reference", "ref"]),
}
#: A cut inside each kind's scale.
CUTS = {"scores": "4", "pairwise": "0.5", "verdicts": "0.5"}
#: The flags the kind itself gives: naming them again is not a combination.
GIVEN = {kind: {flag for flag in flags if flag.startswith("--")} for kind, (flags, _) in KINDS.items()}


def _table(path: Path) -> Path:
    """Two systems and a reference, each item judged in both orders, every kind of value column."""
    rows = []
    for system in ("atlas", "beacon", "ref"):
        for item in range(6):
            for order in ("ab", "ba"):
                k = (item + len(system) + (order == "ba")) % 3
                rows.append({"system": system, "item": f"c{item}", "order": order,
                             "binary": "10"[k % 2], "category": ("yes", "no", "maybe")[k],
                             "grade": str(3 + k), "preference": ("1", "0.5", "0")[k], "verdict": ("A", "tie", "B")[k]})
    pd.DataFrame(rows).to_csv(path / "t.csv", index=False)
    return path / "t.csv"


def _argv(kind: str, flags: list[str]) -> list[str]:
    value = KINDS[kind][1]
    return [{"NG": value, "CUT": CUTS.get(kind, "0.5")}.get(flag, flag) for flag in flags]


def _written(out: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    return pd.read_csv(out / "verdicts.csv", dtype=str), pd.read_csv(out / "rates.csv", dtype=str)


@pytest.mark.parametrize("option", list(OPTIONS))
@pytest.mark.parametrize("kind", list(KINDS))
def test_an_option_applies_to_the_column_or_is_refused_naming_both(tmp_path, kind, option):
    base, flags = OPTIONS[option]
    if set(flags) & GIVEN[kind]:
        pytest.skip(f"{kind} gives {flags[0]} itself")
    table = _table(tmp_path)
    column = KINDS[kind][0][1]
    # Every item is judged in both orders (--order: an axis of every kind, pairs checked for both orders).

    def imported(given: list[str], out: str) -> CliResult:
        # A value --no-grade names is no label (naming it both ways is refused on its own, below).
        kind_flags = [f for f in KINDS[kind][0] if "NG" not in given or f != KINDS[kind][1]]
        return run_cli(["import", "table", table, "--system", "system", "--item", "item", "--order", "order",
                        *kind_flags, *_argv(kind, given), "--out", tmp_path / out])
    without, with_it = imported(base, "without"), imported(base + flags, "with")
    if with_it.returncode == 0:
        without.ok()
        with_it.ok()
        before, after = _written(tmp_path / "without"), _written(tmp_path / "with")
        assert not (before[0].equals(after[0]) and before[1].equals(after[1])), \
            f"{' '.join(flags)} on a {kind} column was silently ignored"
    else:
        # `scale` is not a flag the CLI maps (the labelling sheet's scale is a run's), so it is named as a word.
        line = with_it.refused(flags[0] if flags[0] != "--scale" else "scale", column)
        assert not (tmp_path / "with").exists(), line


def test_a_verdict_named_as_no_grade_is_an_unparsed_reply_counted_as_unparsed_says(tmp_path):
    frame = pd.read_csv(_table(tmp_path), dtype=str)
    frame.loc[frame.index[:4], "verdict"] = "ERR"  # atlas's first two items, both orders: no grade
    frame.to_csv(tmp_path / "t.csv", index=False)
    common = ["import", "table", tmp_path / "t.csv", "--system", "system", "--item", "item", "--order", "order",
              "--verdict", "verdict", "--reference", "ref", "--no-grade", "ERR"]
    run_cli([*common, "--out", tmp_path / "excluded"]).ok()
    verdicts = pd.read_parquet(tmp_path / "excluded" / "verdicts.parquet")
    assert (verdicts["reason"] == "no grade: ERR").sum() == 4
    assert set(verdicts.loc[verdicts["reason"] == "no grade: ERR", "status"]) == {"judge_failed"}
    run_cli([*common, "--unparsed", "tie", "--out", tmp_path / "tie"]).ok()
    tied = pd.read_parquet(tmp_path / "tie" / "verdicts.parquet")
    assert list(tied.loc[tied["reason"].str.startswith("no grade: ERR"), "score"]) == [0.5] * 4


@pytest.mark.parametrize("flags", [["--no-grade", "yes"], ["--no-grade", "maybe", "--no-grade", "no"]])
def test_a_value_named_both_as_a_label_and_as_no_grade_is_refused(tmp_path, flags):
    line = run_cli(["import", "table", _table(tmp_path), "--system", "system", "--item", "item", "--order", "order",
                    *KINDS["categories"][0], *flags, "--out", tmp_path / "out"]).refused("--no-grade", "category")
    assert "named both" in line and not (tmp_path / "out").exists()


def test_an_inspect_scale_for_a_scorer_no_log_holds_is_refused(tmp_path):
    log = Path(__file__).parent / "importers" / "inspect_logs" / "grader-a.eval"
    line = run_cli(["import", "inspect", log, "--scale", "nosuch=0:10", "--out", tmp_path / "out"]).refused(
        "scale: nosuch: no scorer of the logs is named so", "model_graded_qa")
    assert not (tmp_path / "out").exists(), line
    run_cli(["import", "inspect", log, "--scale", "model_graded_qa=0:10", "--out", tmp_path / "named"]).ok()
