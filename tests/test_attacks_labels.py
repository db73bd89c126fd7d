"""Attacks on the labelling round trip (issue 23 item 4): a filled sheet must be the sample it was drawn as.

Each attack starts from a sheet ``label`` wrote, filled as a person would,
and changes it the way a spreadsheet, a colleague or a careless merge does.
Every change that makes the rows something other than the drawn sample is
refused by ``calibrate`` (and by ``curve``/``ranking``/``report --human``,
which read labels the same way) in one line naming the file and the field,
exit 2; what keeps the sample (fewer rows, a spreadsheet's encoding) is
used, with a note where something is left out.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from cli_runner import run_cli

import multiverse as mv
from multiverse.errors import InputError
from multiverse.labelling import IDENTITY_COLUMNS
from multiverse.tables._tables import write_json, write_table

N = 12  # per system and user; calibrate needs 10 labels per system and rollout configuration


def _write_run(folder: Path, rng: np.random.Generator, *, cases: int = 30, salt: str = "") -> dict[str, int]:
    """A run: 2 users (a rollout axis) x 2 judges x 2 systems; returns the people's truth by transcript key."""
    rows, transcripts, truth = [], [], {}
    for user in ("coop", "adv"):
        for system in ("atlas", "beacon"):
            for i in range(cases):
                key = f"{user[0]}{system[0]}{i:03d}"
                truth[key] = int(rng.random() < 0.7)
                transcripts.append({"key": key, "system": system, "status": "ok", "reason": "", "turns": [
                    {"role": "user", "content": f"question {i} from {user}"},
                    {"role": "assistant", "content": f"answer {key}{salt}"}]})
                for judge in ("j1", "j2"):
                    rows.append({"universe_id": f"{judge}-{user}", "judge": judge, "user": user, "system": system,
                                 "case_id": f"c{i:03d}", "replicate": 0, "transcript_key": key,
                                 "judgment_key": f"{judge}-{key}", "status": "ok", "reason": "",
                                 "compliant": bool(truth[key]) if rng.random() < 0.85 else not truth[key]})
    folder.mkdir(parents=True)
    verdicts = pd.DataFrame(rows)
    verdicts["compliant"] = verdicts["compliant"].astype("boolean")
    write_table(verdicts, folder, "verdicts")
    (folder / "transcripts.jsonl").write_text("\n".join(json.dumps(t) for t in transcripts) + "\n")
    write_json({"schema_version": 1, "axes": ["judge", "user"], "factors": []}, folder / "manifest.json")
    return truth


@pytest.fixture(scope="module")
def drawn(tmp_path_factory):
    """The run, its truth, and two filled sheets of it: seed 0 (the one attacked) and seed 1."""
    root = tmp_path_factory.mktemp("labels")
    truth = _write_run(root / "run", np.random.default_rng(5))
    sheets = {}
    for seed in (0, 1):
        run_cli(["label", root / "run", "--n", str(N), "--seed", str(seed), "--out", root / f"s{seed}.csv"]).ok()
        frame = pd.read_csv(root / f"s{seed}.csv", dtype=str, keep_default_na=False)
        frame["compliant"] = [str(truth[k]) for k in frame["transcript_key"]]
        sheets[seed] = frame
    return root, truth, sheets


def _save(frame: pd.DataFrame, path: Path) -> Path:
    frame.to_csv(path, index=False)
    return path


def _not_drawn(root: Path, sheet: pd.DataFrame) -> pd.DataFrame:
    """Rows of the run's own transcripts that the sample did not draw, as a person would add them."""
    verdicts = pd.read_csv(root / "run" / "verdicts.csv", dtype=str).drop_duplicates("transcript_key")
    extra = verdicts[~verdicts["transcript_key"].isin(sheet["transcript_key"])].head(3)
    out = pd.DataFrame({c: "" for c in sheet.columns}, index=range(len(extra)))
    for column in ("system", "case_id", "replicate", "transcript_key"):
        out[column] = extra[column].to_numpy()
    for column in IDENTITY_COLUMNS:
        out[column] = sheet[column].iloc[0]
    out["compliant"] = "1"
    return out


def _edit_cell(column: str, row: int, value: str):
    def change(frame: pd.DataFrame, _other: pd.DataFrame, _root: Path) -> pd.DataFrame:
        frame = frame.copy()
        frame.loc[row, column] = value
        return frame
    return change


def _swap_key(frame: pd.DataFrame, _other: pd.DataFrame, _root: Path) -> pd.DataFrame:
    # Row 0 now claims row 1's transcript, whose own row is gone: no key repeats, but row 0's case is not that key's.
    frame = frame.copy()
    other = frame.index[(frame["system"] == frame.at[0, "system"]) & (frame["case_id"] != frame.at[0, "case_id"])][0]
    frame.loc[0, "transcript_key"] = frame.at[other, "transcript_key"]
    return frame.drop(index=other)


