"""Attacks on every importer (issue 45): bounds, special files, numbers, names and format versions.

Each attack is one hostile input of a kind, tried on every importer that reads
that kind of thing. Whatever the importer, the promise is the same: one line
naming the file, the field and what was expected (a limit named with the
option that raises it), exit 2, and nothing written. What an import does
write, the folder's own reader reads back.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import zipfile
from pathlib import Path

import pandas as pd
import pytest
from cli_runner import run_cli
from inspect_ai.log import read_eval_log, write_eval_log
from test_importers import C1, C2, FAB, OVER, make_run, make_suite, verdict

from multiverse.core import MAX_TRANSCRIPT_BYTES, skeleton, unshowable
from multiverse.errors import InputError
from multiverse.importers import import_table
from multiverse.tables import read_transcripts
from multiverse.tables._folder import MAX_LINE_BYTES

HERE = Path(__file__).parent
EVAL = HERE / "inspect_logs" / "grader-a.eval"
EVAL_B = HERE / "inspect_logs" / "grader-b.eval"
PROMPTFOO = HERE / "promptfoo_results" / "grader-a.json"
PROMPTFOO_B = HERE / "promptfoo_results" / "grader-b.json"


def refused(argv: list, *fragments: str) -> str:
    """The one line a refused import printed, after checking it is one line, exit 2, and names ``fragments``."""
    result = run_cli(argv)
    assert result.returncode == 2, (result.returncode, result.stdout, result.stderr)
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr, result.stderr
    for fragment in fragments:
        assert re.search(fragment, result.stderr), (fragment, result.stderr)
    return result.stderr


def json_log(tmp_path: Path, edit, name: str = "log.json", source: Path = EVAL) -> Path:
    """A recorded Inspect log rewritten as .json by Inspect, then edited as a hostile file would be."""
    path = tmp_path / name
    write_eval_log(read_eval_log(str(source)), str(path), format="json")
    document = json.loads(path.read_text())
    edit(document)
    path.write_text(json.dumps(document))
    return path


def promptfoo_file(tmp_path: Path, edit, name: str = "results.json", source: Path = PROMPTFOO) -> Path:
    document = json.loads(source.read_text())
    edit(document)
    path = tmp_path / name
    path.write_text(json.dumps(document))
    return path


def label_table(tmp_path: Path, systems=("sys-a", "sys-b"), judges=("j1", "j2"), items: int = 3,
                transcript: str | None = None, name: str = "labels.csv") -> Path:
    rows = [{"system": s, "item": f"i{i}", "judge": j, "label": (i + k) % 2,
             **({"answer": transcript} if transcript is not None else {})}
            for k, s in enumerate(systems) for i in range(items) for j in judges]
    path = tmp_path / name
    pd.DataFrame(rows).to_csv(path, index=False)
    return path


TABLE_FLAGS = ["--system", "system", "--item", "item", "--label", "label", "--axis", "judge"]


def assert_run(tmp_path: Path, scores_rows=None) -> Path:
    suite = make_suite(tmp_path)
    return make_run(suite, "run_a", inference=(C1, C2), scores=scores_rows or [
        (C1, "ok", verdict((FAB, True))), (C2, "ok", verdict((OVER, False)))])


# -- bounds on bytes: uncompressed sizes, per transcript, per import ---------------------------------------


def test_an_eval_whose_member_inflates_past_max_bytes_is_refused_before_inspect_reads_it(tmp_path):
    bomb = tmp_path / "bomb.eval"
    shutil.copy(EVAL, bomb)
    with zipfile.ZipFile(bomb, "a", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("samples/padding.json", b" " * (3 * 2**20))  # 3 MB of spaces: a few KB compressed
    assert bomb.stat().st_size < 2**20
    out = tmp_path / "out"
    refused(["import", "inspect", bomb, "--max-bytes", "2M", "--out", out],
            r"bomb\.eval", r"more than 2\.0 MB \(uncompressed\)", r"--max-bytes raises it")
    assert not out.exists()


def test_a_zip_that_declares_less_than_it_inflates_to_is_refused(tmp_path):
    liar = tmp_path / "liar.eval"
    shutil.copy(EVAL, liar)
    with zipfile.ZipFile(liar, "a", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("samples/padding.json", b"x" * 200_000)
    data = bytearray(liar.read_bytes())
    # Patch the declared (uncompressed) size of that member, in its local header and the central directory.
    with zipfile.ZipFile(liar) as archive:
        info = archive.getinfo("samples/padding.json")
    local = info.header_offset
    data[local + 22:local + 26] = (1000).to_bytes(4, "little")
    central, position = -1, 0
    while (position := data.find(b"PK\x01\x02", position)) != -1:
        name_length = int.from_bytes(data[position + 28:position + 30], "little")
        if data[position + 46:position + 46 + name_length] == b"samples/padding.json":
            data[position + 24:position + 28] = (1000).to_bytes(4, "little")
            central = position
        position += 4
    assert central > 0
    liar.write_bytes(bytes(data))
    out = tmp_path / "out"
    refused(["import", "inspect", liar, "--out", out], r"liar\.eval: cannot read as an Inspect log")
    assert not out.exists()


def test_a_zip_of_more_members_than_rows_allowed_is_refused_from_its_end_record(tmp_path):
    many = tmp_path / "many.eval"
    shutil.copy(EVAL, many)
    with zipfile.ZipFile(many, "a") as archive:
        for i in range(1_200):
            archive.writestr(f"x/{i}", b"")
    out = tmp_path / "out"
    refused(["import", "inspect", many, "--max-rows", "100", "--out", out], r"1,215 members", r"--max-rows raises it")
    assert not out.exists()


def test_one_attachment_referred_to_by_many_messages_cannot_make_a_line_report_cannot_read(tmp_path):
    def amplify(document):
        sample = document["samples"][0]
        sample["attachments"] = {"a" * 32: "y" * 200_000}
        sample["messages"] = [{"role": "user", "content": "attachment://" + "a" * 32, "source": "input"}] * 40
    log = json_log(tmp_path, amplify)
    assert log.stat().st_size < 2**20
    out = tmp_path / "out"
    refused(["import", "inspect", log, "--max-transcript-bytes", "4M", "--out", out],
            r"samples\[0\]\.messages", r"transcript comes to", r"at most 4\.0 MB per transcript",
            r"--max-transcript-bytes raises it")
    assert not out.exists()
    # Within the bound it imports, and every line it wrote reads back.
    result = run_cli(["import", "inspect", log, "--max-transcript-bytes", "16M", "--out", out])
    assert result.returncode == 0, result.stderr
    assert len(read_transcripts(out)) == 10


@pytest.mark.parametrize("where", ["output", "prompt"])
def test_huge_promptfoo_outputs_cannot_make_a_line_report_cannot_read(tmp_path, where):
    def grow(document):
        row = document["results"]["results"][0]
        if where == "output":
            row["response"]["output"] = "z" * (3 * 2**20)
        else:
            row["prompt"]["raw"] = "p" * (3 * 2**20)
    path = promptfoo_file(tmp_path, grow)
    out = tmp_path / "out"
    refused(["import", "promptfoo", path, "--max-transcript-bytes", "2M", "--out", out],
            r"transcript of .* comes to 3\.0 MB", r"--max-transcript-bytes raises it")
    assert not out.exists()


def test_a_table_transcript_past_the_bound_is_refused(tmp_path):
    table = label_table(tmp_path, transcript="w" * (2 * 2**20))
    out = tmp_path / "out"
    refused(["import", "table", table, *TABLE_FLAGS, "--transcript", "answer", "--max-transcript-bytes", "1M",
             "--out", out], r"--max-transcript-bytes raises it")
    assert not out.exists()


def test_max_transcript_bytes_cannot_pass_the_line_the_folder_reader_reads(tmp_path):
    table = label_table(tmp_path)
    with pytest.raises(InputError, match=r"max_transcript_bytes: .*could not be read back") as caught:
        import_table(table, system="system", item="item", label="label", axes=["judge"], out_dir=tmp_path / "out",
                     max_transcript_bytes=MAX_LINE_BYTES + 1)
    assert caught.value.param == "max_transcript_bytes"
    assert MAX_TRANSCRIPT_BYTES < MAX_LINE_BYTES  # the default writes lines the reader reads


@pytest.mark.parametrize("importer", ["table", "promptfoo", "inspect_json", "assert"])
def test_every_importer_counts_its_input_bytes_against_max_bytes(tmp_path, importer):
    out = tmp_path / "out"
    if importer == "table":
        argv = ["import", "table", label_table(tmp_path, items=400), *TABLE_FLAGS]
    elif importer == "promptfoo":
        argv = ["import", "promptfoo", PROMPTFOO]
    elif importer == "inspect_json":
        argv = ["import", "inspect", json_log(tmp_path, lambda d: None)]
    else:
        argv = ["import", "assert", assert_run(tmp_path)]
    refused([*argv, "--max-bytes", "1K", "--out", out], r"--max-bytes raises it")
    assert not out.exists()


# -- bounds on rows -------------------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_a_table_past_max_rows_is_refused_naming_the_option(tmp_path, fmt):
    table = label_table(tmp_path, items=60)  # 240 rows
    if fmt == "parquet":
        parquet = table.with_suffix(".parquet")
        pd.read_csv(table).to_parquet(parquet)
        table = parquet
    out = tmp_path / "out"
    refused(["import", "table", table, *TABLE_FLAGS, "--max-rows", "200", "--out", out],
            r"more than 200 rows", r"--max-rows raises it")
    assert not out.exists()
    result = run_cli(["import", "table", table, *TABLE_FLAGS, "--max-rows", "240", "--out", out])
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("importer", ["promptfoo", "inspect", "assert"])
def test_every_importer_counts_rows_against_max_rows(tmp_path, importer):
    out = tmp_path / "out"
    argv = {"promptfoo": ["import", "promptfoo", PROMPTFOO], "inspect": ["import", "inspect", EVAL],
            "assert": ["import", "assert", assert_run(tmp_path)]}[importer]
    refused([*argv, "--max-rows", "1", "--out", out], r"more than 1 rows", r"--max-rows raises it")
    assert not out.exists()


# -- special files: FIFOs, devices, directories, links out ----------------------------------------------------


def _special(tmp_path: Path, kind: str, name: str) -> Path:
    path = tmp_path / name
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "dev_zero":
        path.symlink_to("/dev/zero")
    elif kind == "directory":
        path.mkdir()
    return path


@pytest.mark.parametrize("kind", ["fifo", "dev_zero", "directory"])
@pytest.mark.parametrize("importer", ["table_csv", "table_parquet", "promptfoo", "inspect_eval", "inspect_json"])
def test_a_special_input_file_is_refused_without_reading_it(tmp_path, kind, importer):
    name = {"table_csv": "t.csv", "table_parquet": "t.parquet", "promptfoo": "r.json", "inspect_eval": "l.eval",
            "inspect_json": "l.json"}[importer]
    path = _special(tmp_path, kind, name)
    out = tmp_path / "out"
    argv = {"table_csv": ["import", "table", path, *TABLE_FLAGS], "table_parquet": ["import", "table", path, *TABLE_FLAGS],
            "promptfoo": ["import", "promptfoo", path], "inspect_eval": ["import", "inspect", path],
            "inspect_json": ["import", "inspect", path]}[importer]
    line = refused([*argv, "--out", out], re.escape(name))
    assert ("directory" if kind == "directory" else "FIFO" if kind == "fifo" else "device") in line
    assert not out.exists()


@pytest.mark.parametrize("member", ["scores.jsonl", "inference_set.jsonl", "config.yaml", "artifacts.json"])
@pytest.mark.parametrize("kind", ["fifo", "dev_zero", "directory"])
def test_an_assert_run_file_that_is_special_is_refused_and_said_truly(tmp_path, member, kind):
    run = assert_run(tmp_path)
    (run / member).unlink()
    _special(run, kind, member)
    out = tmp_path / "out"
    line = refused(["import", "assert", run, "--out", out], re.escape(member))
    assert "file not found" not in line  # the file is there; it is the wrong kind of file
    assert any(word in line for word in ("directory", "FIFO", "device", "outside the folder")), line
    assert not out.exists()


# -- numbers within the types that store them ---------------------------------------------------------------


@pytest.mark.parametrize(("edit", "field"), [
    (lambda d: d["samples"][0].update(epoch=10**30), r"samples\[0\]\.epoch: 10{30}"),
    (lambda d: d["samples"][0].update(epoch=-1), r"samples\[0\]\.epoch: -1"),
    (lambda d: d["samples"][0].update(epoch=2**63), r"samples\[0\]\.epoch"),
    (lambda d: d["samples"][0].update(id=10**30), r"samples\[0\]\.id: 10{30}"),
    (lambda d: d["samples"][0].update(id="x" * 5000), r"samples\[0\]\.id: 'xxx"),
])
def test_inspect_numbers_out_of_range_are_refused_and_nothing_is_half_written(tmp_path, edit, field):
    out = tmp_path / "out"
    refused(["import", "inspect", json_log(tmp_path, edit), "--out", out], field)
    assert not out.exists()


@pytest.mark.parametrize(("edit", "field"), [
    (lambda r: r.update(repeatIndex=10**30), r"repeatIndex: 10{30}"),
    (lambda r: r.update(repeatIndex="two"), r"repeatIndex: 'two'"),
    (lambda r: r.update(repeatIndex=True), r"repeatIndex: True"),
    (lambda r: r.update(repeatIndex=1.5), r"repeatIndex: 1\.5"),
    (lambda r: r.update(testIdx=10**30), r"testIdx: 10{30}"),
])
def test_promptfoo_numbers_out_of_range_are_refused(tmp_path, edit, field):
    path = promptfoo_file(tmp_path, lambda d: edit(d["results"]["results"][0]))
    out = tmp_path / "out"
    refused(["import", "promptfoo", path, "--out", out], r"results\.results\[0\]\." + field)
    assert not out.exists()


@pytest.mark.parametrize("value", ["1e30", "-1", "9223372036854775808", "1.5", "inf"])
def test_table_replicates_out_of_range_are_refused(tmp_path, value):
    table = tmp_path / "t.csv"
    pd.DataFrame({"system": ["a", "b"], "item": ["i", "i"], "label": [1, 0], "rep": [value, "0"]}).to_csv(table, index=False)
    out = tmp_path / "out"
    refused(["import", "table", table, "--system", "system", "--item", "item", "--label", "label", "--replicate", "rep",
             "--out", out], r"rep: ")
    assert not out.exists()


# -- format versions ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("version", [99, 2, 0, "3", None, True])
def test_a_promptfoo_file_of_an_unknown_version_is_refused(tmp_path, version):
    def set_version(document):
        if version is None:
            document["results"].pop("version")
        else:
            document["results"]["version"] = version
    path = promptfoo_file(tmp_path, set_version)
    refused(["import", "promptfoo", path, "--out", tmp_path / "out"], r"results\.version: ",
            r"expected a promptfoo result format version this import knows \(3\)")


@pytest.mark.parametrize("version", [99, 3, 0, -1])
@pytest.mark.parametrize("fmt", ["eval", "json"])
def test_an_inspect_log_of_an_unknown_version_is_refused(tmp_path, version, fmt):
    if fmt == "json":
        path = json_log(tmp_path, lambda d: d.update(version=version))
    else:
        path = tmp_path / "v.eval"
        with zipfile.ZipFile(EVAL) as source, zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as target:
            for info in source.infolist():
                data = source.read(info)
                if info.filename in ("header.json", "_journal/start.json"):
                    document = json.loads(data)
                    document["version"] = version
                    data = json.dumps(document).encode()
                target.writestr(info.filename, data)
    refused(["import", "inspect", path, "--out", tmp_path / "out"], r"version: ", r"format version this import knows")


@pytest.mark.parametrize("member", ["artifacts.json", "manifest.json"])
def test_an_assert_run_of_an_unknown_schema_version_is_refused(tmp_path, member):
    run = assert_run(tmp_path)
    document = json.loads((run / member).read_text())
    document["schema_version"] = 2
    if member == "manifest.json":
        (run / "artifacts.json").unlink()  # the manifest's copy of the refs is read then
        document["artifact_versions"] = json.loads(json.dumps({"x": {}}))
    (run / member).write_text(json.dumps(document))
    refused(["import", "assert", run, "--out", tmp_path / "out"], re.escape(member), r"schema_version: 2")


# -- names: nothing unshowable, no two alike ----------------------------------------------------------------------

UNSHOWABLE = {"soh": "\x01", "esc": "\x1b[31m", "nonchar": "\ufffe", "nel": "\x85", "line_sep": "\u2028",
              "rlo": "\u202e", "zwsp": "\u200b", "bom": "\ufeff", "tab": "\t", "newline": "\n", "nul": "\x00",
              "del": "\x7f", "tag": "\U000e0041"}


@pytest.mark.parametrize("kind", sorted(UNSHOWABLE))
@pytest.mark.parametrize("importer", ["table_system", "table_option", "promptfoo", "inspect"])
def test_a_name_holding_an_unshowable_character_is_refused_escaped(tmp_path, kind, importer):
    bad = f"gpt{UNSHOWABLE[kind]}x"
    out = tmp_path / "out"
    if importer == "table_system":
        argv = ["import", "table", label_table(tmp_path, systems=(bad, "other")), *TABLE_FLAGS]
    elif importer == "table_option":
        argv = ["import", "table", label_table(tmp_path, judges=(bad, "other")), *TABLE_FLAGS]
    elif importer == "promptfoo":
        def name(document):
            for row in document["results"]["results"]:
                row["provider"] = {"id": bad, "label": bad}
        argv = ["import", "promptfoo", promptfoo_file(tmp_path, name)]
    else:
        argv = ["import", "inspect", json_log(tmp_path, lambda d: d["eval"].update(model=bad))]
    line = refused([*argv, "--out", out], r"expected a name without control, invisible or non-text characters")
    assert not any(unshowable(ch) for ch in line[:-1]), line  # the refusal itself shows it escaped
    assert not out.exists()


def test_a_lone_surrogate_is_refused_in_a_name_and_replaced_in_a_transcript(tmp_path):
    # Inspect's own JSON reader refuses a lone surrogate anywhere in a log: one line, nothing written.
    raw = json_log(tmp_path, lambda d: d["eval"].update(model="SURROGATE"))
    raw.write_text(raw.read_text().replace('"SURROGATE"', '"gpt\\ud800"'))
    refused(["import", "inspect", raw, "--out", tmp_path / "out"], r"log\.json: cannot read as an Inspect log")
    assert not (tmp_path / "out").exists()
    # promptfoo's files are read with json, which keeps it: not being text, it is read as U+FFFD, in a
    # name as in a transcript (the files then encode, and read back).
    def mark(document):
        for row in document["results"]["results"]:
            row["provider"] = {"id": "NAME"}
        document["results"]["results"][0]["response"]["output"] = "TURN"
    path = promptfoo_file(tmp_path, mark)
    path.write_text(path.read_text().replace('"NAME"', '"gpt\\ud800"').replace('"TURN"', '"half \\udc80 a pair"'))
    result = run_cli(["import", "promptfoo", path, "--out", tmp_path / "out"])
    assert result.returncode == 0, result.stderr
    contents = [t["content"] for record in read_transcripts(tmp_path / "out").values() for t in record["turns"]]
    assert "half \ufffd a pair" in contents
    assert all(s.startswith("gpt\ufffd") for s in pd.read_parquet(tmp_path / "out" / "verdicts.parquet")["system"])


LOOK_ALIKES = [
    ("claude", "cl\u0430ude"),   # Cyrillic а
    ("gpt-4", "gpt\u20104"),     # hyphen U+2010
    ("fine", "\ufb01ne"),        # the ligature ﬁ (NFKC)
    ("gpt", "\uff47pt"),         # fullwidth ｇ
    ("model-1", "model-l"),      # digit one and small L
    ("café", "cafe\u0301"),      # NFC and NFD
    ("omega", "\u03bfmega"),     # Greek ο
]


@pytest.mark.parametrize(("first", "second"), LOOK_ALIKES)
def test_look_alike_systems_are_refused_or_merged_when_asked(tmp_path, first, second):
    assert skeleton(first) == skeleton(second) and first != second
    table = label_table(tmp_path, systems=(first, second, "other"))
    out = tmp_path / "out"
    line = refused(["import", "table", table, *TABLE_FLAGS, "--out", out], r"two spellings of one name",
                   r"--merge-look-alikes")
    assert ascii(first) in line and ascii(second) in line
    assert not out.exists()
    # Merged when asked: the two are one system, rows of both kept, so each item has two labels per judge.
    table = tmp_path / "disjoint.csv"
    pd.DataFrame([{"system": s, "item": f"{tag}{i}", "judge": "j", "label": i % 2}
                  for s, tag in ((first, "a"), (second, "b")) for i in range(3)]).to_csv(table, index=False)
    result = run_cli(["import", "table", table, "--system", "system", "--item", "item", "--label", "label",
                      "--merge-look-alikes", "--out", out])
    assert result.returncode == 0, result.stderr
    verdicts = pd.read_parquet(out / "verdicts.parquet")
    assert set(verdicts["system"]) == {first} and len(verdicts) == 6


def test_names_that_only_look_alike_to_a_careless_eye_are_kept_apart(tmp_path):
    table = label_table(tmp_path, systems=("GPT-4", "gpt-4", "gpt-4o", "gpt-40", "claude", "claudé"))
    result = run_cli(["import", "table", table, *TABLE_FLAGS, "--out", tmp_path / "out"])
    assert result.returncode == 0, result.stderr
    assert pd.read_parquet(tmp_path / "out" / "verdicts.parquet")["system"].nunique() == 6


def test_look_alike_judges_across_inspect_logs_are_refused_or_merged(tmp_path):
    def judge(name):
        # The judge is the model the scoring events called (the header may name another).
        def edit(document):
            for sample in document["samples"]:
                for event in sample["events"]:
                    if event.get("event") == "model" and "grader" in str(event.get("model")):
                        event["model"] = name
        return edit
    logs = [json_log(tmp_path, judge("openai/grader"), "a.json"),
            json_log(tmp_path, judge("openai/gr\u0430der"), "b.json", source=EVAL_B)]
    out = tmp_path / "out"
    refused(["import", "inspect", *logs, "--out", out], r"the judges: two spellings", r"--merge-look-alikes")
    assert not out.exists()
    # Merged, the two logs are one judge twice: one log per task, system and judge is still the rule.
    refused(["import", "inspect", *logs, "--merge-look-alikes", "--out", out], r"expected one log per task")


def test_look_alike_promptfoo_providers_are_refused_or_merged(tmp_path):
    def provider(name):
        def edit(document):
            for row in document["results"]["results"]:
                row["provider"] = {"id": name}
        return edit
    files = [promptfoo_file(tmp_path, provider("openai:gpt-4o"), "a.json"),
             promptfoo_file(tmp_path, provider("openai:gpt-4\u043e"), "b.json", source=PROMPTFOO_B)]
    out = tmp_path / "out"
    refused(["import", "promptfoo", *files, "--out", out], r"two spellings of one name", r"--merge-look-alikes")
    result = run_cli(["import", "promptfoo", *files, "--merge-look-alikes", "--out", out])
    assert result.returncode == 0, result.stderr
    systems = set(pd.read_parquet(out / "verdicts.parquet")["system"])
    assert len(systems) == 2 and all(s.startswith("openai:gpt-4o / ") for s in systems), systems


def test_free_text_names_are_escaped_not_refused(tmp_path):
    def multiline(document):
        row = document["results"]["results"][0]
        row["testCase"]["description"] = "line one\nline two\x1b[2J"
        row["gradingResult"]["componentResults"][0]["assertion"] = {"type": "regex", "value": "^a\tb$\u202e"}
    path = promptfoo_file(tmp_path, multiline)
    out = tmp_path / "out"
    result = run_cli(["import", "promptfoo", path, "--out", out])
    assert result.returncode == 0, result.stderr
    cases = set(pd.read_parquet(out / "verdicts.parquet")["case_id"])
    assert "line one\\nline two\\x1b[2J" in cases
    criteria = set(pd.read_parquet(out / "criteria.parquet")["criterion"])
    assert "regex: ^a\\tb$\\u202e" in criteria
    assert not any(unshowable(ch) for name in cases | criteria for ch in name)


def test_look_alike_judges_of_assert_runs_are_refused_or_merged_as_by_every_importer(tmp_path):
    suite = make_suite(tmp_path)
    scores = [(C1, "ok", verdict((FAB, True))), (C2, "ok", verdict((OVER, False)))]
    runs = [make_run(suite, "run_a", judge="judge-1", inference=(C1, C2), scores=scores),
            make_run(suite, "run_b", judge="judge\u20101", inference=(C1, C2), scores=scores)]
    out = tmp_path / "out"
    line = refused(["import", "assert", *runs, "--out", out], r"judge: two spellings of one name")
    assert "'judge-1'" in line and "'judge\\u20101'" in line
    assert not out.exists()
    # Merged, the two runs are one judge's twice over the same cases: two rows of one key, which merging can't make one.
    refused(["import", "assert", *runs, "--merge-look-alikes", "--out", out], r"--merge-look-alikes: merging",
            r"made two rows of one")
    assert not out.exists()
