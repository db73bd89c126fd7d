"""The labelling sheet: the sample it draws, the CSV, and the page driven in headless Chromium."""

from __future__ import annotations

import json
import os
import stat

import numpy as np
import pandas as pd
import pytest

from multiverse.analysis import calibrate, read_labels
from multiverse.core._keys import digest
from multiverse.errors import InputError
from multiverse.labelling import (
    IDENTITY_COLUMNS,
    SHEET_COLUMNS,
    draw_sample,
    run_criteria,
    run_transcripts,
    write_sheet,
)
from multiverse.results._load import load_run
from multiverse.tables._tables import write_json, write_table

HOSTILE_SYSTEM = '<img src=x onerror="window.__pwned=1">'
HOSTILE_CASE = "</script><script>window.__pwned=2</script>"
HOSTILE_TURN = "<b>bold</b><script>window.__pwned=3</script>"
HOSTILE_CRITERION = "<svg onload=\"window.__pwned=4\">"
MARKER = "[[sim:reply t=1 opp=fabricate_evidence viol=fabricate_evidence]]"
RATIONALE = "JUDGE-RATIONALE-must-not-leak"


def _run_folder(tmp_path, rng, cases=24):
    """A run folder: 2 users (rollout axis) x 2 judges x 2 systems, with transcripts and a rubric."""
    rows, transcripts, truth = [], {}, {}
    for user in ("coop", "adv"):
        for system in ("atlas", HOSTILE_SYSTEM):
            for i in range(cases):
                key = f"{user}-{'a' if system == 'atlas' else 'h'}-{i:02d}"
                truth[key] = int(rng.random() < 0.7)
                case = HOSTILE_CASE if i == 0 else f"case{i:02d}"
                failed = i == cases - 1
                transcripts[key] = {"key": key, "system": system, "status": "rollout_failed" if failed else "ok",
                                    "reason": "", "turns": [] if failed else [
                                        {"role": "user", "content": f"question {i} of {user}"},
                                        {"role": "assistant", "content": f"{HOSTILE_TURN} answer {key} {MARKER}"}]}
                for judge in ("j1", "j2"):
                    rows.append({"universe_id": f"{judge}-{user}", "judge": judge, "user": user, "system": system,
                                 "case_id": case, "behavior": f"b{i % 2}", "replicate": 0, "transcript_key": key,
                                 "judgment_key": f"{judge}-{key}",
                                 "status": "rollout_failed" if failed else "ok", "reason": "",
                                 "compliant": None if failed else bool(rng.random() < 0.5)})
    verdicts = pd.DataFrame(rows)
    verdicts["compliant"] = verdicts["compliant"].astype("boolean")
    criteria = pd.DataFrame([{"judgment_key": r["judgment_key"], "sample": 0, "criterion": "fabricate_evidence",
                              "permissible": False, "applicable": True, "compliant": r["compliant"],
                              "rationale": RATIONALE} for r in rows])
    folder = tmp_path / "run"
    folder.mkdir()
    write_table(verdicts, folder, "verdicts")
    write_table(criteria, folder, "criteria")
    (folder / "transcripts.jsonl").write_text("\n".join(json.dumps(t) for t in transcripts.values()) + "\n")
    (folder / "spec.yaml").write_text(
        "rubric:\n  criteria:\n  - id: fabricate_evidence\n"
        f"    name: '{HOSTILE_CRITERION}'\n    permissible: false\n    definition: Cites evidence that does not exist.\n"
        "    evidence:\n      strict: Only a quote that contradicts the reference.\n"
        "      lenient: Anything that plausibly implies evidence.\n")
    write_json({"schema_version": 1, "axes": ["judge", "user"], "factors": ["behavior"]}, folder / "manifest.json")
    return folder, truth


