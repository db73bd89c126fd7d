"""Attacks on what multiverse writes for people to read (issue 23 items 2, 3, 5).

- The terminal: a name, a key or a message built from a file that holds
  escape sequences (ESC, OSC, CSI, the C1 CSI U+009B), NUL, carriage returns or
  bidirectional overrides is shown as visible escapes, never obeyed
  (``multiverse.core._terminal``). ``--json`` stays valid JSON and keeps every character.
- Spreadsheets: no cell of a CSV the package writes starts like a formula,
  its header included, and reading the CSV back gives the original names.
- Look-alike names: two spellings of one name (NFC and NFD) are refused in
  one line that shows both; names in one spelling are read in NFC.
"""

from __future__ import annotations

import csv
import json
import shutil
import unicodedata
from pathlib import Path
from unittest import mock

import pandas as pd
import pytest
import yaml
from cli_runner import run_cli
from conftest import tiny_spec_document

from multiverse.core import unshowable
from multiverse.core._terminal import terminal_safe
from multiverse.errors import InputError

# One of each kind of character a terminal would obey rather than show.
HOSTILE = {
    "osc_title": "\x1b]0;pwned\x07",
    "osc_st": "\x1b]8;;http://evil\x1b\\link\x1b]8;;\x1b\\",
    "csi_clear": "\x1b[2J\x1b[H",
    "csi_up": "\x1b[1A\x1b[2K",
    "c1_csi": "\x9b2J",
    "c1_osc": "\x9d0;t\x9c",
    "nul": "a\x00b",
    "del": "a\x7fb",
    "cr": "fake\rreal",
    "bell": "ding\x07",
    "backspace": "ab\x08\x08xy",
    "rlo": "evil\u202eexe.txt",
    "lre": "\u202aab\u202c",
    "rli": "\u2067ab\u2069",
    "lrm": "a\u200eb\u200f",
    "alm": "a\u061cb",
    "zwsp": "a\u200bb",
    "bom": "\ufeffname",
    "tag": "hid\U000e0041\U000e0042den",
    "line_separator": "one\u2028two",
    "nel": "one\x85two",
}

LEGIT = ["café", "naïve ×2 – ≤ 3", "中文名", "日本語テスト", "Ελληνικά", "emoji 👨\u200d👩\u200d👧", "فارسی\u200cها",
         "C:\\path\\to", "tab-free plain"]


