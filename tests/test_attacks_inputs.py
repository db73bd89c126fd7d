"""Attacks on inputs and output places (issue 11 items 4, 7, 8, 10; issue 12 item 7).

Every refused input must give one line on stderr, exit 2, no traceback, and
write nothing; every check on an output place must happen before the first
model call (``pipeline.run`` is replaced by a counter that must stay at 0).
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import tracemalloc
from pathlib import Path

import pandas as pd
import pytest
import yaml
from cli_runner import run_cli
from conftest import tiny_spec_document
from store_rows import snapshot

from multiverse.cli import main
from multiverse.errors import InputError, SpecError

REPO = Path(__file__).resolve().parents[1]
ASSERT_SUITE = REPO / "analyses" / "data" / "assert" / "deception"


def refused(code: int, err: str, *fragments: str) -> str:
    """Exit 2 with exactly one line on stderr that holds every fragment."""
    assert code == 2, err
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    return lines[0]


def test_library_run_checks_its_folder_before_anything_else(tmp_path):
    """mv.run keeps the folder rule on its own, first: before its other refusals, any listing or the store."""
    from multiverse import load_spec, run
    from multiverse.tables._places import PlaceError

    out, store = tmp_path / "out", tmp_path / "store"
    out.mkdir()
    (out / "thesis.docx").write_text("not ours")
    spec = load_spec(write_spec(tmp_path / "specs"))
    with pytest.raises(PlaceError) as info:
        run(spec, out=out, store=store, progress=False, backend="nowhere", max_units=0)
    assert info.value.forceable and "--" not in str(info.value) and "thesis.docx" in str(info.value)
    assert not store.exists() and [p.name for p in out.iterdir()] == ["thesis.docx"]
    with pytest.raises(InputError, match="backend"):  # the folder passes with force: the next refusal speaks
        run(spec, out=out, store=store, progress=False, backend="nowhere", force=True)


def write_spec(folder: Path, file: str = "spec.yaml", **overrides) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / file
    path.write_text(yaml.safe_dump(tiny_spec_document(**overrides), sort_keys=False))
    return path


@pytest.fixture
def no_paid_calls(monkeypatch):
    """Stop the run as it gets past its places (run checks them first): a refused place must never get there.
    Each entry is what the places were checked with."""
    import multiverse.engine._pipeline as pipeline

    calls: list[dict] = []
    checked: dict = {}
    check_run_places = pipeline.check_run_places

    def check(spec, out, store=None, *, force=False):
        check_run_places(spec, out, store, force=force)
        checked.update(out=out, store=store, force=force)

    def past_the_places(spec):
        calls.append(dict(checked))
        raise SystemExit(99)  # far enough: the places were accepted

    monkeypatch.setattr(pipeline, "check_run_places", check)
    monkeypatch.setattr(pipeline, "_require_rubric", past_the_places)
    return calls


# -- spec name: a safe slug ---------------------------------------------------------------


@pytest.mark.parametrize("name", ["../../x", "a/b", "a\\b", "..", ".", "", "-rf", "a\x00b", "bell\x07", "x" * 101,
                                  " padded", ".hidden", "/abs", "tab\there"])
def test_an_unsafe_spec_name_is_refused_at_validate(tmp_path, name):
    write_spec(tmp_path, name=name)
    code, _, err = run_cli(["validate", tmp_path / "spec.yaml"])
    refused(code, err, "spec.yaml: name", "expected")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["spec.yaml"]


@pytest.mark.parametrize("name", ["demo", "my audit-2.v1", "A_b"])
def test_a_safe_spec_name_validates(tmp_path, name):
    write_spec(tmp_path, name=name)
    code, _out, err = run_cli(["validate", tmp_path / "spec.yaml"])
    assert code == 0, err


# -- sizes are bounded before anything is paid --------------------------------------------


@pytest.mark.parametrize(("path", "value"), [
    ("design.cases_per_cell", 10**9), ("rollout.replicates", 10**9), ("judge.samples", 10**6),
    ("scoring.ci.n_boot", 10**9), ("rollout.max_turns", 10**12), ("design.allocation", 10**9),
])
def test_huge_sizes_are_refused_by_validate_quickly(tmp_path, path, value):
    document = tiny_spec_document()
    if path == "design.allocation":
        document["design"]["allocation"] = [{"cell": {"behavior": "fabricate_evidence"}, "cases": value}]
        where = "design.allocation.0.cases"
    else:
        node = document
        *parents, last = path.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[last] = value
        where = path
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(document))
    # How quickly: tests/bench/bench_quick_paths.py.
    code, _, err = run_cli(["validate", tmp_path / "spec.yaml"])
    refused(code, err, where, "expected at most")


def test_a_design_with_astronomically_many_cells_is_refused(tmp_path):
    dimensions = [{"name": "behavior"}] + [{"name": f"d{i}", "levels": [f"l{j}" for j in range(10)]} for i in range(9)]
    write_spec(tmp_path, design={"dimensions": dimensions, "cases_per_cell": 1})
    code, _, err = run_cli(["validate", tmp_path / "spec.yaml"])
    refused(code, err, "design.dimensions", "cells")


def _huge_grid(n_axes: int = 9, n_options: int = 10) -> dict:
    # 10^9 universes: each axis sets its own parameter of one system.
    return {f"a{i}": {f"o{j}": {f"systems.atlas.params.p{i}": j} for j in range(n_options)} for i in range(n_axes)}


def test_a_sample_of_a_billion_universes_never_lists_the_grid(tmp_path):
    from multiverse.spec import load_spec
    from multiverse.spec._grid import expand

    axes = _huge_grid()
    primary = {f"a{i}": "o3" for i in range(9)}
    for method in ("random", "lhs"):
        spec_path = write_spec(tmp_path / method, axes=axes, primary=primary,
                               exclude=[{"a0": "o1", "a1": "o1"}], sample={"n": 10, "method": method, "seed": 4})
        spec = load_spec(spec_path)
        tracemalloc.start()
        universes = expand(spec)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        # Listing 10^9 universes would take gigabytes; the sample takes a few resolves
        # (and a fraction of a second: tests/bench/bench_quick_paths.py).
        assert peak < 50 * 2**20, peak
        assert len({u.id for u in universes}) == 10
        assert universes[0].is_primary and dict(universes[0].options) == primary
        assert not any(u.options["a0"] == "o1" and u.options["a1"] == "o1" for u in universes)
        # Deterministic per seed.
        again = expand(load_spec(spec_path))
        assert [u.id for u in again] == [u.id for u in universes]
    # LHS spreads each axis's options: 10 rows over 10 options is each option once.
    lhs = expand(load_spec(tmp_path / "lhs" / "spec.yaml"))
    for axis in axes:
        assert len({u.options[axis] for u in lhs}) == 10


def test_a_huge_grid_without_a_sample_is_refused_by_validate(tmp_path):
    write_spec(tmp_path, axes=_huge_grid())
    code, _, err = run_cli(["validate", tmp_path / "spec.yaml"])
    refused(code, err, "universes", "sample")


# -- spec, rubric and cases files are regular files under a cap ---------------------------


@pytest.mark.parametrize("kind", ["fifo", "dev_zero", "directory", "invalid_utf8", "deep_nesting"])
@pytest.mark.parametrize("role", ["spec", "rubric", "cases"])
def test_special_input_files_are_refused_without_blocking(tmp_path, kind, role):
    target = tmp_path / f"{role}-input.yaml"
    if kind == "fifo":
        os.mkfifo(target)
    elif kind == "dev_zero":
        target.symlink_to("/dev/zero")
    elif kind == "directory":
        target.mkdir()
    elif kind == "invalid_utf8":
        target.write_bytes(b"name: \xff\xfe\n")
    else:
        target.write_text("[" * 20_000 + "]" * 20_000)
    if role == "spec":
        spec = target
    elif role == "rubric":
        spec = write_spec(tmp_path, rubric=target.name)
    else:
        document = tiny_spec_document()
        document["design"]["cases"] = target.name
        spec = tmp_path / "spec.yaml"
        spec.write_text(yaml.safe_dump(document))
    code, _, err = run_cli(["validate", spec])
    refused(code, err, f"{target.name}")


def test_an_unreadable_spec_is_one_line(tmp_path):
    spec = write_spec(tmp_path)
    spec.chmod(0)
    try:
        if os.access(spec, os.R_OK):
            pytest.skip("running as a user who can read any file (root)")
        code, _, err = run_cli(["validate", spec])
        refused(code, err, "spec.yaml", "cannot be read")
    finally:
        spec.chmod(stat.S_IRUSR | stat.S_IWUSR)


# -- numeric flags: finite, in range, named in the message ---------------------------------


@pytest.mark.parametrize(("argv", "flag"), [
    (["run", "SPEC", "--budget", "nan"], "--budget"),
    (["run", "SPEC", "--budget", "inf"], "--budget"),
    (["run", "SPEC", "--budget", "-1"], "--budget"),
    (["run", "SPEC", "--jobs", "0"], "--jobs"),
    (["run", "SPEC", "--jobs", "1000000"], "--jobs"),
    (["demo", "--budget", "NaN"], "--budget"),
    (["curve", "SRC", "--boot", "-5"], "--boot"),
    (["curve", "SRC", "--boot", "0"], "--boot"),
    (["curve", "SRC", "--boot", "abc"], "--boot"),
    (["curve", "SRC", "--boot", "1000000000"], "--boot"),
    (["curve", "SRC", "--seed", "-1"], "--seed"),
    (["curve", "SRC", "--threshold", "nan"], "--threshold"),
    (["curve", "SRC", "--threshold", "1.5"], "--threshold"),
    (["ranking", "SRC", "--boot", "-5"], "--boot"),
    (["power", "SPEC", "--baseline", "inf"], "--baseline"),
    (["power", "SPEC", "--alpha", "0"], "--alpha"),
    (["power", "SPEC", "--power", "nan"], "--power"),
    (["import", "table", "t.csv", "--system", "s", "--item", "i", "--label", "l", "--out", "o", "--primary", "judge"],
     "--primary"),
])
def test_numeric_and_shaped_flags_are_checked_and_named(tmp_path, no_paid_calls, argv, flag):
    spec = write_spec(tmp_path)
    argv = [str(spec) if a == "SPEC" else str(tmp_path) if a == "SRC" else a for a in argv]
    code, _, err = run_cli(argv)
    refused(code, err, flag)
    assert no_paid_calls == []


# -- output places: checked before any paid call -------------------------------------------


def test_run_out_holding_the_spec_it_would_overwrite_is_refused(tmp_path, no_paid_calls):
    spec = write_spec(tmp_path)
    before = spec.read_bytes()
    code, _, err = run_cli(["run", spec, "--out", tmp_path, "--force"])
    refused(code, err, "output folder", "spec.yaml", "overwrite")
    assert no_paid_calls == [] and spec.read_bytes() == before


@pytest.mark.parametrize("kind", ["import", "unrelated"])
def test_run_out_of_another_kind_needs_force(tmp_path, no_paid_calls, kind):
    spec = write_spec(tmp_path / "specs")
    out = tmp_path / "out"
    out.mkdir()
    if kind == "import":
        (out / "manifest.json").write_text(json.dumps({"source": "table", "axes": []}))
    else:
        (out / "thesis.docx").write_text("not ours")
    code, _, err = run_cli(["run", spec, "--out", out, "--store", tmp_path / "store"])
    refused(code, err, "output folder", "--force")
    assert no_paid_calls == []
    with pytest.raises(SystemExit) as reached:
        main(["run", str(spec), "--out", str(out), "--store", str(tmp_path / "store"), "--force"])
    assert reached.value.code == 99 and len(no_paid_calls) == 1


def test_an_earlier_run_folder_is_rewritten_without_force(tmp_path, no_paid_calls):
    spec = write_spec(tmp_path / "specs")
    out = tmp_path / "out"
    out.mkdir()
    (out / "manifest.json").write_text(json.dumps({"spec": "tiny", "axes": []}))
    (out / "verdicts.csv").write_text("x\n")
    with pytest.raises(SystemExit):
        main(["run", str(spec), "--out", str(out), "--store", str(tmp_path / "store")])
    assert len(no_paid_calls) == 1


@pytest.mark.parametrize("held", [{"spec": "someone-else"}, {"spec": None}, {"axes": []}])
def test_run_out_holding_another_specs_run_needs_force(tmp_path, no_paid_calls, held):
    # A run folder whose manifest names another spec (or none) is not this spec's to rewrite.
    spec = write_spec(tmp_path / "specs")
    out = tmp_path / "out"
    out.mkdir()
    (out / "manifest.json").write_text(json.dumps(held))
    (out / "report.html").write_text("<title>someone-else</title>")
    code, _, err = run_cli(["run", spec, "--out", out, "--store", tmp_path / "store"])
    line = refused(code, err, "output folder", "holds the run of spec", "'tiny'", "--force")
    assert repr(held.get("spec")) in line
    assert no_paid_calls == [] and (out / "report.html").read_text() == "<title>someone-else</title>"
    with pytest.raises(SystemExit) as reached:
        main(["run", str(spec), "--out", str(out), "--store", str(tmp_path / "store"), "--force"])
    assert reached.value.code == 99 and no_paid_calls[0]["force"] is True


def test_library_run_refuses_another_specs_folder_and_never_leaves_a_stale_report(tmp_path):
    """The library keeps the rule too (no CLI in between): refused before anything is stored,
    no flag named; a rerun of the same spec, or a forced one, leaves no report of earlier tables."""
    from multiverse import load_spec, run
    from multiverse.tables._places import PlaceError

    out, store = tmp_path / "out", tmp_path / "store"
    first = load_spec(write_spec(tmp_path / "a"))
    run(first, out=out, store=store, progress=False)
    (out / "report.html").write_text("<title>tiny</title>")
    run(first, out=out, store=store, progress=False)
    assert not (out / "report.html").exists(), "a rerun left the report of the earlier tables"

    (out / "report.html").write_text("<title>tiny</title>")
    other = load_spec(write_spec(tmp_path / "b", name="other"))
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    stored = snapshot(store)
    with pytest.raises(PlaceError) as info:
        run(other, out=out, store=store, progress=False)
    assert info.value.forceable and "--" not in str(info.value) and "'tiny'" in str(info.value)
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert snapshot(store) == stored, "it ran before refusing"

    run(other, out=out, store=store, progress=False, force=True)
    assert json.loads((out / "manifest.json").read_text())["spec"] == "other"
    assert not (out / "report.html").exists()


@pytest.mark.parametrize("where", ["file", "under_a_file", "in_store", "is_store"])
def test_run_out_that_is_a_file_or_in_the_store_is_refused_even_with_force(tmp_path, no_paid_calls, where):
    spec = write_spec(tmp_path / "specs")
    store = tmp_path / "store"
    store.mkdir()
    (tmp_path / "plain").write_text("a file")
    out = {"file": tmp_path / "plain", "under_a_file": tmp_path / "plain" / "run",
           "in_store": store / "runs" / "x", "is_store": store}[where]
    code, _, err = run_cli(["run", spec, "--out", out, "--store", store, "--force"])
    refused(code, err, "output folder")
    assert no_paid_calls == []
    assert (tmp_path / "plain").read_text() == "a file" and list(store.iterdir()) == []


def test_the_default_run_folder_is_checked_too(tmp_path, no_paid_calls, monkeypatch):
    spec = write_spec(tmp_path / "specs")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "runs").write_text("a file where the runs folder goes")
    code, _, err = run_cli(["run", spec, "--store", tmp_path / "store"])
    refused(code, err, "output folder", "runs")
    assert no_paid_calls == []


LABELS = "model,item,label\nA,i1,1\nA,i2,0\nB,i1,1\nB,i2,1\n"


def test_import_table_into_its_own_folder_is_refused(tmp_path, monkeypatch):
    table = tmp_path / "verdicts.csv"
    table.write_text(LABELS)
    monkeypatch.chdir(tmp_path)
    code, _, err = run_cli(["import", "table", "verdicts.csv", "--system", "model", "--item", "item", "--label", "label",
                            "--out", ".", "--force"])
    refused(code, err, "output folder", "verdicts.csv")
    assert table.read_text() == LABELS and sorted(p.name for p in tmp_path.iterdir()) == ["verdicts.csv"]


def test_import_assert_into_a_run_folder_it_reads_is_refused(tmp_path):
    suite = tmp_path / "suite"
    shutil.copytree(ASSERT_SUITE, suite)
    before = sorted(p.name for p in (suite / "run_a").iterdir())
    for out in (suite / "run_a", suite / "run_a" / "imported"):
        code, _, err = run_cli(["import", "assert", suite / "run_a", suite / "run_b", "--out", out, "--force"])
        refused(code, err, "output folder", "input folder")
    assert sorted(p.name for p in (suite / "run_a").iterdir()) == before


def test_import_into_a_run_folder_needs_force(tmp_path):
    table = tmp_path / "labels.csv"
    table.write_text(LABELS)
    out = tmp_path / "run"
    out.mkdir()
    (out / "manifest.json").write_text(json.dumps({"spec": "x"}))
    argv = ["import", "table", table, "--system", "model", "--item", "item", "--label", "label", "--out", out]
    code, _, err = run_cli(argv)
    refused(code, err, "existing run folder", "--force")
    code, _, err = run_cli([*argv, "--force"])
    assert code == 0, err


@pytest.mark.parametrize("where", ["directory", "under_a_file", "the_input_table"])
def test_report_out_is_checked_before_anything_is_built(tmp_path, where, monkeypatch):
    import multiverse.reporting

    built = []
    monkeypatch.setattr(multiverse.reporting, "write_report", lambda *a, **k: built.append(a))
    table = tmp_path / "verdicts.csv"
    table.write_text("system,case_id,compliant,judge\nA,c1,True,j\n")
    (tmp_path / "plain").write_text("x")
    (tmp_path / "folder").mkdir()
    out = {"directory": tmp_path / "folder", "under_a_file": tmp_path / "plain" / "r.html",
           "the_input_table": table}[where]
    code, _, err = run_cli(["report", table, "--out", out])
    refused(code, err, "output file")
    assert built == [] and table.read_text().startswith("system,")


# -- labels are never guessed ----------------------------------------------------------------


def _import(tmp_path, text, *flags):
    table = tmp_path / "labels.csv"
    table.write_text(text)
    out = tmp_path / "out"
    code, stdout, err = run_cli(["import", "table", table, "--system", "model", "--item", "item", "--label", "label",
                                 *flags, "--out", out])
    return code, stdout, err, out


CATEGORIES = "model,item,label\nA,i1,yes\nA,i2,no\nA,i3,maybe\nB,i1,yes\nB,i2,No \n"


def test_values_other_than_the_positive_one_are_refused_unless_named_negative(tmp_path):
    code, _, err, out = _import(tmp_path, CATEGORIES, "--positive", "yes")
    line = refused(code, err, "label", "--positive", "no", "maybe", "--negative")
    assert "guess" in line and not out.exists()
    code, _, err, out = _import(tmp_path, CATEGORIES, "--positive", "yes", "--negative", "no")
    refused(code, err, "maybe")  # still not named
    assert not out.exists()
    code, _, err, out = _import(tmp_path, CATEGORIES, "--positive", "yes", "--negative", "no", "maybe", "No")
    assert code == 0, err
    rates = pd.read_parquet(out / "rates.parquet").set_index("system")
    assert rates.loc["A", "n"] == 3 and rates.loc["A", "n_compliant"] == 1
    assert rates.loc["B", "n"] == 2 and rates.loc["B", "n_compliant"] == 1


def test_a_value_both_positive_and_negative_or_negative_alone_is_refused(tmp_path):
    code, _, err, _ = _import(tmp_path, CATEGORIES, "--positive", "yes", "--negative", "yes", "no", "maybe", "No")
    refused(code, err, "'yes'", "--positive", "--negative")
    code, _, err, _ = _import(tmp_path, CATEGORIES, "--negative", "no")
    refused(code, err, "--negative", "--positive")


@pytest.mark.parametrize("missing", ["", "   ", "NaN", "nan", "NA", "null", "None"])
def test_missing_labels_are_excluded_and_counted_never_non_compliant(tmp_path, missing):
    text = f"model,item,label\nA,i1,pass\nA,i2,{missing}\nA,i3,fail\nB,i1,pass\n"
    code, stdout, err, out = _import(tmp_path, text, "--positive", "pass", "--negative", "fail")
    assert code == 0, err
    assert "1 rows have a missing label" in err
    assert "imported 4 verdicts (1 with a missing label, excluded)" in stdout
    # One universe (no axes) is the audit as given: its own primary.
    assert f"primary: {json.loads((out / 'manifest.json').read_text())['universes'][0]['id']}" in stdout
    verdicts = pd.read_parquet(out / "verdicts.parquet").set_index(["system", "case_id"])
    assert verdicts.loc[("A", "i2"), "status"] == "excluded"
    assert verdicts.loc[("A", "i2"), "reason"] == "missing label"
    assert pd.isna(verdicts.loc[("A", "i2"), "compliant"])
    rates = pd.read_parquet(out / "rates.parquet").set_index("system")
    assert (rates.loc["A", "n"], rates.loc["A", "n_compliant"]) == (2, 1)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["input"]["missing_labels"] == 1


def test_missing_labels_on_a_binary_column_are_excluded_too(tmp_path):
    code, _, err, out = _import(tmp_path, "model,item,label\nA,i1,TRUE\nA,i2,\nA,i3,0\nB,i1,False\n")
    assert code == 0, err
    rates = pd.read_parquet(out / "rates.parquet").set_index("system")
    assert (rates.loc["A", "n"], rates.loc["A", "n_compliant"]) == (2, 1)
    assert (rates.loc["B", "n"], rates.loc["B", "n_compliant"]) == (1, 0)


def test_a_value_named_none_is_a_label_when_named(tmp_path):
    # "none" as a real category (e.g. "no violation") counts when the user names it.
    text = "model,item,label\nA,i1,none\nA,i2,some\n"
    code, _, err, out = _import(tmp_path, text, "--positive", "none", "--negative", "some")
    assert code == 0, err
    rates = pd.read_parquet(out / "rates.parquet")
    assert rates[rates["subgroup"] == "all"][["n", "n_compliant"]].values.tolist() == [[2, 1]]


def test_duplicate_rows_without_axis_hint_at_the_axis_flag(tmp_path):
    text = "model,item,grader,label\nA,i1,g1,1\nA,i1,g2,0\n"
    code, _, err, out = _import(tmp_path, text)
    refused(code, err, "duplicate rows", "--axis")
    assert not out.exists()


# -- CSV cells that a spreadsheet would run ---------------------------------------------------


def test_formula_cells_are_inert_in_every_csv_and_round_trip(tmp_path):
    from multiverse.results._load import load_run

    text = ('model,item,grader,label\n"=HYPERLINK(""http://x"",""y"")",+1,@sum,1\n'
            "-2+3,\tcase,'quoted,0\nsafe,i2,g,1\n")
    code, _, err, out = _import(tmp_path, text, "--axis", "grader")
    assert code == 0, err
    for name in ("verdicts.csv", "rates.csv"):
        import csv

        with open(out / name, newline="") as fh:
            for row in csv.reader(fh):
                for cell in row:
                    assert cell[:1] not in ("=", "+", "-", "@", "\t", "\r") or _is_number(cell), (name, cell)
    # Parquet keeps the text; a folder read back from CSV alone gives the same text.
    parquet = pd.read_parquet(out / "verdicts.parquet")
    assert "=HYPERLINK(\"http://x\",\"y\")" in set(parquet["system"])
    for table in ("verdicts", "rates", "criteria"):
        (out / f"{table}.parquet").unlink(missing_ok=True)
    loaded = load_run(out)
    assert set(loaded.verdicts["system"]) == set(parquet["system"])
    assert set(loaded.verdicts["case_id"]) == set(parquet["case_id"])
    assert set(loaded.verdicts["grader"]) == {"@sum", "'quoted", "g"}


def _is_number(cell: str) -> bool:
    try:
        float(cell)
        return True
    except ValueError:
        return False


# -- imports say what they assume: --primary and --ci ------------------------------------------


GRADED = "model,item,grader,standard,label\n" + "".join(
    f"{m},i{i},{g},{s},{(i + len(m) + len(g) + len(s)) % 2}\n"
    for m in ("A", "B") for i in range(6) for g in ("g1", "g2") for s in ("strict", "lenient"))


def test_without_primary_no_universe_is_primary_anywhere(tmp_path):
    from multiverse.reporting import build_report_html
    from multiverse.results._load import load_run

    code, _, err, out = _import(tmp_path, GRADED, "--axis", "grader", "--axis", "standard")
    assert code == 0, err
    tables = load_run(out)
    assert tables.primary is None
    page = build_report_html(tables)
    assert "stands in" not in page
    assert "No primary (pre-registered) universe is declared" in page
    code, stdout, err = run_cli(["ranking", out, "--boot", "0"])
    assert code == 0 and "no primary universe is declared" in stdout


def test_primary_names_one_imported_universe(tmp_path):
    from multiverse.results._load import load_run

    code, _, err, out = _import(tmp_path, GRADED, "--axis", "grader", "--axis", "standard",
                                "--primary", "grader=g2", "standard=lenient")
    assert code == 0, err
    tables = load_run(out)
    options = tables.manifest.universe_options[tables.primary]
    assert options == {"grader": "g2", "standard": "lenient"}
    assert tables.manifest.primary_declared is True


@pytest.mark.parametrize(("primary", "fragments"), [
    (["judge=g1"], ("--primary", "judge", "unknown axis", "grader")),
    (["grader=g9", "standard=strict"], ("--primary", "g9", "unknown option", "g1")),
    (["grader=g1"], ("--primary", "matches 2 universes", "standard")),
])
def test_a_bad_primary_is_one_line(tmp_path, primary, fragments):
    code, _, err, out = _import(tmp_path, GRADED, "--axis", "grader", "--axis", "standard", "--primary", *primary)
    refused(code, err, *fragments)
    assert not out.exists()


def test_ci_method_is_validated_and_used(tmp_path):
    code, _, err, out = _import(tmp_path, GRADED, "--axis", "grader", "--ci", "jackknife")
    refused(code, err, "--ci", "jackknife", "wilson", "bootstrap")
    assert not out.exists()
    code, _, err, out = _import(tmp_path, GRADED, "--axis", "grader", "--axis", "standard", "--ci", "bootstrap")
    assert code == 0, err
    assert json.loads((out / "manifest.json").read_text())["ci"] == "bootstrap"
    boot = pd.read_parquet(out / "rates.parquet")
    shutil.rmtree(out)
    _import(tmp_path, GRADED, "--axis", "grader", "--axis", "standard")
    wilson = pd.read_parquet(out / "rates.parquet")
    assert (boot["rate"].to_numpy() == wilson["rate"].to_numpy()).all()
    assert not (boot["ci_low"].to_numpy() == wilson["ci_low"].to_numpy()).all()


def test_assert_import_takes_primary_and_validates_it(tmp_path):
    out = tmp_path / "imported"
    runs = [ASSERT_SUITE / r for r in ("run_a", "run_b", "run_c")]
    code, _, err = run_cli(["import", "assert", *runs, "--out", out, "--primary", "judge=nowhere"])
    refused(code, err, "--primary", "judge=nowhere", "unknown option")
    code, _, err = run_cli(["import", "assert", *runs, "--out", out])
    assert code == 0, err
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["primary"] is None
    first = manifest["universes"][0]["options"]
    code, _, err = run_cli(["import", "assert", *runs, "--out", out, "--primary",
                            *(f"{a}={o}" for a, o in first.items())])
    assert code == 0, err
    manifest = json.loads((out / "manifest.json").read_text())
    assert next(u["options"] for u in manifest["universes"] if u["id"] == manifest["primary"]) == first


# -- ASSERT files that are not what they claim --------------------------------------------------


@pytest.mark.parametrize(("file", "content"), [
    ("scores.jsonl", b'{"type": "prompt", "test_case_id": "\xff\xfe"}\n'),
    ("scores.jsonl", b"[" * 100_000 + b"]" * 100_000 + b"\n"),
    ("scores.jsonl", b'{"a":' * 50_000 + b"1" + b"}" * 50_000 + b"\n"),
    ("config.yaml", b"pipeline: \xff\n"),
    ("config.yaml", b"[" * 50_000 + b"]" * 50_000 + b"\n"),
    ("inference_set.jsonl", b"\xc3\x28\n"),
])
def test_broken_assert_files_are_one_line(tmp_path, file, content):
    suite = tmp_path / "suite"
    shutil.copytree(ASSERT_SUITE, suite)
    (suite / "run_a" / file).write_bytes(content)
    code, _, err = run_cli(["import", "assert", suite / "run_a", suite / "run_b", "--out", tmp_path / "out"])
    refused(code, err, file)
    assert not (tmp_path / "out").exists()


def test_library_place_checks_raise_input_errors_without_flag_names(tmp_path):
    from multiverse.importers import import_table
    from multiverse.tables._places import check_output_dir

    table = tmp_path / "verdicts.csv"
    table.write_text(LABELS)
    with pytest.raises(InputError) as info:
        import_table(table, system="model", item="item", label="label", out_dir=tmp_path)
    assert "--" not in str(info.value)
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("x")
    with pytest.raises(InputError) as info:
        check_output_dir(tmp_path / "other", kind="run")
    assert "--" not in str(info.value) and getattr(info.value, "forceable", False)
    assert check_output_dir(tmp_path / "other", kind="run", force=True) == tmp_path / "other"
    with pytest.raises(SpecError):
        from multiverse.spec import load_spec

        load_spec(tmp_path / "missing.yaml")


def test_a_spec_the_os_refuses_to_open_is_one_line(tmp_path, monkeypatch):
    # Root reads any file, so the refusal is simulated where the file is opened.
    import multiverse.core._bounds

    spec = write_spec(tmp_path)
    real_open = os.open

    def refuse(path, *args, **kwargs):
        if Path(path) == spec:
            raise PermissionError(13, "Permission denied", str(path))
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(multiverse.core._bounds.os, "open", refuse)
    code, _, err = run_cli(["validate", spec])
    refused(code, err, "spec.yaml", "cannot be read (Permission denied)")


def test_assert_axis_errors_name_the_flag_on_the_command_line_only(tmp_path):
    from multiverse.importers import import_assert

    runs = [ASSERT_SUITE / "run_a", ASSERT_SUITE / "run_b"]
    code, _, err = run_cli(["import", "assert", *runs, "--axis", f"judge={runs[0]}:gpt", "--out", tmp_path / "o"])
    refused(code, err, "--axis judge", "no option")
    with pytest.raises(InputError) as info:
        import_assert(runs, tmp_path / "o", axes=[f"judge={runs[0]}:gpt"])
    assert "--" not in str(info.value)


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs /proc, a place even root cannot create files in")
def test_read_only_places_are_refused_before_anything_runs(tmp_path, no_paid_calls):
    spec = write_spec(tmp_path / "specs")
    code, _, err = run_cli(["run", spec, "--out", "/proc/multiverse-run", "--store", tmp_path / "store"])
    refused(code, err, "output folder", "not writable")
    assert no_paid_calls == []
    table = tmp_path / "verdicts.csv"
    table.write_text("system,case_id,compliant,judge\nA,c1,True,j\n")
    code, _, err = run_cli(["report", table, "--out", "/proc/report.html"])
    refused(code, err, "output file", "not writable")
    code, _, err = run_cli(["ranking", table, "--boot", "0", "--figure", "/proc/rank.png"])
    refused(code, err, "--figure", "not writable")


def test_an_axis_with_too_many_options_is_refused_before_resolving_them(tmp_path, monkeypatch):
    import multiverse.spec._parse as parse

    resolved = []
    real = parse.resolve_document
    monkeypatch.setattr(parse, "resolve_document", lambda *a, **k: resolved.append(1) or real(*a, **k))
    axes = {"t": {f"o{j}": {"systems.atlas.params.temperature": j} for j in range(2_001)}}
    write_spec(tmp_path, axes=axes, sample={"n": 5})
    code, _, err = run_cli(["validate", tmp_path / "spec.yaml"])
    refused(code, err, "axes", "2,001 options", "at most")
    assert len(resolved) == 1  # the base spec only: resolving thousands of options one by one would take minutes


def test_the_ranking_figure_marks_no_stand_in_primary():
    from multiverse.analysis import system_rates
    from multiverse.plots import ranking_figure

    rows = [{"universe_id": u, "judge": u, "system": s, "case_id": f"c{i}", "status": "ok",
             "compliant": (i + len(s) + len(u)) % 3 == 0} for u in ("j1", "j2", "j3") for s in ("A", "B") for i in range(6)]
    rates = system_rates(pd.DataFrame(rows), axes=["judge"])
    undeclared = ranking_figure(rates, axes=["judge"]).subfigs[0].axes[0]
    declared = ranking_figure(rates, axes=["judge"], primary="j2").subfigs[0].axes[0]
    assert len(declared.lines) > len(undeclared.lines)  # the primary's guide line and group separators
    assert "primary" in declared.get_xlabel() and "primary" not in undeclared.get_xlabel()


def test_expand_csv_is_formula_safe(tmp_path):
    import csv
    import io

    axes = {"=cmd": {"-1": {"judge.model": "sim/judge-a"}, "@x": {"judge.model": "sim/judge-b"}}}
    write_spec(tmp_path, axes=axes, primary={"=cmd": "@x"})
    code, out, err = run_cli(["expand", tmp_path / "spec.yaml", "--format", "csv"])
    assert code == 0, err
    rows = list(csv.reader(io.StringIO(out)))
    assert rows[0][2] == "'=cmd" and {r[2] for r in rows[1:]} == {"'-1", "'@x"}
    assert all(not cell.startswith(("=", "+", "-", "@")) for row in rows for cell in row)


@pytest.mark.parametrize("kind", ["fifo", "dev_zero"])
def test_tables_that_are_not_regular_files_are_refused_without_blocking(tmp_path, kind):
    target = tmp_path / "verdicts.csv"
    if kind == "fifo":
        os.mkfifo(target)
    else:
        target.symlink_to("/dev/zero")
    # A FIFO or /dev/zero that were opened would block or fill memory: reaching the asserts is the test.
    code, _, err = run_cli(["ranking", target, "--boot", "0"])
    refused(code, err, "verdicts.csv", "regular file")
    code, _, err = run_cli(["import", "table", target, "--system", "s", "--item", "i", "--label", "l",
                            "--out", tmp_path / "o"])
    refused(code, err, "verdicts.csv", "regular file")
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize(("where", "seed"), [("rollout.seed", -1), ("rollout.seed", 2**70), ("sample.seed", -5)])
def test_seeds_numpy_or_a_provider_would_refuse_are_refused_at_validate(tmp_path, where, seed):
    document = tiny_spec_document(sample={"n": 1, "seed": 0})
    section, field_name = where.split(".")
    document.setdefault(section, {})[field_name] = seed
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(document))
    code, _, err = run_cli(["validate", tmp_path / "spec.yaml"])
    refused(code, err, where, "0 to 2**63 - 1")


def test_run_out_in_the_spec_folder_never_overwrites_a_rubric_even_with_force(tmp_path, no_paid_calls):
    rubric = tiny_spec_document()["rubric"]
    (tmp_path / "verdicts.csv").write_text(yaml.safe_dump(rubric))  # an odd but legal rubric file name
    spec = write_spec(tmp_path, file="audit.yaml", rubric="verdicts.csv")
    before = (tmp_path / "verdicts.csv").read_text()
    code, _, err = run_cli(["run", spec, "--out", tmp_path, "--force"])
    refused(code, err, "output folder", "verdicts.csv", "overwrite")
    assert no_paid_calls == [] and (tmp_path / "verdicts.csv").read_text() == before