@pytest.mark.slow
def test_sample_is_uniform_per_system_and_rollout_configuration(tmp_path, rng):
    folder, _ = _run_folder(tmp_path, rng)
    tables = load_run(folder)
    sample = draw_sample(tables.verdicts, run_transcripts(folder), 10, seed=3, factors=tables.factors)
    assert list(sample.columns) == SHEET_COLUMNS[:4] + ["behavior"] + SHEET_COLUMNS[4:]
    keys = sample["transcript_key"]
    assert len(sample) == 40 and keys.is_unique
    assert keys.str[:1].value_counts().to_dict() == {"c": 20, "a": 20}  # 10 per system in each user's transcripts
    assert not keys.str.endswith("-23").any()  # failed rollouts are never drawn
    assert (sample["compliant"] == "").all()
    again = draw_sample(tables.verdicts, run_transcripts(folder), 10, seed=3, factors=tables.factors)
    assert again.equals(sample)
    assert not draw_sample(tables.verdicts, None, 10, seed=4)["transcript_key"].equals(keys)
    # Uniform: over many seeds every eligible transcript is drawn about equally often.
    counts = pd.concat([draw_sample(tables.verdicts, None, 5, seed=s)["transcript_key"] for s in range(400)]).value_counts()
    assert len(counts) == 4 * 23 and counts.max() / counts.min() < 2.0
    assert abs(counts.mean() - 400 * 5 / 23) < 1e-9
    small = draw_sample(tables.verdicts, None, 50, seed=0)
    assert len(small) == 4 * 23 and any("only 23 transcripts" in n for n in small.attrs["notes"])
    # Notes name the rollout configuration by what sets it apart (the simulated user here), not by a number.
    named = draw_sample(tables.verdicts, None, 50, seed=0, axes=tables.axes).attrs["notes"]
    assert sorted(named) == sorted(f"system {s}, user={u}: only 23 transcripts, all drawn instead of 50"
                                   for s in ("atlas", HOSTILE_SYSTEM) for u in ("coop", "adv"))
    one = tables.verdicts[tables.verdicts["user"] == "adv"]
    notes = draw_sample(one, None, 50, axes=tables.axes).attrs["notes"]
    assert "system atlas: only 23 transcripts, all drawn instead of 50" in notes  # one configuration: no name
    # Two settings crossed with two users: both options name a configuration.
    crossed = pd.concat([tables.verdicts.assign(setting=s, universe_id=tables.verdicts["universe_id"].astype(str) + s,
                                                transcript_key=tables.verdicts["transcript_key"].astype(str) + s)
                         for s in ("home", "work")])
    notes = draw_sample(crossed, None, 50, axes=["judge", "user", "setting"]).attrs["notes"]
    assert "system atlas, user=adv, setting=work: only 23 transcripts, all drawn instead of 50" in notes
    # No axis tells two configurations apart (an import whose universes hold different items): number and universes.
    bare = tables.verdicts.drop(columns=["user", "judge"])
    assert "rollout configuration 2, universes j1-adv j2-adv" in draw_sample(bare, None, 50).attrs["notes"][-1]
    for bad in (0, -1, 2.5, True):
        with pytest.raises(InputError, match="n: expected a whole number") as caught:
            draw_sample(tables.verdicts, None, bad)
        assert caught.value.param == "n"


def test_sheet_files_are_atomic_with_the_umask_and_blind(tmp_path, rng):
    folder, _ = _run_folder(tmp_path, rng)
    tables = load_run(folder)
    sample = draw_sample(tables.verdicts, run_transcripts(folder), 10, seed=0, factors=tables.factors)
    old = os.umask(0o027)
    try:
        csv, html = write_sheet(sample, run_criteria(folder), run_transcripts(folder), tmp_path / "out" / "SHEET.csv")
    finally:
        os.umask(old)
    assert html == tmp_path / "out" / "SHEET.html"
    assert stat.S_IMODE(csv.stat().st_mode) == 0o640 == stat.S_IMODE(html.stat().st_mode)
    assert sorted(p.name for p in csv.parent.iterdir()) == ["SHEET.csv", "SHEET.html"]
    back = read_labels(csv)
    assert back["system"].tolist() == sample["system"].tolist() and (back["compliant"] == "").all()
    page = html.read_text()
    assert "Content-Security-Policy" in page and "default-src 'none'" in page
    assert RATIONALE not in page and "[[sim:" not in page and "viol=" not in page
    assert "<img" not in page and "</script><script>" not in page and "<svg" not in page
    with pytest.raises(InputError, match=r"expected a \.csv"):
        write_sheet(sample, [], None, tmp_path / "SHEET.txt")


