"""The report as a user makes it (issue 16): `multiverse report` and `Results.report` write the explorer.

Through the command line, on the session's run and on a table import whose
system name and one option carry markup, in headless Chromium: clicking a
point on the curve opens that universe with its transcripts and every judge's
rationales; a filter changes the curve; a link to a part of the page keeps
the reader's selection; the static figures under the explorer all load and
print; no script error; the hostile names show as text and nothing they name
runs. ``Results.report`` writes the same explorer for the run and the import.
"""

from __future__ import annotations

import json
import re

import pandas as pd
import pytest

import multiverse as mv
from multiverse.cli import main
from multiverse.explorer import read_transcripts, unpack
from multiverse.sim import strip_markers

SYSTEM = '<img src=x onerror="window.__pwned=1">atlas'
OPTION = '</script><svg onload="window.__pwned=2">'
PAGE_SCRIPTS = ['<script type="application/json" id="explorer-data">', "<script>"]


@pytest.fixture(scope="module")
def run_result(sim_run):
    """The session's tiny simulated run (2 systems, judge x evidence: 4 universes), as ``load_run`` returns it."""
    from multiverse import load_run

    return load_run(sim_run.out)


@pytest.fixture(scope="module")
def imported(tmp_path_factory):
    """A table import (by the command line) whose system name and one grader option are markup."""
    root = tmp_path_factory.mktemp("report_import")
    rows = [{"model": system, "item": f"q{c}", "grader": grader, "label": "pass" if (c * 7 + k + len(system)) % 4 else "fail"}
            for system in (SYSTEM, "beacon") for k, grader in enumerate(("g1", OPTION, "g3")) for c in range(12)]
    table = root / "labels.csv"
    pd.DataFrame(rows).to_csv(table, index=False)
    out = root / "imported"
    assert main(["import", "table", str(table), "--system", "model", "--item", "item", "--label", "label",
                 "--positive", "pass", "--negative", "fail", "--axis", "grader", "--out", str(out)]) == 0
    return out


def _report(source, out, capsys):
    assert main(["report", str(source), "--out", str(out), "--no-tests", "--quiet"]) == 0
    assert capsys.readouterr().out.strip() == f"report: {out}"
    page = out.read_text(encoding="utf-8")
    # one file: the explorer's data and script, nothing else that could run
    assert re.findall(r"<script\b[^>]*>", page, re.I) == PAGE_SCRIPTS
    return page


def _document(page: str) -> dict:
    block = re.search(r'<script type="application/json" id="explorer-data">(.*?)</script>', page, re.S).group(1)
    return json.loads(block)


# --------------------------------------------------------------------------- the browser




@pytest.fixture
def tab(browser):
    """A page that records console errors, page errors, dialogs and any request beyond the file."""
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    problems: list[str] = []
    page.on("console", lambda m: m.type in ("error", "warning") and problems.append(f"console: {m.text}"))
    page.on("pageerror", lambda e: problems.append(f"pageerror: {e}"))
    page.on("dialog", lambda d: (problems.append(f"dialog: {d.message}"), d.dismiss()))
    page.on("request", lambda r: r.url.startswith("file:") or problems.append(f"request: {r.url}"))

    def open_(path):
        page.goto(path.resolve().as_uri())
        page.wait_for_selector("body[data-curve-drawn][data-images-loaded]")
        return page

    yield open_
    attributes = page.evaluate("[document.body.getAttribute('data-script-errors'),"
                               " document.body.getAttribute('data-script-error-messages')]")
    page.close()
    assert attributes[0] == "0", attributes[1]
    assert problems == []


def _static_figures_load(page):
    total = int(page.get_attribute("body", "data-images-total"))
    assert total > 0 and page.get_attribute("body", "data-images-loaded") == str(total)
    assert page.locator("#details img").count() == total  # every image is a static figure under the explorer


@pytest.mark.browser
def test_cli_report_of_a_run_opens_a_points_transcripts_and_rationales(run_result, tab, capsys, tmp_path):
    out = tmp_path / "report.html"
    page_text = _report(run_result.source, out, capsys)
    document = _document(page_text)
    page = tab(out)
    _static_figures_load(page)

    v, criteria = run_result.verdicts, run_result.criteria
    # a point of a non-primary universe, of the second system
    universe = next(u for u in document["universes"]["id"] if u != run_result.primary)
    system = document["systems"][1]
    page.click(f'circle.pt[data-universe="{universe}"][data-system="{system}"]')
    page.wait_for_selector(f'body[data-universe-open="{universe}"]')
    mine = v[(v["universe_id"] == universe) & (v["system"] == system) & v["judgment_key"].notna()]
    row = mine.sort_values("case_id").iloc[0]
    page.click(f'#cases button.v[data-system="{system}"][data-case="{row["case_id"]}"]')
    page.wait_for_selector("body[data-case-open]")
    turns = page.locator("#case-detail .turn").all_inner_texts()
    record = read_transcripts(run_result.source)[row["transcript_key"]]
    assert len(turns) == len(record["turns"]) > 0
    assert all(strip_markers(t["content"]) in shown for t, shown in zip(record["turns"], turns))
    # every judgment of that transcript (the four judge universes share it), this universe's first
    judgments = list(dict.fromkeys(v.loc[v["transcript_key"] == row["transcript_key"], "judgment_key"].dropna()))
    columns = page.locator("#case-detail .judge")
    assert columns.count() == len(judgments) > 1
    assert columns.first.get_attribute("data-judgment") == row["judgment_key"]
    for i in range(columns.count()):
        key = columns.nth(i).get_attribute("data-judgment")
        shown = columns.nth(i).locator(".rationale").all_inner_texts()
        assert sorted(shown) == sorted(strip_markers(r) for r in criteria[criteria["judgment_key"] == key]["rationale"])
    # the explorer finds its parts by id: no section under it may take one of theirs
    ids = page.evaluate("[...document.querySelectorAll('[id]')].map(e => e.id)")
    assert len(ids) == len(set(ids)) and {"curve", "universe", "details", "curves"} <= set(ids)
    # printed, the static figures under the explorer stand in for its charts; the open universe still prints
    page.emulate_media(media="print")
    assert not page.is_visible("#curve") and page.is_visible("#details img") and page.is_visible("#universe h2")