def _unsafe_characters(text: str) -> list[str]:
    """Characters a terminal would obey: controls (not the newline), format characters but the joiners, separators."""
    return [c for c in text if c != "\n" and c not in "\u200c\u200d"
            and unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp", "Cs")]


@pytest.mark.parametrize("kind", sorted(HOSTILE))
def test_terminal_safe_shows_every_dangerous_character_as_an_escape(kind):
    text = HOSTILE[kind]
    shown = terminal_safe(text)
    assert _unsafe_characters(shown) == []
    for ch in _unsafe_characters(text):
        code = ord(ch)
        escape = {"\t": "\\t", "\r": "\\r", "\n": "\\n"}.get(ch) or (
            f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}")
        assert escape in shown, (kind, shown)
    assert terminal_safe(shown) == shown  # already safe text passes unchanged


def test_terminal_safe_keeps_newlines_only_in_a_block():
    assert terminal_safe("a\nb") == "a\\nb"
    assert terminal_safe("a\nb\x1b[2J", newlines=True) == "a\nb\\x1b[2J"
    assert terminal_safe("tab\there", newlines=True) == "tab\\there"
    assert terminal_safe("\udc80name") == "\\udc80name"  # a file name that is not UTF-8


@pytest.mark.parametrize("text", LEGIT)
def test_terminal_safe_leaves_legitimate_text_alone(text):
    assert terminal_safe(text) == text
    assert terminal_safe(text, newlines=True) == text


# -- through the command line --------------------------------------------------------------------


def _clean(result) -> None:
    """Nothing a terminal would obey on either stream."""
    for stream in (result.stdout, result.stderr):
        assert _unsafe_characters(stream) == [], [hex(ord(c)) for c in _unsafe_characters(stream)]


def _hostile_import(tmp_path: Path, system: str, case: str, option: str, axis: str = "grader") -> Path:
    rows = [["model", "item", axis, "label"]]
    for s in (system, "plain"):
        for i, c in enumerate((case, "c2", "c3")):
            for g in (option, "g2"):
                rows.append([s, c, g, str((i + len(s) + len(g)) % 2)])
    table = tmp_path / "labels.csv"
    with open(table, "w", newline="", encoding="utf-8") as fh:
        csv.writer(fh).writerows(rows)
    out = tmp_path / "out"
    argv = ["import", "table", table, "--system", "model", "--item", "item", "--label", "label", f"--axis={axis}",
            "--out", out]
    if any(unshowable(c) for c in system + case + option + axis):
        # Since issue 45 the import refuses a name it could not show, in one clean line, writing nothing ...
        refused = run_cli(argv)
        assert refused.returncode == 2 and "expected a name without control" in refused.stderr, refused.stderr
        _clean(refused)
        assert not out.exists()
    # ... but folders holding such names exist (written before, or by another hand): every reader and
    # writer below must still show them safely. The import's name check is switched off to make one.
    with mock.patch("multiverse.importers._guard.unshowable_problem", lambda name: None):
        result = run_cli(argv)
    assert result.returncode == 0, result.stderr
    _clean(result)
    return out


@pytest.mark.parametrize("kind", ["osc_title", "csi_clear", "c1_csi", "rlo", "cr", "nul", "line_separator"])
def test_hostile_names_in_a_table_never_reach_the_terminal_raw(tmp_path, kind):
    hostile = HOSTILE[kind]
    out = _hostile_import(tmp_path, f"sys{hostile}", f"case{hostile}", f"opt{hostile}", axis=f"ax{hostile}")
    for argv in (["ranking", out], ["curve", out], ["variance", out], ["agreement", out, "--axis", f"ax{hostile}"]):
        result = run_cli(argv)
        assert result.returncode == 0, (argv, result.stderr)
        _clean(result)
        if argv[0] in ("ranking", "curve"):  # the ones that name the systems
            assert "sys" + terminal_safe(hostile) in result.stdout, result.stdout
    # JSON escapes what it holds: the document is valid and keeps the names as they are.
    result = run_cli(["ranking", out, "--json"])
    assert result.returncode == 0, result.stderr
    _clean(result)
    assert f"sys{hostile}" in json.loads(result.stdout)["systems"]


def test_an_unknown_key_holding_escapes_is_shown_not_obeyed(tmp_path):
    document = tiny_spec_document()
    document["\x1b]0;pwned\x07\x1b[2J"] = 1
    document["systems"][0]["\x9b31m"] = "x"
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump(document, allow_unicode=True))
    result = run_cli(["validate", spec])
    assert result.returncode == 2 and "Traceback" not in result.stderr
    _clean(result)
    assert "\\x1b]0;pwned\\x07\\x1b[2J" in result.stderr and "unknown key" in result.stderr


def test_a_hostile_spec_file_name_is_escaped_in_the_error(tmp_path):
    missing = tmp_path / "spec\x1b]0;t\x07\u202e.yaml"
    result = run_cli(["validate", missing])
    assert result.returncode == 2
    _clean(result)
    assert "\\x1b]0;t\\x07\\u202e" in result.refused()


def test_calibrates_refusal_of_an_unknown_label_row_is_escaped(tmp_path, sim_run):
    labels = tmp_path / "labels.csv"
    labels.write_text("system,case_id,compliant\n\"atlas\x1b[2J\x1b]0;x\x07\",\"c\u202e1\",1\n", encoding="utf-8")
    result = run_cli(["calibrate", sim_run.out, "--human", labels])
    line = result.refused("is not a transcript of the run")
    _clean(result)
    assert "atlas\\x1b[2J\\x1b]0;x\\x07" in line and "c\\u202e1" in line