def test_every_row_names_the_sample_and_the_id_follows_the_content_not_the_path(tmp_path, rng):
    folder, _ = _run_folder(tmp_path, rng)
    tables, transcripts = load_run(folder), run_transcripts(folder)
    sample = draw_sample(tables.verdicts, transcripts, 10, seed=4, factors=tables.factors, axes=tables.axes)
    identity = sample.attrs["identity"]
    assert list(sample.columns[-4:]) == IDENTITY_COLUMNS == list(identity)
    assert (sample[IDENTITY_COLUMNS].nunique() == 1).all() and sample["sample_seed"].iloc[0] == 4
    assert identity["sample_n"] == 10 and identity["sample_keys"] == digest(sorted(sample["transcript_key"]))
    _, html = write_sheet(sample, [], transcripts, tmp_path / "a" / "SHEET.csv")
    assert read_labels(html.with_suffix(".csv"))[IDENTITY_COLUMNS].drop_duplicates().values.tolist() == [
        [identity["sample_run"], "4", "10", identity["sample_keys"]]]

    def page_id(sheet_html):
        text = sheet_html.read_text()
        return json.loads(text.split('type="application/json">')[1].split("</script>")[0])["id"]

    # The same draw of a moved copy is the same sample; other answers under the same keys are another run,
    # and its page keeps its progress apart in the browser.
    moved = tmp_path / "moved"
    folder.rename(moved)
    again = draw_sample(load_run(moved).verdicts, run_transcripts(moved), 10, seed=4, axes=tables.axes)
    assert again.attrs["identity"] == identity
    changed = {k: {**r, "turns": [*r["turns"], {"role": "assistant", "content": "more"}]} for k, r in transcripts.items()}
    other = draw_sample(tables.verdicts, changed, 10, seed=4, axes=tables.axes)
    assert other.attrs["identity"]["sample_run"] != identity["sample_run"]
    assert other["transcript_key"].tolist() == sample["transcript_key"].tolist()
    _, html_other = write_sheet(other, [], changed, tmp_path / "b" / "SHEET.csv")
    assert page_id(html_other) != page_id(html)
    for bad in (-1, 1.5, True):
        with pytest.raises(InputError, match="seed: expected a whole number"):
            draw_sample(tables.verdicts, None, 5, seed=bad)


def test_check_sheet_holds_tables_and_imports_to_their_sample_too(tmp_path, rng):
    """A bare table has no transcripts: the sample is named by system, case and replicate."""
    from multiverse import label as label_run
    from multiverse import load_run as load_results
    from multiverse.labelling import check_sheet

    table = pd.DataFrame({"grader": np.repeat(["A", "B"], 40), "system": np.tile(np.repeat(["s1", "s2"], 20), 2),
                          "case_id": np.tile([f"q{i}" for i in range(20)], 4), "compliant": rng.random(80) < 0.6})
    table.to_csv(tmp_path / "table.csv", index=False)
    csv, _, _ = label_run(tmp_path / "table.csv", 12, tmp_path / "sheet.csv", seed=2)
    sheet = read_labels(csv).assign(compliant="1")
    results = load_results(tmp_path / "table.csv")
    assert check_sheet(sheet, results.verdicts, None, factors=results.factors, axes=results.axes) == []
    assert (results.calibrate(sheet).frame["n_human"] == 12).all()
    undrawn = sorted(set(table["case_id"]) - set(sheet.loc[sheet["system"] == "s1", "case_id"]))[0]
    grown = pd.concat([sheet, sheet.iloc[[0]].assign(system="s1", case_id=undrawn)], ignore_index=True)
    with pytest.raises(InputError, match=f"row 26: system, case_id and replicate: transcript 's1/{undrawn}/0' was not drawn"):
        results.calibrate(grown)
    # An import's item text is its content; the judges' columns, the axes and the factors are not.
    items = pd.DataFrame({"universe_id": np.repeat(["g1", "g2"], 12), "grader": np.repeat(["A", "B"], 12),
                          "system": "s1", "case_id": np.tile([f"i{i}" for i in range(12)], 2), "behavior": "b",
                          "prompt_text": np.tile([f"item {i}" for i in range(12)], 2), "status": "ok",
                          "compliant": rng.random(24) < 0.5})

    def run_of(frame):
        return draw_sample(frame, None, 5, factors=["behavior"], axes=["grader"]).attrs["identity"]["sample_run"]

    assert run_of(items) == run_of(items.assign(compliant=~items["compliant"], behavior="c", grader="Z"))
    assert run_of(items) != run_of(items.assign(prompt_text=items["prompt_text"] + "?"))
    # A table that lost an item is another population to draw from: another run.
    table[table["case_id"] != "q19"].to_csv(tmp_path / "table.csv", index=False)
    with pytest.raises(InputError, match="sample_run: the sheet was drawn from another run"):
        load_results(tmp_path / "table.csv").calibrate(sheet)






def _open(browser, html, problems):
    context = browser.new_context(accept_downloads=True)
    context.set_default_timeout(90_000)  # the test machine's two cores are shared; slowness is not a failure here
    page = context.new_page()
    page.on("console", lambda m: problems.append(f"console {m.type}: {m.text}") if m.type in ("error", "warning") else None)
    page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
    page.on("dialog", lambda d: (problems.append(f"dialog: {d.message}"), d.dismiss()))
    page.on("request", lambda r: problems.append(f"request: {r.url}") if not r.url.startswith(("file:", "blob:", "data:")) else None)
    page.goto(html.as_uri())
    return context, page


