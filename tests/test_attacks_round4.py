"""Attacks of hardening round 4 (issue 45) on the surfaces added last round and old classes at new doors.

- Names too long to show: a system, judge, option or factor level of 100,000 characters imported, and the
  report then took four minutes and all its memory drawing it. Every importer refuses a name past
  ``MAX_NAME_CHARS`` (a case id past ``MAX_CASE_ID_CHARS``), in one line, exit 2, nothing written.
- The pairwise table (``--order --verdict --combine``) and ``--by``: hostile values in each column, the
  grouped printers and the report on whatever the import let through.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from cli_runner import refused, run_cli

from multiverse.importers import MAX_CASE_ID_CHARS, MAX_NAME_CHARS

IMPORTERS = Path(__file__).parent / "importers"
PAIRWISE = ["--system", "model", "--item", "item", "--verdict", "verdict", "--reference", "ref", "--order", "order",
            "--axis", "judge"]
#: characters a name may not show raw, in any output
RAW = ("\x01", "\x1b", "\ufffe", "\u202e", "\u200b")


def _games(n_items: int = 6, seed: int = 1) -> pd.DataFrame:
    """Two judges asking each pair both ways, three-way verdicts; ``ref`` is the reference system."""
    rng = np.random.default_rng(seed)
    return pd.DataFrame([{"judge": judge, "model": model, "item": f"i{item}", "order": order, "topic": f"t{item % 2}",
                          "verdict": "tie" if model == "ref" else str(rng.choice(["A", "B", "tie"]))}
                         for judge in ("lean", "fair") for model in ("atlas", "beacon", "ref")
                         for item in range(n_items) for order in ("ab", "ba")])


@pytest.mark.parametrize("column", ["model", "judge", "topic"])
def test_a_name_too_long_to_show_is_refused_in_one_line(tmp_path, column):
    frame = _games()
    frame[column] = frame[column].replace({frame[column].iloc[0]: "n" * (MAX_NAME_CHARS + 1)})
    frame.to_csv(tmp_path / "games.csv", index=False)
    line = refused(run_cli(["import", "table", tmp_path / "games.csv", *PAIRWISE, "--factor", "topic",
                            "--out", tmp_path / "out"]),
                   str(tmp_path / "games.csv"), f"{column}: a name of {MAX_NAME_CHARS + 1:,} characters",
                   f"expected at most {MAX_NAME_CHARS}")
    assert len(line) < 400 and not (tmp_path / "out").exists()
    # At the bound it is a name like any other, through the grouped printers and the report.
    frame[column] = frame[column].replace({"n" * (MAX_NAME_CHARS + 1): "\u0436" * MAX_NAME_CHARS})
    frame.to_csv(tmp_path / "games.csv", index=False)
    run_cli(["import", "table", tmp_path / "games.csv", *PAIRWISE, "--factor", "topic", "--combine", "agree",
             "--out", tmp_path / "run"]).ok()
    for argv in (["agreement", "--axis", "order", "--by", "judge"], ["ranking", "--method", "bt", "--prior", "1", "--by", "topic"]):
        assert run_cli([argv[0], tmp_path / "run", *argv[1:]]).ok()


def test_a_case_id_may_be_a_whole_prompt_but_not_past_its_own_bound(tmp_path):
    frame = _games()
    prompt = "Explain the rules of chess to a child. " * 100  # about 4,000 characters
    frame["item"] = frame["item"].replace({"i0": prompt, "i1": "q" * (MAX_CASE_ID_CHARS + 1)})
    frame.to_csv(tmp_path / "games.csv", index=False)
    refused(run_cli(["import", "table", tmp_path / "games.csv", *PAIRWISE, "--out", tmp_path / "out"]),
            f"item: a name of {MAX_CASE_ID_CHARS + 1:,} characters")
    frame = frame[frame["item"] != "q" * (MAX_CASE_ID_CHARS + 1)]
    frame.to_csv(tmp_path / "games.csv", index=False)
    run_cli(["import", "table", tmp_path / "games.csv", *PAIRWISE, "--out", tmp_path / "run"]).ok()
    assert prompt.strip() in set(pd.read_parquet(tmp_path / "run" / "verdicts.parquet")["case_id"])


@pytest.mark.parametrize("where", ["provider", "var"])
def test_a_promptfoo_name_too_long_to_show_is_refused(tmp_path, where):
    document = json.loads((IMPORTERS / "promptfoo_results" / "grader-a.json").read_text())
    long = "p" * 5_000
    for row in document["results"]["results"]:
        if where == "provider":
            row["provider"]["id"] = long
        elif where == "var":
            row["vars"] = {**(row.get("vars") or {}), "topic": long}
    path = tmp_path / "results.json"
    path.write_text(json.dumps(document))
    result = run_cli(["import", "promptfoo", path, *(["--factor", "topic"] if where == "var" else []),
                      "--out", tmp_path / "out"])
    refused(result, "a name of 5,0", f"expected at most {MAX_NAME_CHARS}")
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
@pytest.mark.parametrize("column", ["model", "judge", "item", "verdict", "order", "topic"])
@pytest.mark.parametrize("value", ["\x01x", "\x1b[31mred", "a\ufffeb", "zero\u200bwidth", "\u202eevil", "", " ",
                                   "nan", "inf", "<script>alert(1)</script>", "a\nb"])
def test_hostile_values_in_a_pairwise_table_are_refused_or_shown_escaped(tmp_path, column, value):
    frame = _games(n_items=4)
    frame[column] = frame[column].astype(object)
    rows = frame.index[(frame["model"] != "ref") & (frame["item"] == "i0")]
    frame.loc[rows, column] = value
    frame.to_csv(tmp_path / "games.csv", index=False)
    imported = run_cli(["import", "table", tmp_path / "games.csv", *PAIRWISE, "--factor", "topic",
                        "--combine", "agree", "--combine", "mean", "--out", tmp_path / "run"])
    assert imported.returncode in (0, 2) and "Traceback" not in imported.stderr, imported.stderr
    if imported.returncode == 2:
        refused(imported, str(tmp_path / "games.csv"))
        assert not (tmp_path / "run").exists()
        return
    for argv in (["agreement", "--axis", "order", "--by", "judge"], ["agreement", "--by", "topic", "--json"],
                 ["ranking", "--method", "bt", "--prior", "1", "--by", "topic"], ["calibrate", "--by", "topic"]):
        shown = run_cli([argv[0], tmp_path / "run", *argv[1:]])
        assert shown.returncode in (0, 2) and "Traceback" not in shown.stderr, (argv, shown.stderr)
        if argv[0] == "agreement":  # what was imported is read: each judge's orders compared
            assert shown.returncode == 0, shown.stderr
        assert not any(ch in shown.stdout + shown.stderr for ch in RAW), argv


@pytest.mark.parametrize("manifest", ["deep", "huge"])
def test_an_eval_set_manifest_is_read_within_a_bound_and_any_nesting_is_one_line(tmp_path, manifest):
    folder = tmp_path / "logs"
    folder.mkdir()
    (folder / "grader-a.eval").write_bytes((IMPORTERS / "inspect_logs" / "grader-a.eval").read_bytes())
    # nested past the parser's depth (was `error: RecursionError`); 6 MB of padding (was read whole, any size)
    text = "[" * 100_000 if manifest == "deep" else json.dumps({"tasks": [], "pad": "p" * 6 * 2**20})
    (folder / "eval-set.json").write_text(text)
    line = refused(run_cli(["import", "inspect", folder, "--out", tmp_path / "out"]), "eval-set.json")
    assert ("expected Inspect's eval-set manifest" if manifest == "deep" else "expected a manifest of an eval set under 5 MB") \
        in line
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("flag", ["--positive", "--negative", "--no-grade"])
def test_a_label_value_that_is_not_text_is_one_line_naming_its_flag(tmp_path, flag):
    # Bytes that are not UTF-8 on a command line arrive as a lone surrogate: comparing one with the
    # label column ended in a UnicodeEncodeError traceback.
    rows = [{"model": m, "item": f"i{i}", "label": ["yes", "no", "N/A"][i % 3]} for m in ("a", "b") for i in range(6)]
    pd.DataFrame(rows).to_csv(tmp_path / "t.csv", index=False)
    values = {"--positive": "yes", "--negative": "no", "--no-grade": "N/A"}
    values[flag] = "n\udcffo"
    argv = ["import", "table", tmp_path / "t.csv", "--system", "model", "--item", "item", "--label", "label",
            *(part for option, value in values.items() for part in (option, value)), "--out", tmp_path / "out"]
    refused(run_cli(argv), f"{flag}: 'n\\udcffo' is not text")
    assert not (tmp_path / "out").exists()


def test_a_group_with_nothing_to_analyse_is_named_and_the_other_groups_are_computed(tmp_path):
    # A design factor one of whose levels holds only the reference system's games (ties, left out): the
    # refusal said "expected at least one row with status ok" of a run that has many; then it stopped every
    # group (issue 45, round 5): the group is now named in a note and in --json, the others computed.
    frame = _games()
    frame["topic"] = np.where(frame["model"] == "ref", "only-ref", "t0")
    frame.to_csv(tmp_path / "games.csv", index=False)
    run_cli(["import", "table", tmp_path / "games.csv", *PAIRWISE, "--factor", "topic", "--out", tmp_path / "run"]).ok()
    for argv in (["ranking", "--by", "topic"], ["ranking", "--method", "bt", "--by", "topic"]):
        assert "note: topic='only-ref': not computed: " in run_cli([argv[0], tmp_path / "run", *argv[1:]]).ok()
        document = json.loads(run_cli([argv[0], tmp_path / "run", *argv[1:], "--json"]).ok())
        assert [g["group"] for g in document["groups"]] == ["t0"]
        assert [g["group"] for g in document["not_computed"]] == ["only-ref"]
    assert run_cli(["agreement", tmp_path / "run", "--axis", "order", "--by", "topic"]).ok()


@pytest.mark.parametrize(("value", "shown"), [("", "an empty cell"), ("1e30", "'1e30'"), ("-1", "'-1'"),
                                              ("nan", "'nan'"), ("\uff12", "'\uff12'")])
def test_a_replicate_that_is_not_one_is_shown_as_the_file_holds_it(tmp_path, value, shown):
    frame = _games()
    frame["rep"] = "0"
    frame.loc[frame.index[0], "rep"] = value
    frame.to_csv(tmp_path / "games.csv", index=False)
    refused(run_cli(["import", "table", tmp_path / "games.csv", *PAIRWISE, "--replicate", "rep", "--out",
                     tmp_path / "out"]), f"rep: {shown} in data row 1; expected a whole number from 0 to 1,000,000")
