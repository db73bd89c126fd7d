"""Attacks with look-alike identifiers beyond systems and judges (issue 45): case ids, factor levels,
criteria, on every importer, with and without ``--merge-look-alikes``.

One rule for every name an import reads (``multiverse.importers._guard``): two spellings with one UTS #39
skeleton are refused in one line that shows both, exit 2, nothing written; or, when asked, read as the
first seen, by every importer alike (ASSERT too), never making two rows of one key.
"""

from __future__ import annotations

import json
import unicodedata
from pathlib import Path

import pandas as pd
import pytest
from cli_runner import refused, run_cli
from hypothesis import given, settings
from hypothesis import strategies as st

from multiverse.core import skeleton
from multiverse.errors import InputError

IMPORTERS = Path(__file__).parent / "importers"
PROMPTFOO_A = IMPORTERS / "promptfoo_results" / "grader-a.json"
PROMPTFOO_B = IMPORTERS / "promptfoo_results" / "grader-b.json"
CYRILLIC = str.maketrans({"a": "\u0430", "e": "\u0435", "o": "\u043e"})  # а е о


def test_look_alike_items_of_a_table_are_refused_or_merged(tmp_path):
    # One item labelled by two judges, the second judge's sheet spelling it with a Cyrillic а.
    rows = [{"system": "s", "item": name, "judge": judge, "label": 1}
            for judge, name in (("j1", "capital-of-france"), ("j2", "capital-of-fr\u0430nce"))]
    rows += [{"system": "s", "item": "other", "judge": judge, "label": 0} for judge in ("j1", "j2")]
    table = tmp_path / "labels.csv"
    pd.DataFrame(rows).to_csv(table, index=False)
    argv = ["import", "table", table, "--system", "system", "--item", "item", "--label", "label", "--axis", "judge"]
    line = refused(run_cli([*argv, "--out", tmp_path / "out"]), "item: two spellings of one name",
                   "--merge-look-alikes")
    assert "'capital-of-france'" in line and "'capital-of-fr\\u0430nce'" in line
    assert not (tmp_path / "out").exists()
    merged = run_cli([*argv, "--merge-look-alikes", "--out", tmp_path / "merged"])
    assert merged.returncode == 0, merged.stderr
    verdicts = pd.read_parquet(tmp_path / "merged" / "verdicts.parquet")
    assert set(verdicts["case_id"]) == {"capital-of-france", "other"} and len(verdicts) == 4


def test_look_alike_factor_levels_of_a_table_are_merged_when_asked(tmp_path):
    rows = [{"system": s, "item": f"i{i}", "label": i % 2, "topic": "math" if i < 2 else "m\u0430th"}
            for s in ("a", "b") for i in range(4)]
    table = tmp_path / "labels.csv"
    pd.DataFrame(rows).to_csv(table, index=False)
    argv = ["import", "table", table, "--system", "system", "--item", "item", "--label", "label", "--factor", "topic"]
    refused(run_cli([*argv, "--out", tmp_path / "out"]), "topic: two spellings of one name")
    merged = run_cli([*argv, "--merge-look-alikes", "--out", tmp_path / "merged"])
    assert merged.returncode == 0, merged.stderr  # refused even with the flag before: levels did not merge
    assert set(pd.read_parquet(tmp_path / "merged" / "verdicts.parquet")["topic"]) == {"math"}


def _cyrillic_tests(source: Path, target: Path) -> Path:
    """``source`` with every test description spelt with Cyrillic а, е, о: the same tests, to a reader."""
    document = json.loads(source.read_text())
    for row in document["results"]["results"]:
        row["testCase"]["description"] = row["testCase"]["description"].translate(CYRILLIC)
    target.write_text(json.dumps(document))
    return target