def test_a_warning_built_from_a_file_name_is_escaped(tmp_path):
    table = tmp_path / "lab\x1b[31mels.csv"
    table.write_text("model,item,label\nA,i1,1\nA,i2,\nB,i1,0\n")
    result = run_cli(["import", "table", table, "--system", "model", "--item", "item", "--label", "label",
                      "--out", tmp_path / "out"])
    assert result.returncode == 0, result.stderr
    _clean(result)
    assert "lab\\x1b[31mels.csv" in result.stderr  # the missing-label warning names the file


def test_a_bad_flag_value_is_escaped_in_argparses_line_too(tmp_path):
    result = run_cli(["ranking", tmp_path, "--ci", "\x1b]0;x\x07"])
    assert result.returncode == 2
    _clean(result)


# -- spreadsheet formulas in headers -------------------------------------------------------------


FORMULA_HEADS = ["=HYPERLINK(\"http://x\",\"y\")", "+1+2", "-2+3", "@SUM(A1)", "\tcmd", "\rcmd", "'quoted"]


@pytest.mark.parametrize("head", FORMULA_HEADS)
def test_a_formula_axis_name_is_inert_in_every_header_and_round_trips(tmp_path, head):
    from multiverse.results._load import load_run

    out = _hostile_import(tmp_path, "A", "i1", "g1", axis=head)
    for name in ("verdicts.csv", "rates.csv"):
        with open(out / name, newline="", encoding="utf-8") as fh:
            header = next(csv.reader(fh))
        assert all(cell[:1] not in ("=", "+", "-", "@", "\t", "\r") for cell in header), (name, header)
        assert "'" + head in header
    # A folder read back from its CSVs alone has the axis under its own name, and analyses find it.
    for table in ("verdicts", "rates", "criteria"):
        (out / f"{table}.parquet").unlink(missing_ok=True)
    loaded = load_run(out)
    assert head in loaded.verdicts.columns and head in loaded.rates.columns
    result = run_cli(["agreement", out, f"--axis={head}", "--json"])
    assert result.returncode == 0, result.stderr
    assert set(json.loads(result.stdout)["options"]) == {"g1", "g2"}


@pytest.mark.parametrize("inside", ["\r", "\n", "\r\n"])
def test_a_line_break_inside_a_cell_never_starts_an_unguarded_row(tmp_path, inside):
    import re

    from multiverse.results._load import load_run

    system = f"x{inside}=HYPERLINK(\"http://evil\")"
    out = _hostile_import(tmp_path, system, f"c{inside}@SUM(1)", "g1", axis=f"ax{inside}-1")
    for name in ("verdicts.csv", "rates.csv"):
        text = (out / name).read_bytes().decode("utf-8")
        # Outside its quoted cells, a file has line breaks only where rows end.
        bare = re.sub(r'"(?:[^"]|"")*"', "", text)
        assert "\r" not in bare.replace("\r\n", "") and "\n" not in bare.replace("\r\n", ""), name
        with open(out / name, newline="", encoding="utf-8") as fh:
            rows = list(csv.reader(fh))
        assert len({len(r) for r in rows}) == 1  # every row has the header's cells
    (out / "verdicts.parquet").unlink()
    assert system in set(load_run(out).verdicts["system"])


def test_csv_safe_guards_column_names_of_any_frame():
    from multiverse.tables._tables import _csv_restore, csv_safe

    frame = pd.DataFrame({"=cmd": ["x"], "plain": ["=y"], "'q": ["z"], 3: [1]})
    safe = csv_safe(frame)
    assert list(safe.columns) == ["'=cmd", "plain", "''q", 3]
    assert list(frame.columns) == ["=cmd", "plain", "'q", 3]  # the caller's frame is untouched
    assert list(_csv_restore(safe.copy()).columns) == ["=cmd", "plain", "'q", 3]


def test_expand_csv_guards_a_formula_axis_name(tmp_path):
    document = tiny_spec_document(axes={"=cmd|calc": {"a": {"judge.model": "sim/judge-a"}, "b": {"judge.model": "sim/judge-b"}}})
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump(document))
    result = run_cli(["expand", spec, "--format", "csv"])
    assert result.returncode == 0, result.stderr
    header = next(csv.reader(result.stdout.splitlines()))
    assert "'=cmd|calc" in header and all(c[:1] not in "=+-@\t\r" for c in header)


