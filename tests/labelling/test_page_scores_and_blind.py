"""The labelling page in the real browser: scores on the judge's scale (issue 42), and systems' names hidden (issue 48).

Chromium (``browser`` fixture, tests/conftest.py) opens the page ``label``
writes, a person scores transcripts or marks them, reloads, and exports; the
export goes to ``calibrate``. With ``blind_systems`` no system name is
anywhere in the page, neither shown nor in its data, and the export still
anchors the same rates as a sheet with the names.
"""

from __future__ import annotations

import json

import pandas as pd
import pytest
from anchor_world import scored_folder

import multiverse as mv
from multiverse.analysis import read_labels

SYSTEMS = ("atlas", "beacon")


def _open(browser, html, problems):
    context = browser.new_context(accept_downloads=True)
    context.set_default_timeout(90_000)  # the test machine's two cores are shared; slowness is not a failure here
    page = context.new_page()
    page.on("console", lambda m: problems.append(f"console {m.type}: {m.text}") if m.type in ("error", "warning") else None)
    page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
    page.on("request", lambda r: problems.append(f"request: {r.url}") if not r.url.startswith(("file:", "blob:", "data:")) else None)
    page.goto(html.as_uri())
    return context, page


def _export(page, path):
    with page.expect_download() as download:
        page.locator("#export").click()
    download.value.save_as(path)
    return path


@pytest.mark.browser
def test_a_blind_page_names_no_system_and_its_scores_anchor_as_a_named_sheet_does(tmp_path, browser):
    from playwright.sync_api import expect

    run, truth = scored_folder(tmp_path)
    csv, html, _ = mv.label(run, 10, tmp_path / "BLIND.csv", seed=3, blind_systems=True)
    source = html.read_text(encoding="utf-8")
    assert not any(name in source for name in SYSTEMS)  # not shown, and not in the page's data either
    assert "hidden too" in source
    sheet = pd.read_csv(csv, dtype=str, keep_default_na=False)
    assert set(sheet["system"]) == set(SYSTEMS) and "score" in sheet.columns  # the auditor's sheet keeps them

    problems: list[str] = []
    context, page = _open(browser, html, problems)
    assert page.locator("section.card").count() == len(sheet) == 40
    body = page.locator("body").inner_text()
    assert not any(name in body for name in SYSTEMS) and "system " not in page.locator("#row-0 .meta").inner_text()
    # The scale's five points are offered, with its anchors where the scale has them.
    assert page.locator("#row-0 input[type=radio]").count() == 5
    expect(page.locator("#progress")).to_have_text("0 of 40 labelled")
    page.locator("#row-0 input[value='4']").check()
    page.locator("#row-1 input[value='2']").check()
    page.reload()
    expect(page.locator("#progress")).to_have_text("2 of 40 labelled")
    assert page.locator("#row-0 input[value='4']").is_checked()
    partial = read_labels(_export(page, tmp_path / "partial.csv"))
    assert partial["score"].tolist()[:3] == ["4", "2", ""] and set(partial["system"]) == {""}

    for i, key in enumerate(sheet["transcript_key"]):
        page.locator(f"#row-{i} input[value='{int(truth[key])}']").check()
    full = _export(page, tmp_path / "full.csv")
    context.close()
    assert problems == []
    results = mv.load_run(run)
    blind = results.calibrate(full).source
    named = results.calibrate(sheet.assign(score=[f"{truth[k]:g}" for k in sheet["transcript_key"]])).source
    assert json.dumps(blind["rates"]) == json.dumps(named["rates"]) and blind["labelled"]["transcripts"] == 40


@pytest.mark.browser
def test_a_continuous_scale_takes_a_number_on_it_and_nothing_else(tmp_path, browser):
    from playwright.sync_api import expect

    run, _ = scored_folder(tmp_path, scale={"type": "continuous", "min": 1, "max": 5})
    csv, html, _ = mv.label(run, 10, tmp_path / "SHEET.csv")
    source = html.read_text(encoding="utf-8")
    assert all(name in source for name in SYSTEMS)  # not blind by default
    problems: list[str] = []
    context, page = _open(browser, html, problems)
    assert "system " in page.locator("#row-0 .meta").inner_text()
    box = page.locator("#row-0 input[type=number]")
    for bad in ("7", "0.5", "-2"):
        box.fill(bad)
        expect(page.locator("#row-0 .note")).to_contain_text("expected a number from 1 to 5")
        expect(page.locator("#progress")).to_have_text("0 of 40 labelled")
    box.fill("2.5")
    expect(page.locator("#progress")).to_have_text("1 of 40 labelled")
    page.locator("#row-1 input[type=number]").fill("5")
    page.reload()
    expect(page.locator("#progress")).to_have_text("2 of 40 labelled")
    assert page.locator("#row-0 input[type=number]").input_value() == "2.5"
    exported = read_labels(_export(page, tmp_path / "filled.csv"))
    context.close()
    assert problems == []
    assert exported["score"].tolist()[:3] == ["2.5", "5", ""]
    sheet = pd.read_csv(csv, dtype=str, keep_default_na=False)
    assert exported["system"].tolist() == sheet["system"].tolist()