def test_look_alike_promptfoo_tests_across_graders_are_refused_or_merged(tmp_path):
    files = [PROMPTFOO_A, _cyrillic_tests(PROMPTFOO_B, tmp_path / "grader-b.json")]
    refused(run_cli(["import", "promptfoo", *files, "--out", tmp_path / "out"]), "the cases", "two spellings",
            "--merge-look-alikes")
    assert not (tmp_path / "out").exists()
    merged = run_cli(["import", "promptfoo", *files, "--merge-look-alikes", "--out", tmp_path / "merged"])
    assert merged.returncode == 0, merged.stderr
    verdicts = pd.read_parquet(tmp_path / "merged" / "verdicts.parquet")
    plain = {row["testCase"]["description"] for row in json.loads(PROMPTFOO_A.read_text())["results"]["results"]}
    assert set(verdicts["case_id"]) == plain  # each test once, judged by both graders
    assert verdicts.groupby("case_id")["judge"].nunique().eq(2).all()


def _frames(systems: list[str], judges: list[str], criteria: list[str]) -> tuple[pd.DataFrame, pd.DataFrame]:
    from multiverse.core import universe_id

    verdicts = pd.DataFrame([{"universe_id": universe_id({"judge": judge}), "judge": judge, "system": system,
                              "case_id": f"c{case}", "replicate": 0}
                             for judge in judges for system in systems for case in range(2)])
    rows = [{**row, "criterion_id": criterion, "criterion": criterion}
            for row in verdicts.to_dict("records") for criterion in criteria]
    return verdicts, pd.DataFrame(rows)


def test_the_one_rule_merges_every_identifier_and_renames_merged_universes():
    from multiverse.importers._guard import one_name_each

    verdicts, criteria = _frames(["gpt-4o", "gpt-4\u043e"], ["judge-a", "judge-\u0430"], ["fabrication"])
    with pytest.raises(InputError, match="two spellings of one name") as caught:
        one_name_each(verdicts, criteria, ["judge"], [])
    assert caught.value.param == "merge_look_alikes"
    # Merged, the look-alike systems are one, so their rows are two of one key: refused, nothing read as one.
    with pytest.raises(InputError, match="made two rows of one"):
        one_name_each(verdicts, criteria, ["judge"], [], merge=True)
    # Systems apart, judges alike: the judges merge, and their universes are one universe, named by its option.
    verdicts, criteria = _frames(["gpt-4o"], ["judge-a"], ["fabrication", "f\u0430brication"])
    other, _ = _frames(["claude"], ["judge-\u0430"], [])
    with pytest.raises(InputError, match="criterion_id: two spellings of one name"):  # a scorer's name, as a criterion
        one_name_each(verdicts, criteria, ["judge"], [])
    verdicts = pd.concat([verdicts, other], ignore_index=True)
    merged, merged_criteria = one_name_each(verdicts, criteria.iloc[::2], ["judge"], [], merge=True)
    assert set(merged["judge"]) == {"judge-a"} and merged["universe_id"].nunique() == 1
    assert merged_criteria is not None and set(merged_criteria["criterion_id"]) == {"fabrication"}


def test_import_assert_takes_merge_look_alikes_as_every_importer_does(tmp_path):
    result = run_cli(["import", "assert", tmp_path / "no-such-run", "--merge-look-alikes", "--out", tmp_path / "out"])
    line = refused(result)
    assert "does not merge" not in line and "no-such-run" in line  # refused for the run, not for the flag


def _reference_skeleton(name: str) -> str:
    from multiverse.core._names import _ignorable, _prototypes

    text = unicodedata.normalize("NFD", unicodedata.normalize("NFKC", name))
    return unicodedata.normalize("NFD", "".join(_prototypes().get(ch, ch) for ch in text if not _ignorable(ch)))


@given(st.text(st.characters(max_codepoint=127), max_size=20))
@settings(max_examples=500, deadline=None)
def test_the_ascii_skeleton_is_the_full_algorithms(name):
    assert skeleton(name) == _reference_skeleton(name)


def test_many_case_ids_are_all_checked():
    from multiverse.importers._guard import one_name_each

    # 200,000 generated ids and one look-alike among them: found, not skipped for their number.
    ids = [f"case-{i:06d}" for i in range(200_000)] + ["c\u0430se-000007"]
    verdicts = pd.DataFrame({"system": "s", "case_id": ids, "replicate": 0, "universe_id": "u"})
    with pytest.raises(InputError, match="case_id: two spellings of one name, 'case-000007' and 'c\\\\u0430se-000007'"):
        one_name_each(verdicts, None, [], [])