# -- look-alike names ----------------------------------------------------------------------------


NFC, NFD = "caf\u00e9", "cafe\u0301"


def _spec_with(tmp_path: Path, change) -> Path:
    document = tiny_spec_document()
    change(document)
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump(document, allow_unicode=True, sort_keys=False), encoding="utf-8")
    return spec


def _two_systems(d):
    d["systems"][0]["name"], d["systems"][1]["name"] = NFC, NFD


def _two_axes(d):
    d["axes"] = {NFC: {"a": {"judge.model": "sim/judge-a"}}, NFD: {"b": {"judge.evidence_standard": "lenient"}}}


def _two_options(d):
    d["axes"] = {"judge": {NFC: {"judge.model": "sim/judge-a"}, NFD: {"judge.model": "sim/judge-b"}}}


def _two_criteria(d):
    d["rubric"]["criteria"][0]["id"], d["rubric"]["criteria"][1]["id"] = NFC, NFD


def _two_levels(d):
    d["design"]["dimensions"][1]["levels"] = [NFC, NFD]


@pytest.mark.parametrize("change", [_two_systems, _two_axes, _two_options, _two_criteria, _two_levels])
def test_two_spellings_of_one_name_in_a_spec_are_refused_showing_both(tmp_path, change):
    result = run_cli(["validate", _spec_with(tmp_path, change)])
    line = result.refused("two spellings of one name", ascii(NFC), ascii(NFD))
    assert _unsafe_characters(line) == []


def test_two_spellings_of_one_case_id_in_a_cases_file_are_refused(tmp_path):
    from multiverse.spec import load_spec

    spec = _spec_with(tmp_path, lambda d: None)
    draft = run_cli(["draft", spec], cwd=tmp_path)
    assert draft.returncode == 0, draft.stderr
    cases_file = next(tmp_path.glob("*.cases.yaml"))
    cases = yaml.safe_load(cases_file.read_text())
    cases["cases"][0]["id"], cases["cases"][1]["id"] = NFC, NFD
    cases_file.write_text(yaml.safe_dump(cases, allow_unicode=True), encoding="utf-8")
    document = yaml.safe_load(spec.read_text())
    document["design"]["cases"] = cases_file.name
    spec.write_text(yaml.safe_dump(document, allow_unicode=True), encoding="utf-8")
    result = run_cli(["validate", spec])
    result.refused("two spellings of one name", ascii(NFC), ascii(NFD))
    with pytest.raises(Exception, match="two spellings"):
        load_spec(spec)


def test_names_in_one_spelling_are_read_in_nfc(tmp_path):
    from multiverse.spec import load_spec

    def nfd_names(d):
        d["systems"][0]["name"] = NFD
        d["axes"] = {"ju\u0301dge": {NFD: {"judge.model": "sim/judge-a"}, "plain": {"judge.model": "sim/judge-b"}}}
        d["primary"] = {"ju\u0301dge": NFD}

    spec = load_spec(_spec_with(tmp_path, nfd_names))
    assert spec.systems[0].name == NFC
    assert set(spec.axes) == {"j\u00fadge"} and set(spec.axes["j\u00fadge"]) == {NFC, "plain"}
    assert dict(spec.primary) == {"j\u00fadge": NFC}


def test_names_that_differ_only_by_case_stay_two_names(tmp_path):
    # No system, axis, option or case name becomes a file name, so Atlas and atlas are two names, as written.
    def by_case(d):
        d["systems"][1]["name"] = "Atlas"
        d["systems"][0]["name"] = "atlas"

    result = run_cli(["validate", _spec_with(tmp_path, by_case)])
    assert result.returncode == 0, result.stderr


def _write_table(tmp_path: Path, rows: list[list[str]]) -> Path:
    table = tmp_path / "labels.csv"
    with open(table, "w", newline="", encoding="utf-8") as fh:
        csv.writer(fh).writerows(rows)
    return table