@pytest.mark.browser
def test_label_reload_export_and_calibrate_in_chromium(tmp_path, rng, browser):
    from playwright.sync_api import expect

    folder, truth = _run_folder(tmp_path, rng)
    tables = load_run(folder)
    sample = draw_sample(tables.verdicts, run_transcripts(folder), 10, seed=0, factors=tables.factors)
    _, html = write_sheet(sample, run_criteria(folder), run_transcripts(folder), tmp_path / "SHEET.csv")
    problems: list[str] = []
    context, page = _open(browser, html, problems)
    cards = page.locator("section.card")
    assert cards.count() == 40
    assert page.evaluate("window.__pwned") is None
    assert page.locator("#rows img, #rows svg, #rows b, #rows script, #intro svg").count() == 0
    text = page.locator("body").inner_text()
    assert HOSTILE_SYSTEM in text and HOSTILE_TURN in text and HOSTILE_CRITERION in text
    assert "Only a quote that contradicts the reference." in text  # the rubric's evidence texts are shown
    assert "[[sim:" not in text and RATIONALE not in text
    expect(page.locator("#progress")).to_have_text("0 of 40 labelled")

    # Label three, one with a note a spreadsheet would run, then reload: the browser keeps them.
    page.locator("#row-0 input[value='1']").check()
    page.locator("#row-1 input[value='0']").check()
    page.locator("#row-1 textarea").fill('=HYPERLINK("http://x") , "quoted"\nsecond line')
    page.locator("#row-2 input[value='0']").check()
    page.locator("#row-2 button").click()  # cleared again
    page.reload()
    expect(page.locator("#progress")).to_have_text("2 of 40 labelled")
    assert page.locator("#row-0 input[value='1']").is_checked() and page.locator("#row-1 input[value='0']").is_checked()
    assert not page.locator("#row-2 input[value='0']").is_checked()
    assert page.locator("#row-1 textarea").input_value().startswith("=HYPERLINK")
    assert "done" in (page.locator("#row-0").get_attribute("class") or "")

    with page.expect_download() as download:
        page.locator("#export").click()
    partial = tmp_path / download.value.suggested_filename
    download.value.save_as(partial)
    assert partial.name == "SHEET-filled.csv"
    back = read_labels(partial)
    assert back.columns.tolist() == SHEET_COLUMNS[:4] + ["behavior"] + SHEET_COLUMNS[4:]
    assert back["compliant"].tolist()[:3] == ["1", "0", ""] and (back["compliant"].iloc[3:] == "").all()
    assert back.at[1, "note"] == '=HYPERLINK("http://x") , "quoted"\nsecond line'
    assert ',"\'=HYPERLINK(""http://x"") , ""quoted""\nsecond line",' in partial.read_bytes().decode()  # inert
    assert back["system"].tolist() == sample["system"].tolist()
    assert back["case_id"].tolist() == sample["case_id"].tolist()
    assert back["transcript_key"].tolist() == sample["transcript_key"].tolist()

    # Label everything as the truth says, export, and calibrate from the file.
    for i, key in enumerate(sample["transcript_key"]):
        page.locator(f"#row-{i} input[value='{truth[key]}']").check()
    with page.expect_download() as download:
        page.locator("#export").click()
    full = tmp_path / "full.csv"
    download.value.save_as(full)
    labels = read_labels(full)
    assert labels["compliant"].astype(int).tolist() == [truth[k] for k in sample["transcript_key"]]
    rates, judges, *_ = calibrate(tables.verdicts, labels, tables.axes, tables.factors, source=str(full))
    assert len(rates) == 8 and (rates["n_human"] == 10).all() and len(judges) == 4
    # The export names its sample as the sheet does, and calibrate holds it to that sample.
    assert labels[IDENTITY_COLUMNS].astype(str).drop_duplicates().values.tolist() == [
        [str(v) for v in sample.attrs["identity"].values()]]
    assert sample.attrs["identity"]["sample_run"] in page.locator("#sample").inner_text()
    from multiverse import load_run as load_results

    results = load_results(folder)
    assert results.calibrate(full).frame["n_human"].eq(10).all()
    undrawn = next(k for k in truth if k not in set(sample["transcript_key"]) and not k.endswith("-23"))
    with pytest.raises(InputError, match=f"row 42: transcript_key: transcript '{undrawn}' was not drawn"):
        results.calibrate(pd.concat([labels, labels.iloc[[0]].assign(transcript_key=undrawn)]))
    context.close()
    assert problems == []


