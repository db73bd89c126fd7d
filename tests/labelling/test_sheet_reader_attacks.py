"""Attacks on the filled-sheet reader (issue 45): every refusal says what is true, every harmless edit is read.

A filled sheet comes back from people and spreadsheets. Each attack below is
a file as someone could hand it back, read by ``multiverse calibrate`` (the
same reader ``curve``, ``ranking``, ``report`` and ``results.calibrate``
use): either it is refused with exit 2 and one line naming the file, the
row, the field and what was expected, or it gives exactly the anchored rates
of the clean sheet. The run has two rollout configurations, so system and
case alone name two transcripts and a row needs its key.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from anchor_world import scored_folder
from cli_runner import run_cli

N = 12


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    root = tmp_path_factory.mktemp("sheet-attacks")
    run, truth = scored_folder(root, scored=False)
    run_cli(["label", run, "--n", str(N), "--seed", "1", "--out", root / "SHEET.csv"]).ok()
    run_cli(["label", run, "--n", str(N), "--seed", "2", "--out", root / "OTHER.csv"]).ok()
    sheet = pd.read_csv(root / "SHEET.csv", dtype=str, keep_default_na=False)
    sheet["compliant"] = ["1" if truth[k] >= 4 else "0" for k in sheet["transcript_key"]]
    clean = root / "clean.csv"
    sheet.to_csv(clean, index=False)
    rates = json.loads(run_cli(["calibrate", run, "--human", clean, "--json"]).ok())["rates"]
    other = pd.read_csv(root / "OTHER.csv", dtype=str, keep_default_na=False)
    return run, sheet, rates, other


def _write(path: Path, frame: pd.DataFrame, *, sep: str = ",", ending: str = "\n", bom: bool = False,
           encoding: str = "utf-8") -> Path:
    text = frame.to_csv(index=False, sep=sep, lineterminator=ending)
    path.write_bytes((b"\xef\xbb\xbf" if bom else b"") + text.encode(encoding))
    return path


def _refused(run, path: Path, *fragments: str) -> str:
    code, out, err = run_cli(["calibrate", run, "--human", path])
    lines = err.strip().splitlines()
    assert code == 2 and out == "" and len(lines) == 1, err
    assert str(path) in lines[0] and "Traceback" not in err
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    return lines[0]


def _same(run, path: Path, rates: list) -> None:
    got = json.loads(run_cli(["calibrate", run, "--human", path, "--json"]).ok())["rates"]
    assert got == rates


def test_a_blank_transcript_key_is_refused_as_blank_and_its_key_named(world, tmp_path):
    run, sheet, _, _ = world
    shared = sheet.groupby(["system", "case_id"])["transcript_key"].transform("size")
    # A row whose system and case name one drawn transcript: its key is named; one whose name two: both are.
    for i in (int((shared == 1).to_numpy().argmax()), int((shared == 2).to_numpy().argmax())):
        assert shared[i] == (1 if i == int((shared == 1).to_numpy().argmax()) else 2)
        bad = sheet.copy()
        bad.loc[i, "transcript_key"] = ""
        key, system, case = sheet.loc[i, ["transcript_key", "system", "case_id"]]
        line = _refused(run, _write(tmp_path / "blank.csv", bad), f"row {i + 2}: transcript_key is blank",
                        "expected the key this row was written with", f"'{key}'", f"system {system}, case {case}")
        assert "not drawn" not in line and ("one per rollout configuration" in line) == (shared[i] == 2)
    bad = sheet.copy()
    bad.loc[4, "transcript_key"] = ""
    # Blank in a file without the sheet's identity: the system and case name two transcripts, and it says so.
    bare = bad.drop(columns=[c for c in bad.columns if c.startswith("sample_")])
    line = _refused(run, _write(tmp_path / "bare.csv", bare), "row 6: transcript_key is blank", "names 2 transcripts",
                    "expected the row's transcript_key")
    assert "add a transcript_key column" not in line
    # A key that is only spaces is blank too.
    spaced = sheet.copy()
    spaced.loc[4, "transcript_key"] = "   "
    _refused(run, _write(tmp_path / "spaces.csv", spaced), "row 6: transcript_key is blank")


@pytest.mark.parametrize(("column", "fragments"), [
    ("case_id", ("row 4: case_id is blank", "expected the case_id this row's transcript was drawn with")),
    ("replicate", ("row 4: replicate:", "drawn with replicate '0'", "the row is blank")),
])
def test_other_blank_cells_are_named(world, tmp_path, column, fragments):
    run, sheet, _, _ = world
    bad = sheet.copy()
    bad.loc[2, column] = ""
    _refused(run, _write(tmp_path / "bad.csv", bad), *fragments)


def test_a_blank_system_is_taken_from_the_key_as_a_blind_page_exports_it(world, tmp_path):
    run, sheet, rates, _ = world
    _same(run, _write(tmp_path / "blind.csv", sheet.assign(system="")), rates)
    bare = sheet.assign(system="").drop(columns=[c for c in sheet.columns if c.startswith("sample_")])
    _same(run, _write(tmp_path / "blind-bare.csv", bare), rates)


def test_spaces_bom_crlf_and_a_spreadsheets_resave_read_as_the_clean_sheet(world, tmp_path):
    run, sheet, rates, _ = world
    padded = sheet.copy()
    for column in ("system", "case_id", "transcript_key", "compliant", "sample_run"):
        padded[column] = " " + padded[column] + "  "
    padded.columns = [f" {c} " for c in padded.columns]
    _same(run, _write(tmp_path / "padded.csv", padded), rates)
    _same(run, _write(tmp_path / "bom.csv", sheet, bom=True), rates)
    _same(run, _write(tmp_path / "crlf.csv", sheet, ending="\r\n"), rates)
    # Excel in a comma-decimal locale: BOM, CRLF, semicolons, TRUE/FALSE, a replicate written back as 0.0 and
    # trailing empty rows.
    excel = sheet.assign(compliant=sheet["compliant"].map({"1": "TRUE", "0": "FALSE"}), replicate="0.0")
    excel = pd.concat([excel, pd.DataFrame([[""] * len(sheet.columns)] * 3, columns=sheet.columns)])
    _same(run, _write(tmp_path / "excel.csv", excel, sep=";", ending="\r\n", bom=True), rates)
    tabs = _write(tmp_path / "tabs.csv", sheet, sep="\t")
    _same(run, tabs, rates)


def test_a_sheet_resaved_in_a_spreadsheets_own_encoding_is_refused_with_the_byte(world, tmp_path):
    run, sheet, _, _ = world
    noted = sheet.assign(note=["café"] + [""] * (len(sheet) - 1))
    _refused(run, _write(tmp_path / "latin.csv", noted, encoding="cp1252"), "is not UTF-8", "expected a UTF-8 CSV")


def test_duplicates_and_keys_of_another_sample_are_refused_naming_the_rows(world, tmp_path):
    run, sheet, _, other = world
    twice = pd.concat([sheet, sheet.iloc[[3]]], ignore_index=True)
    _refused(run, _write(tmp_path / "twice.csv", twice), f"rows 5 and {len(sheet) + 2}", "transcript_key",
             "the same drawn transcript twice")
    foreign_key = next(k for k in other["transcript_key"] if k not in set(sheet["transcript_key"]))
    foreign = other[other["transcript_key"] == foreign_key].assign(compliant="1")[sheet.columns]
    grown = pd.concat([sheet, foreign.assign(**{c: sheet[c].iloc[0] for c in sheet.columns if c.startswith("sample_")})],
                      ignore_index=True)
    _refused(run, _write(tmp_path / "grown.csv", grown), f"row {len(sheet) + 2}: transcript_key", f"'{foreign_key}'",
             "was not drawn in this sample (seed 1)")
    # A key a spreadsheet turned into a number says so.
    numeric = sheet.copy()
    numeric.loc[0, "transcript_key"] = "1.23E+11"
    _refused(run, _write(tmp_path / "numeric.csv", numeric), "row 2: transcript_key", "read the key as a number")


@pytest.mark.parametrize("value", ["2", "maybe", "-1", "0.5", "yes please"])
def test_a_label_outside_the_allowed_values_is_refused_naming_row_and_field(world, tmp_path, value):
    run, sheet, _, _ = world
    bad = sheet.copy()
    bad.loc[7, "compliant"] = value
    _refused(run, _write(tmp_path / "bad.csv", bad), "row 9: compliant: expected 0/1, true/false or yes/no",
             f"got '{value}'")


def test_a_row_with_only_its_identity_left_is_one_of_the_sheets_rows_unlabelled(world, tmp_path):
    run, sheet, _, _ = world
    # A row whose label was deleted is not labelled yet: a note, and the rates of the other rows.
    unlabelled = sheet.copy()
    unlabelled.loc[0, "compliant"] = ""
    code, out, err = run_cli(["calibrate", run, "--human", _write(tmp_path / "one-less.csv", unlabelled)])
    assert code == 0, err
    assert "1 rows of" in out and "have no label yet" in out