@pytest.mark.parametrize("column", ["model", "item", "grader"])
def test_two_spellings_in_an_imported_column_are_refused(tmp_path, column):
    rows = [["model", "item", "grader", "label"]]
    for n, spelling in enumerate((NFC, NFD)):
        values = {"model": "A", "item": f"i{n}", "grader": "g"}
        values[column] = spelling
        rows.append([values["model"], values["item"], values["grader"], str(n % 2)])
    out = tmp_path / "out"
    result = run_cli(["import", "table", _write_table(tmp_path, rows), "--system", "model", "--item", "item",
                      "--label", "label", "--axis", "grader", "--out", out])
    result.refused(column, "two spellings of one name", ascii(NFC), ascii(NFD))
    assert not out.exists()


def test_two_spellings_of_one_column_name_are_refused(tmp_path):
    rows = [["model", "item", NFC, NFD, "label"], ["A", "i1", "x", "y", "1"]]
    result = run_cli(["import", "table", _write_table(tmp_path, rows), "--system", "model", "--item", "item",
                      "--label", "label", "--axis", NFC, "--out", tmp_path / "out"])
    result.refused("columns", ascii(NFC), ascii(NFD))


def test_an_import_reads_names_in_nfc_and_finds_columns_in_either_spelling(tmp_path):
    rows = [["model", "item", "gra\u0301der", "label"], [NFD, "i1", NFD, "1"], ["B", "i1", NFD, "0"]]
    out = tmp_path / "out"
    result = run_cli(["import", "table", _write_table(tmp_path, rows), "--system", "model", "--item", "item",
                      "--label", "label", "--axis", "gr\u00e1der", "--out", out])
    assert result.returncode == 0, result.stderr
    verdicts = pd.read_parquet(out / "verdicts.parquet")
    assert set(verdicts["system"]) == {NFC, "B"} and set(verdicts["gr\u00e1der"]) == {NFC}


def test_any_import_refuses_look_alikes_before_writing(tmp_path):
    from multiverse.importers._directory import write_import_dir

    verdicts = pd.DataFrame({"universe_id": ["u", "u"], "judge": ["j", "j"], "system": ["A", "A"],
                             "case_id": [NFC, NFD]})
    with pytest.raises(InputError, match="case_id: two spellings"):
        write_import_dir(tmp_path / "out", verdicts=verdicts, criteria=None, rates=pd.DataFrame(),
                         manifest={"axes": ["judge"]})
    assert not (tmp_path / "out").exists()
    with pytest.raises(InputError, match="axes: two spellings"):
        write_import_dir(tmp_path / "out", verdicts=verdicts.drop(columns="case_id"), criteria=None,
                         rates=pd.DataFrame(), manifest={"axes": [NFC, NFD]})


def test_a_run_folder_copy_keeps_working_after_the_guards(tmp_path, sim_run):
    # The shared run's CSVs (headers guarded, cells guarded) read back as its parquet tables do.
    from multiverse.results._load import load_run

    copy = tmp_path / "run"
    shutil.copytree(sim_run.out, copy)
    for table in ("verdicts", "rates", "criteria"):
        (copy / f"{table}.parquet").unlink(missing_ok=True)
    from_csv, from_parquet = load_run(copy), load_run(sim_run.out)
    assert list(from_csv.verdicts.columns) == list(from_parquet.verdicts.columns)


def test_every_line_the_commands_print_goes_through_the_terminal_filter():
    # The streams are filtered too; this keeps each datum on one line (a newline in a name cannot forge a line).
    import re

    cli = Path(__file__).resolve().parents[1] / "multiverse" / "cli"
    bare = [f"{path.name}:{n}" for path in sorted(cli.glob("*.py")) if path.name not in ("_output.py", "__init__.py")
            for n, line in enumerate(path.read_text().splitlines(), 1)
            if re.search(r"(?<![\w.])print\(", line) and "json.dumps" not in line]
    assert bare == [], bare


def test_a_newline_in_a_name_cannot_forge_a_line(tmp_path):
    out = _hostile_import(tmp_path, "sys\nerror: forged", "c1", "g1")
    for argv in (["ranking", out], ["curve", out]):
        result = run_cli(argv)
        assert result.returncode == 0, result.stderr
        assert not any(line.startswith("error: forged") for line in result.stdout.splitlines())
        assert "sys\\nerror: forged" in result.stdout