ATTACKS = {
    "extra labelled rows": (lambda f, o, r: pd.concat([f, _not_drawn(r, f)], ignore_index=True),
                            ("was not drawn in this sample", "3 such rows")),
    "an extra row left blank": (lambda f, o, r: pd.concat([f, _not_drawn(r, f).assign(compliant="")],
                                                       ignore_index=True), ("was not drawn",)),
    "another seed's rows under this identity": (lambda f, o, r: o.assign(**{c: f[c].iloc[0] for c in IDENTITY_COLUMNS}),
                                                ("not drawn in this sample (seed 0)",)),
    "this seed's rows under another seed's identity": (
        lambda f, o, r: f.assign(**{c: o[c].iloc[0] for c in IDENTITY_COLUMNS}), ("not drawn in this sample (seed 1)",)),
    "the seed edited": (lambda f, o, r: f.assign(sample_seed="1"), ("sample_keys", "seed 1")),
    "n edited": (lambda f, o, r: f.assign(sample_n=str(N - 2)), ("sample_keys", f"n {N - 2}")),
    "the keys digest edited": (lambda f, o, r: f.assign(sample_keys="0123456789abcdef"), ("sample_keys",)),
    "the run id edited": (lambda f, o, r: f.assign(sample_run="0123456789abcdef"), ("sample_run", "another run")),
    "one row's seed differs": (_edit_cell("sample_seed", 7, "1"), ("row 9", "sample_seed", "as on row 2")),
    "one row's run blank": (_edit_cell("sample_run", 3, ""), ("row 5", "sample_run is blank")),
    "an identity column dropped": (lambda f, o, r: f.drop(columns="sample_keys"), ("sample_keys: column missing",)),
    "a seed that is not a number": (lambda f, o, r: f.assign(sample_seed="-1"), ("sample_seed", "whole number")),
    "n as a huge number": (lambda f, o, r: f.assign(sample_n="9" * 400), ("sample_n", "whole number")),
    "a row duplicated": (lambda f, o, r: pd.concat([f, f.iloc[[4]]], ignore_index=True),
                         ("rows 6 and", "the same drawn transcript twice")),
    "a row duplicated, the copy unlabelled": (lambda f, o, r: pd.concat([f, f.iloc[[4]].assign(compliant="")],
                                                                     ignore_index=True), ("twice",)),
    "a key edited to one not drawn": (_edit_cell("transcript_key", 2, "zz999"), ("row 4", "'zz999' was not drawn")),
    "a key edited to another drawn row's": (_swap_key, ("row 2", "case_id", "was drawn with case_id", "the row edited")),
    "a system edited": (_edit_cell("system", 6, "beacon-2"), ("row 8", "system", "'beacon-2'")),
    "a label that is not binary": (_edit_cell("compliant", 1, "2"), ("compliant", "'2'", "row 3")),
    "a label as a formula": (_edit_cell("compliant", 5, "=1+0"), ("compliant", "row 7")),
}


@pytest.mark.parametrize("attack", list(ATTACKS))
def test_a_sheet_that_is_not_the_drawn_sample_is_refused_in_one_line(drawn, tmp_path, attack):
    root, _, sheets = drawn
    change, fragments = ATTACKS[attack]
    bad = _save(change(sheets[0].copy(), sheets[1].copy(), root), tmp_path / "filled.csv")
    run_cli(["calibrate", root / "run", "--human", bad]).refused(str(bad), *fragments)


def test_every_command_that_reads_labels_refuses_the_same_and_writes_nothing(drawn, tmp_path):
    root, _, sheets = drawn
    bad = _save(pd.concat([sheets[0], _not_drawn(root, sheets[0])], ignore_index=True), tmp_path / "grown.csv")
    figure, report = tmp_path / "never.png", tmp_path / "never.html"
    for argv in (["calibrate", root / "run", "--human", bad, "--figure", figure],
                 ["curve", root / "run", "--human", bad, "--boot", "20"],
                 ["ranking", root / "run", "--human", bad, "--boot", "0"],
                 ["report", root / "run", "--human", bad, "--out", report, "--no-tests", "--quiet"]):
        run_cli(argv).refused(str(bad), "was not drawn")
    assert not figure.exists() and not report.exists()
    # The notebook's way in refuses the same, from a file and from a frame.
    results = mv.load_run(root / "run")
    for labels in (bad, pd.read_csv(bad, dtype=str, keep_default_na=False)):
        with pytest.raises(InputError, match="was not drawn"):
            results.calibrate(labels)