@pytest.mark.browser
def test_cli_report_of_a_hostile_import_filters_and_stays_inert(imported, tab, capsys, tmp_path):
    out = tmp_path / "imported.html"
    page_text = _report(imported, out, capsys)
    assert SYSTEM not in page_text and OPTION not in page_text  # escaped in the sections, JSON-escaped in the data
    document = _document(page_text)
    assert SYSTEM in document["systems"]
    page = tab(out)
    _static_figures_load(page)

    total = page.locator("circle.pt").count()
    assert total == len(document["rates"]["universe"]) == 3 * 2
    page.uncheck(f'input[data-axis="grader"][data-option={json.dumps(OPTION)}]')
    assert page.locator("circle.pt").count() == total - 2
    assert page.locator(f'circle.pt[data-system={json.dumps(SYSTEM)}]').count() == 2
    # a link of the table of contents moves to a section and keeps the filter (it is not a view to restore)
    page.click('#details nav a[href="#curves"]')
    assert page.url.endswith("#curves") and page.locator("circle.pt").count() == total - 2
    assert not page.is_checked(f'input[data-axis="grader"][data-option={json.dumps(OPTION)}]')

    page.locator(f'circle.pt[data-system={json.dumps(SYSTEM)}]').first.click()
    page.wait_for_selector("body[data-universe-open]")
    page.locator("#cases button.v").first.click()
    page.wait_for_selector("body[data-case-open]")
    text = page.inner_text("body")
    assert SYSTEM in text and OPTION in text
    # the only images are the static figures; no element carries a handler; nothing ran
    assert page.locator("img").count() == page.locator("#details img").count()
    assert page.locator("svg svg, svg image").count() == 0
    assert page.evaluate(
        "[...document.querySelectorAll('*')].filter(e => [...e.attributes].some(a => a.name.startsWith('on'))).length") == 0
    assert page.evaluate("window.__pwned === undefined")
    assert page.locator("script").count() == 2


def test_results_report_of_a_run_and_an_import_is_the_explorer(run_result, imported, tmp_path):
    from multiverse import load_run

    for results, name in ((run_result, "run"), (load_run(imported), "import")):
        path = mv.report(results, tmp_path / f"{name}.html", tests=False, progress=False)
        page = path.read_text(encoding="utf-8")
        document = _document(page)
        assert sorted(document["universes"]["id"]) == sorted(results.verdicts["universe_id"].astype(str).unique())
        assert set(document["systems"]) == set(results.verdicts["system"].astype(str))
        # the universe view's cases: one verdict row per row of the table
        assert len(unpack(document["blocks"]["rows"])["universe"]) == len(results.verdicts)
        assert 'id="details"' in page and "Specification curves" in page
    # the run's document carries its transcripts and rationales; the table import has none to carry
    texts = unpack(_document((tmp_path / "run.html").read_text(encoding="utf-8"))["blocks"]["texts"])
    assert texts["transcripts"] and all(t is not None for t in texts["transcripts"])
    assert len(texts["criteria"]["rationale"]) == len(run_result.criteria)
    texts = unpack(_document((tmp_path / "import.html").read_text(encoding="utf-8"))["blocks"]["texts"])
    assert all(t is None for t in texts["transcripts"]) and not texts["criteria"]["rationale"]


@pytest.mark.browser
def test_a_run_where_every_verdict_failed_still_gets_its_explorer_and_says_why(tab, tmp_path):
    from multiverse.reporting import build_report_html
    from multiverse.results._results import Results

    verdicts = pd.DataFrame([{"system": s, "case_id": f"c{c}", "judge": j, "compliant": None, "status": "rollout_failed",
                              "reason": "auth: invalid api key"}
                             for s in ("atlas", "beacon") for j in ("j1", "j2") for c in range(3)])
    page_text = build_report_html(Results(verdicts=verdicts, axes=["judge"]), tests=False, progress=False)
    assert re.search(r'class="problem">The specification curve could not be computed: InputError: ', page_text)
    document = _document(page_text)
    assert len(document["universes"]["id"]) == 2 and document["rates"]["universe"] == []
    assert "Failure accounting" in page_text
    path = tmp_path / "failed.html"
    path.write_text(page_text, encoding="utf-8")
    page = tab(path)
    assert page.locator("circle.pt").count() == 0
    # the universes are still there to open, with every case's failure
    page.goto(path.resolve().as_uri() + f"#u={document['universes']['id'][0]}")
    page.wait_for_selector("body[data-universe-open]")
    assert page.locator("#cases button.v").count() == 2 * 3
    assert "rollout_failed" in page.inner_text("#cases")