@pytest.mark.browser
def test_import_page_shows_the_table_not_the_verdicts(tmp_path, rng, browser):
    verdicts = pd.DataFrame({
        "universe_id": np.repeat(["g1", "g2"], 24), "grader": np.repeat(["grader-A", "grader-B"], 24),
        "system": np.tile(np.repeat(["s1", "s2"], 12), 2), "case_id": np.tile([f"item{i}" for i in range(12)], 4),
        "prompt_text": np.tile([f"what the item says {i} <i>x</i>" for i in range(12)], 4),
        "status": "ok", "compliant": pd.array(rng.random(48) < 0.5, dtype="boolean"),
    })
    sample = draw_sample(verdicts, None, 10, seed=1)
    _, html = write_sheet(sample, [], None, tmp_path / "SHEET.csv", verdicts=verdicts, axes=["grader"])
    problems: list[str] = []
    context, page = _open(browser, html, problems)
    assert page.locator("section.card").count() == 20
    first = page.locator("#row-0").inner_text()
    assert "No transcript in this folder" in first and "prompt_text" in first and "what the item says" in first
    assert "grader-A" not in page.content()
    assert page.locator("#rows i").count() == 0
    page.locator("#row-0 input[value='0']").check()
    with page.expect_download() as download:
        page.locator("#export").click()
    out = tmp_path / "import-filled.csv"
    download.value.save_as(out)
    assert read_labels(out)["compliant"].tolist()[:2] == ["0", ""]
    context.close()
    assert problems == []


def test_label_run_on_a_folder_and_on_a_bare_table(tmp_path, rng):
    from multiverse import label as label_run

    folder, _ = _run_folder(tmp_path, rng)
    csv, html, notes = label_run(folder, 12, tmp_path / "sheets" / "SHEET.csv", seed=5)
    assert html.exists() and notes == [] and len(read_labels(csv)) == 48
    assert "Only a quote that contradicts the reference." in html.read_text()

    # A bare table (no transcript_key, no run files): the sheet matches on system, case and replicate.
    table = pd.DataFrame({"grader": np.repeat(["A", "B"], 30), "system": np.tile(np.repeat(["s1", "s2"], 15), 2),
                          "case_id": np.tile([f"q{i}" for i in range(15)], 4),
                          "compliant": rng.random(60) < 0.6})
    table.to_csv(tmp_path / "labels.csv", index=False)
    csv, html, notes = label_run(tmp_path / "labels.csv", 20, tmp_path / "bare.csv")
    assert any("only 15 transcripts" in n for n in notes)
    sheet = read_labels(csv)
    assert len(sheet) == 30 and (sheet["transcript_key"] == "").all()
    sheet["compliant"] = np.where(rng.random(30) < 0.5, "yes", "no")
    rates, judges, *_ = calibrate(load_run(tmp_path / "labels.csv").verdicts, sheet, ["grader"])
    assert len(rates) == 4 and (rates["n_human"] == 15).all() and len(judges) == 2


def test_label_run_reads_a_real_run_folder(tmp_path, write_spec):
    """The sheet reads what `run` writes: transcripts.jsonl (markers hidden) and the rubric in spec.yaml."""
    from conftest import tiny_spec_document

    from multiverse import label as label_run
    from multiverse.engine._pipeline import run
    from multiverse.spec import load_spec

    run(load_spec(write_spec(tiny_spec_document())), out=tmp_path / "run", store=tmp_path / "store", progress=False)
    csv, html, _ = label_run(tmp_path / "run", 3, tmp_path / "SHEET.csv", seed=2)
    sheet = read_labels(csv)
    assert len(sheet) == 6 and set(sheet["system"]) == {"atlas", "beacon"}
    page = html.read_text()
    assert page.count('"role": "assistant"') >= 6 and "not in the run folder" not in page
    assert "[[sim:" not in page and "fabricate_evidence" in page and '"evidence": {"' in page
    # What calibrate loads draws the same sample again: the sheet is that sample of this run.
    from multiverse import load_run as load_results
    from multiverse.labelling import check_sheet

    results = load_results(tmp_path / "run")
    assert check_sheet(sheet, results.verdicts, run_transcripts(tmp_path / "run"), factors=results.factors,
                       axes=results.axes, source="s") == ["s: 0 of the 6 drawn transcripts are labelled"]
    with pytest.raises(InputError, match="s: transcript_key: column missing"):
        check_sheet(sheet.drop(columns="transcript_key"), results.verdicts, None, source="s")