def test_a_sheet_of_another_run_is_refused_even_with_the_same_keys(drawn, tmp_path):
    """Same spec, same transcript keys, other answers (a re-run with a real model): the labels are about other text."""
    root, _, sheets = drawn
    _write_run(tmp_path / "rerun", np.random.default_rng(5), salt=" (said differently)")
    filled = _save(sheets[0], tmp_path / "filled.csv")
    run_cli(["calibrate", tmp_path / "rerun", "--human", filled]).refused(str(filled), "sample_run", "another run")
    # A copy of the labelled run elsewhere is the same run: the id is its content, not its path.
    copy = tmp_path / "copy"
    copy.mkdir()
    for name in ("verdicts.parquet", "verdicts.csv", "transcripts.jsonl", "manifest.json"):
        (copy / name).write_bytes((root / "run" / name).read_bytes())
    run_cli(["calibrate", copy, "--human", filled]).ok()


def test_partial_sheets_and_spreadsheet_exports_are_used_and_counted(drawn, tmp_path):
    root, _, sheets = drawn
    whole = json.loads(run_cli(["calibrate", root / "run", "--human", _save(sheets[0], tmp_path / "whole.csv"),
                                "--json"]).ok())
    # The whole sample raises no note about the sheet (an interval note such as anchored_wider may stand).
    assert not [n for n in whole["notes"] if "drawn" in n or "sample" in n] and {r["n_human"] for r in whole["rates"]} == {N}
    # Rows removed (two per system and user at most keeps 10): used, and the note says how many.
    frame = sheets[0]
    keep = frame.groupby(["system", frame["transcript_key"].str[0]]).cumcount() < N - 1
    fewer = json.loads(run_cli(["calibrate", root / "run", "--human", _save(frame[keep], tmp_path / "fewer.csv"),
                                "--json"]).ok())
    removed = int((~keep).sum())
    assert f"{len(frame) - removed} of the {len(frame)} drawn transcripts are labelled; {removed} drawn transcripts " \
           "have no row in it" in " ".join(fewer["notes"])
    assert {r["n_human"] for r in fewer["rates"]} == {N - 1}
    # Labelling stopped part way: blanks are counted too.
    blank = frame.assign(compliant=frame["compliant"].where(keep, ""))
    notes = json.loads(run_cli(["calibrate", root / "run", "--human", _save(blank, tmp_path / "blank.csv"),
                                "--json"]).ok())["notes"]
    assert any(f"{len(frame) - removed} of the {len(frame)} drawn transcripts are labelled" in n for n in notes)
    # A spreadsheet's export: a byte-order mark, CRLF line ends, semicolons, replicate 0 as 0.0, trailing empty rows.
    text = frame.assign(replicate="0.0").to_csv(index=False, sep=";", lineterminator="\r\n")
    for name, data in (("bom.csv", "\ufeff" + frame.to_csv(index=False, lineterminator="\r\n")),
                       ("semicolon.csv", text + ";" * (len(frame.columns) - 1) + "\r\n")):
        path = tmp_path / name
        path.write_bytes(data.encode("utf-8"))
        got = json.loads(run_cli(["calibrate", root / "run", "--human", path, "--json"]).ok())
        assert got["rates"] == whole["rates"], name


def test_a_sheet_without_identity_is_used_with_a_note_that_nothing_checked_it(drawn, tmp_path):
    """An older sheet, or labels made elsewhere: no identity to check, so the note says the sample is taken on trust."""
    root, _, sheets = drawn
    old = _save(sheets[0].drop(columns=IDENTITY_COLUMNS), tmp_path / "old.csv")
    code, out, err = run_cli(["calibrate", root / "run", "--human", old])
    assert code == 0, err
    assert "does not say which sample it is" in out and "nothing checked" in out


def test_the_run_changing_after_labelling_is_refused(drawn, tmp_path):
    root, _, sheets = drawn
    run = tmp_path / "run"
    run.mkdir()
    for name in ("verdicts.parquet", "verdicts.csv", "manifest.json"):
        (run / name).write_bytes((root / "run" / name).read_bytes())
    lines = (root / "run" / "transcripts.jsonl").read_text().splitlines()
    record = json.loads(lines[0])
    record["turns"][-1]["content"] += " (edited)"
    (run / "transcripts.jsonl").write_text("\n".join([json.dumps(record), *lines[1:]]) + "\n")
    filled = _save(sheets[0], tmp_path / "filled.csv")
    run_cli(["calibrate", run, "--human", filled]).refused("sample_run", "before its transcripts changed")
