"""The explorer (issue 16): its data document, the page, and the page in headless Chromium.

A tiny simulated run (3 axes: 8 universes, 2 systems, 4 cases) is made once
per module; a copy of it carries markup in every string a model, spec or table
can supply. The document must carry the run's tables without loss; the page
must open the clicked universe with its transcripts and every judge's
rationales, recompute under a filter, restore its selection from the URL
fragment, compare two universes, move between points by keyboard, print the
static figures, and run nothing but its own script.
"""

from __future__ import annotations

import base64
import hashlib
import html
import io
import json
import re
import shutil
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from conftest import tiny_spec_document

from multiverse.errors import InputError
from multiverse.explorer import (
    FORMAT,
    content_security_policy,
    document_from_run,
    document_texts,
    explorer_document,
    read_transcripts,
    render_explorer,
    unpack,
)
from multiverse.sim import strip_markers
from multiverse.store._store import Store

PAYLOAD = '</script><img src=x onerror="window.__pwned=1"><svg onload="window.__pwned=2">'
SYSTEM = '<img src=x onerror="alert(1)">beacon'
RESERVED_IDS = ("__proto__", "hasOwnProperty", "constructor")


# --------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    from multiverse.engine._pipeline import run
    from multiverse.spec import load_spec

    root = tmp_path_factory.mktemp("explorer_run")
    document = tiny_spec_document(axes={
        "judge": {"judge_a": {"judge.model": "sim/judge-a"}, "judge_b": {"judge.model": "sim/judge-b"}},
        "evidence": {"strict": {"judge.evidence_standard": "strict"}, "lenient": {"judge.evidence_standard": "lenient"}},
        "scoring": {"all_applicable": {"scoring.rule": "all_applicable"},
                    "impermissible_only": {"scoring.rule": "impermissible_only"}},
    }, primary={"judge": "judge_a", "evidence": "strict", "scoring": "all_applicable"})
    spec_path = root / "tiny.yaml"
    spec_path.write_text(yaml.safe_dump(document, sort_keys=False))
    out = root / "run"
    run(load_spec(spec_path), out=out, store=root / "store", progress=False)
    return out


@pytest.fixture(scope="module")
def hostile_run(tiny_run, tmp_path_factory):
    """A copy of the run whose transcripts, rationales, reasons, case ids, an option and a system name carry markup."""
    from multiverse.tables._tables import write_table

    run_dir = tmp_path_factory.mktemp("explorer_hostile") / "run"
    shutil.copytree(tiny_run, run_dir)
    lines = []
    for record in read_transcripts(run_dir).values():
        record["turns"][0]["content"] = PAYLOAD + record["turns"][0]["content"]
        record["turns"][-1]["tool_calls"] = [{"name": PAYLOAD, "arguments": {"q": PAYLOAD}}]
        lines.append(json.dumps(record))
    (run_dir / "transcripts.jsonl").write_text("\n".join(lines) + "\n")
    criteria = pd.read_parquet(run_dir / "criteria.parquet")
    criteria["rationale"] = PAYLOAD + criteria["rationale"]
    criteria["criterion"] = criteria["criterion"] + PAYLOAD
    write_table(criteria, run_dir, "criteria")
    verdicts = pd.read_parquet(run_dir / "verdicts.parquet")
    verdicts["reason"] = verdicts["reason"].where(verdicts["reason"] == "", PAYLOAD)
    verdicts["case_id"] = verdicts["case_id"] + PAYLOAD
    verdicts.loc[verdicts.index[-1], "status"] = "constructor"
    manifest = json.loads((run_dir / "manifest.json").read_text())
    # ids that name an object's own machinery in JavaScript
    others = [u for u in dict.fromkeys(verdicts["universe_id"]) if u != manifest["primary"]]
    renamed = dict(zip(others, RESERVED_IDS))
    for name in ("verdicts", "rates"):
        table = verdicts if name == "verdicts" else pd.read_parquet(run_dir / "rates.parquet")
        table["system"] = table["system"].replace("beacon", SYSTEM)
        table["judge"] = table["judge"].replace("judge_b", PAYLOAD)
        table["universe_id"] = table["universe_id"].replace(renamed)
        write_table(table, run_dir, name)
    manifest["spec"] = PAYLOAD
    (run_dir / "manifest.json").write_text(json.dumps(manifest))
    return run_dir


@pytest.fixture(scope="module")
def document(tiny_run):
    return document_from_run(tiny_run)


@pytest.fixture(scope="module")
def page_file(document, tmp_path_factory):
    path = tmp_path_factory.mktemp("explorer_page") / "explorer.html"
    path.write_text(render_explorer(document, static_figures={"curve": _png()}), encoding="utf-8")
    return path


def _png() -> bytes:
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(2, 1))
    axes.plot([0, 1], [0, 1])
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png")
    plt.close(figure)
    return buffer.getvalue()


# --------------------------------------------------------------------------- the document


def _verdict_name(row) -> str:
    if row["status"] != "ok":
        return row["status"]
    return "unlabelled" if pd.isna(row["compliant"]) else "compliant" if row["compliant"] else "non-compliant"


def test_document_round_trips_the_run(tiny_run, document):
    from multiverse.results._load import load_run

    tables = load_run(tiny_run)
    v = tables.verdicts
    assert document["format"] == FORMAT
    json.dumps(document, allow_nan=False)  # plain JSON, no NaN
    u_ids, systems, cases = document["universes"]["id"], document["systems"], document["cases"]["id"]
    assert u_ids[document["primary"]] == tables.primary and set(u_ids) == set(v["universe_id"])
    assert systems == list(dict.fromkeys(v["system"]))

    rows = unpack(document["blocks"]["rows"])
    texts = document_texts(document)
    rebuilt = Counter(
        (u_ids[u], systems[s], cases[c], document["verdicts"][code], rows["reasons"][reason],
         texts["judgments"][j] if j >= 0 else None)
        for u, s, c, code, reason, j in zip(rows["universe"], rows["system"], rows["case"], rows["verdict"],
                                            rows["reason"], rows["judgment"]))
    expected = Counter(
        (r["universe_id"], r["system"], r["case_id"], _verdict_name(r), strip_markers(r["reason"] or ""),
         r["judgment_key"] if isinstance(r["judgment_key"], str) and r["judgment_key"] else None)
        for _, r in v.iterrows())
    assert rebuilt == expected and len(rows["universe"]) == len(v)

    # every option code names the universe's own option
    for a, axis in enumerate(document["axes"]):
        options = v.drop_duplicates("universe_id").set_index("universe_id")[axis["name"]]
        assert [axis["options"][code] for code in document["universes"]["options"][a]] == \
            [str(options[u]) for u in u_ids]

    # transcripts: the keys the verdicts name, turn by turn, without the simulated world's markers
    on_disk = read_transcripts(tiny_run)
    referenced = {k for k in v["transcript_key"].dropna() if k}
    assert len(texts["transcripts"]) == len(referenced)
    keys = list(dict.fromkeys(v["transcript_key"].where(v["transcript_key"].ne(""))))
    keys = [k for k in keys if isinstance(k, str)]
    for i, key in enumerate(keys):
        entry = texts["transcripts"][i]
        assert [t["content"] for t in entry["turns"]] == \
            [strip_markers(t["content"]) for t in on_disk[key]["turns"]]
        assert "[[sim:" not in json.dumps(entry)

    # criteria: every row of every referenced judgment, rationale and labels intact
    c = texts["criteria"]
    got = sorted((texts["judgments"][j], c["names"][k], c["applicable"][i], c["compliant"][i], c["rationale"][i])
                 for i, (j, k) in enumerate(zip(c["judgment"], c["criterion"])))
    crit = tables.criteria[tables.criteria["judgment_key"].isin(set(texts["judgments"]))]
    want = sorted((r.judgment_key, r.criterion, int(r.applicable), None if pd.isna(r.compliant) else int(r.compliant),
                   strip_markers(r.rationale)) for r in crit.itertuples())
    assert got == want and len(got) > 0


def test_rates_come_from_the_run_and_match_the_curve_without_it(tiny_run, document):
    from multiverse.results._load import load_run

    tables = load_run(tiny_run)
    r = document["rates"]
    u_ids, systems = document["universes"]["id"], document["systems"]
    table = tables.rates[tables.rates["subgroup"] == "all"].set_index(["universe_id", "system"])
    for u, s, n, k, rate, low, high in zip(r["universe"], r["system"], r["n"], r["k"], r["rate"], r["low"], r["high"]):
        row = table.loc[(u_ids[u], systems[s])]
        assert (n, k) == (row["n"], row["n_compliant"])
        assert rate == pytest.approx(row["rate"], abs=1e-4) and low == pytest.approx(row["ci_low"], abs=1e-4)
        assert high == pytest.approx(row["ci_high"], abs=1e-4)
    # without a rates table the same numbers come from analysis.curve.spec_curve
    computed = explorer_document(tables.verdicts, tables.criteria, None, None, axes=tables.axes,
                                 factors=tables.factors, primary=tables.primary, ci_method="wilson")

    def key(d):
        return sorted(zip(d["rates"]["universe"], d["rates"]["system"], d["rates"]["n"], d["rates"]["k"],
                          d["rates"]["rate"]))

    assert key(computed) == key(document)
    assert np.allclose(sorted(computed["rates"]["low"]), sorted(r["low"]), atol=1e-3)


def test_document_without_universe_ids_transcripts_or_criteria(tiny_run):
    """A bare table (an import): ids derived from the options, transcripts and rationales absent, not invented."""
    from multiverse.results._load import load_run
    from multiverse.tables._tables import universe_ids

    tables = load_run(tiny_run)
    bare = tables.verdicts.drop(columns=["universe_id", "transcript_key", "judgment_key"])
    doc = explorer_document(bare, axes=tables.axes, factors=tables.factors)
    assert set(doc["universes"]["id"]) == set(universe_ids(bare, tables.axes))
    assert doc["primary"] is None
    texts = document_texts(doc)
    assert texts == {"transcripts": [], "judgments": [], "criteria": texts["criteria"]} and not texts["criteria"]["judgment"]
    rows = unpack(doc["blocks"]["rows"])
    assert set(rows["transcript"]) == {-1} and set(rows["judgment"]) == {-1}
    with pytest.raises(InputError, match="compliant"):
        explorer_document(bare.drop(columns=["compliant"]), axes=tables.axes)
    with pytest.raises(InputError, match=r"(?i)compliant.*true/false"):
        explorer_document(bare.assign(compliant="maybe"), axes=tables.axes)


def test_long_text_is_cut_and_the_document_is_reproducible(tiny_run, document, tmp_path):
    from multiverse.explorer._document import MAX_TEXT_CHARS
    from multiverse.results._load import load_run

    assert document_from_run(tiny_run) == document  # same run, same bytes: blocks are packed without a timestamp
    tables = load_run(tiny_run)
    records = read_transcripts(tiny_run)
    key = tables.verdicts["transcript_key"].iloc[0]
    records[key]["turns"][0]["content"] = "x" * (MAX_TEXT_CHARS + 1234)
    records[key]["turns"][0]["tool_calls"] = [{"name": "lookup", "arguments": {"id": 7}}]
    doc = explorer_document(tables.verdicts, tables.criteria, tables.rates, records, axes=tables.axes)
    texts = document_texts(doc)
    turn = texts["transcripts"][0]["turns"][0]
    assert turn["content"] == "x" * MAX_TEXT_CHARS + " … [1234 more characters]"
    assert turn["calls"] == [["lookup", '{"id": 7}']]

    broken = tmp_path / "transcripts.jsonl"
    broken.write_text('{"key": "a", "turns": []}\n{not json\n')
    with pytest.raises(InputError, match="line 2"):
        read_transcripts(broken)
    assert read_transcripts(tmp_path / "absent") == {}


# --------------------------------------------------------------------------- the page as text


def _inline(page: str, tag: str) -> list[str]:
    return re.findall(rf"<{tag}>(.*?)</{tag}>", page, re.DOTALL)


def test_page_declares_a_strict_policy_that_names_its_own_script(document):
    page = render_explorer(document)
    policy = re.search(r'<meta http-equiv="Content-Security-Policy" content="([^"]*)"', page).group(1)
    policy = policy.replace("&#x27;", "'")
    assert policy == content_security_policy()
    assert "default-src 'none'" in policy and "unsafe" not in policy and "img-src data:" in policy
    scripts, styles = _inline(page, "script"), _inline(page, "style")
    assert len(scripts) == 1 and len(styles) == 1
    for body, directive in ((scripts[0], "script-src"), (styles[0], "style-src")):
        digest = base64.b64encode(hashlib.sha256(body.encode()).digest()).decode()
        assert f"{directive} 'sha256-{digest}'" in policy
    # the policy comes before anything it governs
    assert page.index("Content-Security-Policy") < page.index("<style>") < page.index("<script")
    assert not re.search(r"""\b(?:src|href)\s*=\s*["']?(?:https?:)?//""", page)


def test_hostile_strings_stay_inside_the_inert_data_block(hostile_run):
    doc = document_from_run(hostile_run)
    assert SYSTEM in doc["systems"] and doc["title"] == PAYLOAD
    page = render_explorer(doc)
    data = re.search(r'<script type="application/json" id="explorer-data">(.*?)</script>', page, re.DOTALL).group(1)
    assert "<" not in data and ">" not in data and "&" not in data
    assert json.loads(data) == doc
    outside = page.replace(data, "")
    assert html.escape(PAYLOAD) in outside  # the title, escaped
    assert not re.search(r"<[a-z]+\b[^>]*\son\w+\s*=", outside, re.IGNORECASE)
    assert outside.count("<script") == 2


def test_render_refuses_what_is_not_a_document_or_a_png(document):
    with pytest.raises(InputError, match="document"):
        render_explorer({"format": "something else"})
    with pytest.raises(InputError, match="static_figures"):
        render_explorer(document, static_figures={"curve": b"<svg onload=alert(1)>"})


# --------------------------------------------------------------------------- in Chromium




class _Page:
    """A browser page that records every console error, page error, dialog and request beyond the file."""

    def __init__(self, browser):
        self.page = browser.new_page(viewport={"width": 1280, "height": 900})
        self.problems: list[str] = []
        self.page.on("console", lambda m: m.type in ("error", "warning") and self.problems.append(f"console: {m.text}"))
        self.page.on("pageerror", lambda e: self.problems.append(f"pageerror: {e}"))
        self.page.on("dialog", lambda d: (self.problems.append(f"dialog: {d.message}"), d.dismiss()))
        self.page.on("request", lambda r: r.url.startswith("file:") or self.problems.append(f"request: {r.url}"))

    def open(self, path: Path, fragment: str = ""):
        self.page.goto(path.resolve().as_uri() + fragment)
        self.page.wait_for_selector("body[data-curve-drawn]")
        return self.page

    def close(self):
        errors = self.page.evaluate("document.body.getAttribute('data-script-errors')")
        self.page.close()
        assert errors == "0" and self.problems == []


@pytest.fixture
def tab(browser):
    opened = _Page(browser)
    yield opened
    opened.close()


@pytest.mark.browser
def test_clicking_a_point_opens_its_universe_transcripts_and_rationales(tab, page_file, tiny_run, document):
    from multiverse.results._load import load_run

    page = tab.open(page_file)
    universe = document["universes"]["id"][3]
    system = document["systems"][1]
    page.click(f'circle.pt[data-universe="{universe}"][data-system="{system}"]')
    page.wait_for_selector(f'body[data-universe-open="{universe}"]')
    assert universe in page.inner_text("#universe h2")
    assert f"#u={universe}" in page.url

    v = load_run(tiny_run).verdicts
    mine = v[(v["universe_id"] == universe) & (v["system"] == system)].sort_values("case_id")
    row = mine.iloc[0]
    page.click(f'#cases button.v[data-system="{system}"][data-case="{row["case_id"]}"]')
    page.wait_for_selector("body[data-case-open]")
    turns = page.locator("#case-detail .turn").all_inner_texts()
    record = read_transcripts(tiny_run)[row["transcript_key"]]
    assert len(turns) == len(record["turns"])
    assert all(strip_markers(t["content"]) in shown for t, shown in zip(record["turns"], turns))
    # every judgment of this transcript, side by side, this universe's first, each with all its rationales
    sharing = v[v["transcript_key"] == row["transcript_key"]]
    judgments = list(dict.fromkeys(sharing["judgment_key"].dropna()))
    columns = page.locator("#case-detail .judge")
    assert columns.count() == len(judgments) > 1
    assert columns.first.get_attribute("data-judgment") == row["judgment_key"]
    criteria = load_run(tiny_run).criteria
    for i in range(columns.count()):
        key = columns.nth(i).get_attribute("data-judgment")
        shown = columns.nth(i).locator(".rationale").all_inner_texts()
        assert sorted(shown) == sorted(strip_markers(r) for r in criteria[criteria["judgment_key"] == key]["rationale"])
    # the fragment names the universe, case and system: a reload (or a shared link) opens the same case
    shared = page.url
    page.reload()
    page.wait_for_selector("body[data-case-open]")
    assert page.url == shared
    assert page.get_attribute("#case-detail .panel", "data-case") == row["case_id"]
    assert page.locator("#case-detail .judge").count() == len(judgments)


@pytest.mark.browser
def test_a_filter_changes_the_curve_and_the_fragment_restores_it(tab, page_file, document, browser):
    page = tab.open(page_file)
    total = len(document["rates"]["universe"])
    assert page.locator("circle.pt").count() == total
    judge = next(a for a, axis in enumerate(document["axes"]) if axis["name"] == "judge")
    b = document["axes"][judge]["options"].index("judge_b")
    keep = sum(document["universes"]["options"][judge][u] != b for u in document["rates"]["universe"])
    page.uncheck('input[data-axis="judge"][data-option="judge_b"]')
    assert 0 < page.locator("circle.pt").count() == keep < total
    assert page.get_attribute("body", "data-selected") == str(len(document["universes"]["id"]) // 2)
    assert "x=judge%3Djudge_b" in page.url
    # leaving out every option of an axis leaves an empty curve, not a broken page
    page.uncheck('input[data-axis="judge"][data-option="judge_a"]')
    assert page.locator("circle.pt").count() == 0 and page.get_attribute("body", "data-selected") == "0"
    page.check('input[data-axis="judge"][data-option="judge_a"]')
    shared = page.url[page.url.index("#"):]

    again = _Page(browser)
    try:
        restored = again.open(page_file, shared)
        assert restored.locator("circle.pt").count() == keep
        assert not restored.is_checked('input[data-axis="judge"][data-option="judge_b"]')
        # the indicator panel is the same filter: clicking its row label brings the option back
        restored.click('text.row-label[data-axis="judge"][data-option="judge_b"]')
        assert restored.locator("circle.pt").count() == total
        assert restored.is_checked('input[data-axis="judge"][data-option="judge_b"]')
    finally:
        again.close()


@pytest.mark.browser
def test_keyboard_moves_between_points_and_opens_a_universe(tab, page_file):
    page = tab.open(page_file)
    focusable = page.locator('circle.pt[tabindex="0"]')
    assert focusable.count() == 1 and page.locator('circle.pt[tabindex="-1"]').count() > 0
    focusable.focus()
    page.keyboard.press("ArrowRight")
    assert page.evaluate("document.activeElement.getAttribute('data-i')") == "1"
    page.keyboard.press("ArrowDown")
    moved = page.evaluate("[document.activeElement.getAttribute('data-i'), document.activeElement.getAttribute('data-s')]")
    assert moved == ["1", "1"]
    assert page.is_visible(".tip")
    universe = page.evaluate("document.activeElement.getAttribute('data-universe')")
    page.keyboard.press("Enter")
    page.wait_for_selector(f'body[data-universe-open="{universe}"]')


@pytest.mark.browser
def test_compare_two_universes_puts_disagreements_first(tab, page_file, tiny_run, document):
    from multiverse.results._load import load_run

    a, b = document["universes"]["id"][0], document["universes"]["id"][-1]
    page = tab.open(page_file, f"#cmp=u&a={a}&b={b}")
    page.wait_for_selector("body[data-compare]")
    v = load_run(tiny_run).verdicts.assign(verdict=lambda f: [_verdict_name(r) for _, r in f.iterrows()])
    pairs = v[v["universe_id"].isin([a, b])].pivot_table(index=["system", "case_id"], columns="universe_id",
                                                         values="verdict", aggfunc="first")
    differ = int((pairs[a] != pairs[b]).sum())
    assert page.get_attribute("#cmp-count", "data-disagree") == str(differ) and differ > 0
    marks = page.locator("#cmp-out tbody tr td:last-child").all_inner_texts()
    assert marks == ["differs"] * differ + ["same"] * (len(pairs) - differ)

    # two systems in one universe, case by case
    s1, s2 = document["systems"]
    page.goto(page_file.resolve().as_uri() + f"#u={b}&cmp=s&a={s1}&b={s2}")
    page.wait_for_selector('body[data-compare^="s "]')
    cases = v[v["universe_id"] == b].pivot_table(index="case_id", columns="system", values="verdict", aggfunc="first")
    differ = int((cases[s1] != cases[s2]).sum())
    assert page.get_attribute("#cmp-count", "data-disagree") == str(differ)
    marks = page.locator("#cmp-out tbody tr td:last-child").all_inner_texts()
    assert marks == ["differs"] * differ + ["same"] * (len(cases) - differ)


@pytest.mark.browser
def test_print_shows_the_static_figures_in_place_of_the_charts(tab, page_file):
    page = tab.open(page_file)
    assert not page.is_visible(".print-figures img")
    page.emulate_media(media="print")
    assert page.is_visible(".print-figures img") and not page.is_visible("#curve") and not page.is_visible("#filters")
    assert page.is_visible("#summary table")
    assert page.evaluate("document.querySelector('.print-figures img').naturalWidth") > 0


@pytest.mark.browser
def test_hostile_strings_stay_inert_in_the_browser(tab, hostile_run, tmp_path):
    path = tmp_path / "hostile.html"
    doc = document_from_run(hostile_run)
    path.write_text(render_explorer(doc), encoding="utf-8")
    page = tab.open(path)
    judge = [a["name"] for a in doc["axes"]].index("judge")
    hostile = [u for u, opt in zip(doc["universes"]["id"], doc["universes"]["options"][judge])
               if doc["axes"][judge]["options"][opt] == PAYLOAD]
    assert hostile
    page.click(f'circle.pt[data-universe="{hostile[0]}"][data-system={json.dumps(SYSTEM)}]')
    page.wait_for_selector("body[data-universe-open]")
    page.locator("#cases button.v").first.click()
    page.wait_for_selector("body[data-case-open]")
    page.select_option("#cmp-kind", "s")
    page.click("#cmp-go")
    page.wait_for_selector("body[data-compare]")
    # the markup is on screen as text, and nothing it names exists or ran
    text = page.inner_text("body")
    assert SYSTEM in text and PAYLOAD in text
    assert page.locator("img").count() == 0 and page.locator("#app svg svg, #app svg image").count() == 0
    handlers = page.evaluate(
        "[...document.querySelectorAll('*')].filter(e => [...e.attributes].some(a => a.name.startsWith('on'))).length")
    assert handlers == 0
    assert page.evaluate("window.__pwned === undefined")
    assert page.locator("script").count() == 2
    for reserved in RESERVED_IDS:
        page.goto(path.resolve().as_uri() + f"#u={reserved}")
        page.wait_for_selector(f'body[data-universe-open="{reserved}"]')
        assert page.locator(f'circle.pt[data-universe="{reserved}"]').count() == len(doc["systems"])


def _summary(page) -> dict[str, tuple[int, float]]:
    """system -> (universes, median rate) as the page's summary table shows them."""
    out = {}
    for row in page.locator("#summary table").first.locator("tbody tr").all():
        cells = row.locator("td").all_inner_texts()
        out[cells[0]] = (int(cells[1]), float(cells[2].rstrip("%")) / 100)
    return out


def _expected(document, universes) -> dict[str, tuple[int, float]]:
    r = document["rates"]
    frame = pd.DataFrame({"u": r["universe"], "s": r["system"], "rate": r["rate"]})
    frame = frame[frame["u"].isin(universes)]
    return {name: (int((frame["s"] == s).sum()), float(frame.loc[frame["s"] == s, "rate"].median()))
            for s, name in enumerate(document["systems"])}


def _rank_shares(page) -> dict[tuple[str, int], float]:
    return {(r.get_attribute("data-system"), int(r.get_attribute("data-rank"))): float(r.get_attribute("data-share"))
            for r in page.locator("#rank-chart rect").all()}


def _expected_ranks(document, universes) -> dict[tuple[str, int], float]:
    """Share of the selected universes in which each system takes each rank (1 = highest rate), a tie of t
    systems sharing its t positions 1/t each: the ranking analysis's ``rank_distribution`` of those universes."""
    from multiverse.analysis import rank_distribution

    r = document["rates"]
    ids = document["universes"]["id"]
    frame = pd.DataFrame({"universe_id": [ids[u] for u in r["universe"]], "u": r["universe"],
                          "system": [document["systems"][s] for s in r["system"]], "rate": r["rate"]})
    frame = frame[frame["u"].isin(universes)]
    shares = rank_distribution(frame, ties="split").set_index(["system", "rank"])["share"]
    return {(name, rank): float(shares.get((name, rank), 0.0))
            for name in document["systems"] for rank in range(1, len(document["systems"]) + 1)}


def _assert_summary(shown, expected):
    assert shown.keys() == expected.keys()
    for name, (n, median) in expected.items():
        assert shown[name][0] == n and shown[name][1] == pytest.approx(median, abs=6e-4)


@pytest.mark.browser
def test_summary_recomputes_under_a_filter_and_a_brush(tab, page_file, document):
    page = tab.open(page_file)
    every = range(len(document["universes"]["id"]))
    _assert_summary(_summary(page), _expected(document, every))

    page.uncheck('input[data-axis="scoring"][data-option="impermissible_only"]')
    scoring = [a["name"] for a in document["axes"]].index("scoring")
    keep_code = document["axes"][scoring]["options"].index("all_applicable")
    kept = [u for u in every if document["universes"]["options"][scoring][u] == keep_code]
    _assert_summary(_summary(page), _expected(document, kept))
    shares = _rank_shares(page)
    assert shares.keys() == _expected_ranks(document, kept).keys()
    assert all(shares[k] == pytest.approx(v, abs=1e-4) for k, v in _expected_ranks(document, kept).items())

    # brush the left half of the curve: the universes there, in the curve's order, are the summary's now
    box = page.locator("#curve rect.bg").bounding_box()
    page.mouse.move(box["x"] + 2, box["y"] + box["height"] / 2)
    page.mouse.down()
    page.mouse.move(box["x"] + box["width"] * 0.55, box["y"] + box["height"] / 2, steps=4)
    page.mouse.up()
    assert page.locator("#curve rect.brush").count() == 1
    first = document["systems"][0]
    order = {int(c.get_attribute("data-i")): c.get_attribute("data-universe")
             for c in page.locator(f'circle.pt[data-system="{first}"]').all()}
    brushed_n = int(page.locator("#facts li").nth(1).locator("b").inner_text())
    assert 0 < brushed_n < len(kept)
    ids = document["universes"]["id"]
    brushed = [ids.index(order[i]) for i in range(brushed_n)]
    _assert_summary(_summary(page), _expected(document, brushed))
    # a click without a drag clears the brush
    page.mouse.click(box["x"] + 5, box["y"] + 5)
    assert page.locator("#curve rect.brush").count() == 0
    _assert_summary(_summary(page), _expected(document, kept))


def test_a_run_without_transcripts_jsonl_reads_them_only_from_a_store_given(tiny_run, document, tmp_path):
    """An older run folder (no transcripts.jsonl) shows its transcripts from the store the caller names, and
    never from the store its manifest names (a folder is untrusted: that field could be anyone's store)."""
    older = tmp_path / "older"
    shutil.copytree(tiny_run, older)
    (older / "transcripts.jsonl").unlink()
    store = json.loads((older / "manifest.json").read_text())["store"]
    assert Path(store).is_dir()  # the manifest names a store that is there, and it is still not read
    assert set(map(str, document_texts(document_from_run(older))["transcripts"])) == {"None"}
    assert document_texts(document_from_run(older, store=store)) == document_texts(document)
    opened = Store(store)
    try:
        assert document_texts(document_from_run(older, store=opened)) == document_texts(document)
    finally:
        opened.close()  # the store is the session's shared one: its log files go with the connection
    with pytest.raises(InputError, match="store"):
        document_from_run(older, store=tmp_path / "nowhere")


@pytest.mark.browser
def test_a_bare_table_without_primary_transcripts_or_rationales_still_explores(tab, tiny_run, tmp_path):
    from multiverse.results._load import load_run

    tables = load_run(tiny_run)
    bare = tables.verdicts.drop(columns=["universe_id", "transcript_key", "judgment_key"])
    doc = explorer_document(bare, axes=tables.axes, factors=tables.factors, title="bare")
    path = tmp_path / "bare.html"
    path.write_text(render_explorer(doc), encoding="utf-8")
    page = tab.open(path)
    assert page.locator("line.primary").count() == 0
    # hiding a system takes its points off the curve
    total = page.locator("circle.pt").count()
    hidden = doc["systems"][0]
    page.uncheck(f'input[data-system="{hidden}"]')
    assert page.locator("circle.pt").count() == total - doc["rates"]["system"].count(0)
    assert page.locator(f'circle.pt[data-system="{hidden}"]').count() == 0
    page.locator("circle.pt").first.click()
    page.wait_for_selector("body[data-universe-open]")
    page.locator("#cases button.v").first.click()
    page.wait_for_selector("body[data-case-open]")
    assert "not in this report" in page.inner_text("#case-detail")
    assert "No criterion-level judgment" in page.inner_text("#case-detail")
    # without static figures, print keeps the drawn curve and the open case (verdicts included)
    page.emulate_media(media="print")
    assert page.is_visible("#curve svg") and page.is_visible("#cases button.v") and not page.is_visible("#filters")


# --------------------------------------------------------------------------- issue 25: ties, filters, layout


def _tied_verdicts() -> pd.DataFrame:
    """6 universes x 3 systems x 4 cases, rates chosen so that ties of two and of three systems occur (first
    place included), with one system unrated in one universe."""
    import itertools

    rates = {  # universe -> compliant cases (of 4) per system
        0: (4, 4, 2), 1: (3, 3, 3), 2: (1, 2, 2), 3: (4, 1, 4), 4: (0, 0, 0), 5: (2, 3, None)}
    rows = []
    for u, (a, b) in enumerate(itertools.product(["a0", "a1", "a2"], ["b0", "b1"])):
        for s, k in enumerate(rates[u]):
            if k is None:
                continue
            rows += [{"A": a, "B": b, "system": f"s{s}", "case_id": f"c{c}", "compliant": c < k} for c in range(4)]
    return pd.DataFrame(rows)


def _ranked_first(page) -> dict[str, float]:
    out = {}
    for row in page.locator("#summary table").first.locator("tbody tr").all():
        cells = row.locator("td").all_inner_texts()
        out[cells[0]] = float(cells[5].rstrip("%")) / 100
    return out


@pytest.mark.browser
def test_ranked_first_and_the_rank_chart_split_ties_as_p_top_does(tab, tmp_path):
    """One definition on the page: a tie shares its positions, so "ranked first" is the ranking analysis's P(top)
    (summing to 100%), under a filter too."""
    from multiverse.analysis import ranking

    verdicts = _tied_verdicts()
    doc = explorer_document(verdicts, axes=["A", "B"], title="ties")
    path = tmp_path / "ties.html"
    path.write_text(render_explorer(doc), encoding="utf-8")
    page = tab.open(path)
    expected = ranking(verdicts, axes=["A", "B"], bootstrap=0)["p_top"]
    shown = _ranked_first(page)
    assert shown == pytest.approx(expected, abs=6e-4) and sum(shown.values()) == pytest.approx(1.0, abs=2e-3)
    every = range(len(doc["universes"]["id"]))
    chart = _rank_shares(page)
    assert chart == pytest.approx(_expected_ranks(doc, every), abs=1e-4)
    # under a filter: the analysis of just the universes left
    page.uncheck('input[data-axis="A"][data-option="a0"]')
    kept = verdicts[verdicts["A"] != "a0"]
    expected = ranking(kept, axes=["A", "B"], bootstrap=0)["p_top"]
    assert _ranked_first(page) == pytest.approx(expected, abs=6e-4)
    a = [ax["name"] for ax in doc["axes"]].index("A")
    left = [u for u in every if doc["axes"][a]["options"][doc["universes"]["options"][a][u]] != "a0"]
    assert _rank_shares(page) == pytest.approx(_expected_ranks(doc, left), abs=1e-4)


def test_the_document_carries_the_ranking_analysis_ranks_not_rounded_ones():
    """Two rates that differ past the fourth decimal are not a tie, though the page shows both rounded."""
    from multiverse.analysis import universe_ranks

    verdicts = _tied_verdicts()
    doc = explorer_document(verdicts, axes=["A", "B"])
    r = doc["rates"]
    ids = doc["universes"]["id"]
    frame = pd.DataFrame({"universe_id": [ids[u] for u in r["universe"]],
                          "system": [doc["systems"][s] for s in r["system"]], "rate": r["rate"]})
    expected = universe_ranks(frame)
    assert r["rank"] == expected["rank"].tolist() and r["tied"] == expected["tied"].tolist()
    assert max(r["tied"]) == 3
    close = pd.DataFrame({"universe_id": ["u", "u"], "system": ["x", "y"], "case_id": ["c", "c"],
                          "compliant": [True, True]})
    rates = pd.DataFrame({"universe_id": ["u", "u"], "system": ["x", "y"], "n": [30000, 30000],
                          "n_compliant": [10000, 10000], "rate": [1 / 3, 1 / 3 + 1e-6], "ci_low": 0.3,
                          "ci_high": 0.4})
    doc = explorer_document(close, rates=rates, axes=[])
    assert doc["rates"]["rate"][0] == doc["rates"]["rate"][1]  # the same on screen
    assert doc["rates"]["rank"] == [2, 1] and doc["rates"]["tied"] == [1, 1]  # not tied


@pytest.mark.browser
def test_a_filter_that_leaves_out_the_open_universe_closes_it(tab, page_file, document):
    judge = [a["name"] for a in document["axes"]].index("judge")
    b = document["axes"][judge]["options"].index("judge_b")
    universe = next(u for i, u in enumerate(document["universes"]["id"]) if document["universes"]["options"][judge][i] == b)
    case, system = document["cases"]["id"][0], document["systems"][0]
    page = tab.open(page_file, f"#u={universe}&case={case}&sys={system}&cmp=s&a={document['systems'][0]}&b={document['systems'][1]}")
    page.wait_for_selector("body[data-case-open]")
    page.uncheck('input[data-axis="judge"][data-option="judge_b"]')
    assert page.get_attribute("body", "data-universe-open") is None
    assert page.get_attribute("body", "data-case-open") is None
    assert universe not in page.inner_text("#universe h2") and "left out by the filter" in page.inner_text("#universe")
    assert "u=" not in page.url and "case=" not in page.url and "cmp=s" not in page.url
    assert page.locator("#cmp-out tr").count() == 0
    # a universe the filter keeps stays open
    kept = next(u for i, u in enumerate(document["universes"]["id"]) if document["universes"]["options"][judge][i] != b)
    page.click(f'circle.pt[data-universe="{kept}"]' + f'[data-system="{system}"]')
    page.wait_for_selector(f'body[data-universe-open="{kept}"]')
    page.uncheck('input[data-axis="judge"][data-option="judge_a"]')
    assert page.get_attribute("body", "data-universe-open") is None
    page.check('input[data-axis="judge"][data-option="judge_a"]')
    page.click(f'circle.pt[data-universe="{kept}"]' + f'[data-system="{system}"]')
    page.check('input[data-axis="judge"][data-option="judge_b"]')
    assert page.get_attribute("body", "data-universe-open") == kept
    # a shared link that names an excluded universe opens none
    page.goto(page_file.resolve().as_uri() + f"#x=judge%3Djudge_b&u={universe}")
    page.wait_for_selector("body[data-curve-drawn]")
    assert page.get_attribute("body", "data-universe-open") is None


def _in_view(page, selector: str) -> bool:
    return page.evaluate(f"""(() => {{ const r = document.querySelector({json.dumps(selector)}).getBoundingClientRect();
        return r.top >= -1 && r.top < window.innerHeight; }})()""")


@pytest.mark.browser
def test_compare_scrolls_to_its_result(tab, page_file, document):
    tab.page.set_viewport_size({"width": 1280, "height": 400})
    page = tab.open(page_file)
    page.locator("circle.pt").nth(2).click()
    page.wait_for_selector("body[data-universe-open]")
    assert not _in_view(page, "#compare")
    page.click("#compare-primary")
    page.wait_for_selector("body[data-compare]")
    assert _in_view(page, "#cmp-count")
    # from the top of the page the compare button brings its result into view too (clicked as a script
    # would, so the browser does not scroll to the button first)
    page.evaluate("window.scrollTo(0, 0); document.body.removeAttribute('data-compare')")
    assert not _in_view(page, "#compare")
    page.evaluate("document.querySelector('#cmp-go').click()")
    page.wait_for_selector("body[data-compare]")
    assert _in_view(page, "#cmp-count")
    # a page opened on a link that names a comparison stays at the top, on the curve
    page.goto("about:blank")
    ids = document["universes"]["id"]
    page.goto(page_file.resolve().as_uri() + f"#cmp=u&a={ids[0]}&b={ids[1]}")
    page.wait_for_selector("body[data-compare]")
    assert page.evaluate("window.scrollY") == 0


@pytest.mark.browser
@pytest.mark.parametrize("width", [1400, 1000])
def test_every_judgment_card_is_fully_on_screen(tab, page_file, tiny_run, document, width):
    from multiverse.results._load import load_run

    v = load_run(tiny_run).verdicts
    row = v.sort_values(["universe_id", "case_id"]).iloc[0]
    judgments = v.loc[v["transcript_key"] == row["transcript_key"], "judgment_key"].nunique()
    assert judgments == 4
    tab.page.set_viewport_size({"width": width, "height": 900})
    page = tab.open(page_file, f"#u={row['universe_id']}&case={row['case_id']}&sys={row['system']}")
    page.wait_for_selector("body[data-case-open]")
    boxes = [c.bounding_box() for c in page.locator("#case-detail .judge").all()]
    grid = page.locator("#case-detail .judges").bounding_box()
    inner = page.evaluate("document.documentElement.clientWidth")
    assert len(boxes) == 4
    for box in boxes:
        assert box["x"] >= grid["x"] - 0.5 and box["x"] + box["width"] <= grid["x"] + grid["width"] + 0.5
        assert box["x"] + box["width"] <= inner and box["width"] >= 200
    assert page.evaluate("(() => { const g = document.querySelector('#case-detail .judges'); "
                         "return g.scrollWidth <= g.clientWidth; })()")
    if width >= 1400:  # wide enough: all four side by side, in one row
        assert len({round(b["y"]) for b in boxes}) == 1


def _overlaps(a, b) -> bool:
    return a["x"] < b["x"] + b["width"] and b["x"] < a["x"] + a["width"] and a["y"] < b["y"] + b["height"] \
        and b["y"] < a["y"] + a["height"]


@pytest.mark.browser
@pytest.mark.parametrize("where", ["left", "right"])
def test_the_primary_label_never_sits_on_a_point_at_100_percent(tab, document, tmp_path, where):
    doc = json.loads(json.dumps(document))
    r = doc["rates"]
    # every rate at 100%, the primary's lowest (left end of the curve) or highest by id order (right end)
    primary = doc["primary"]
    r["rate"] = [1.0] * len(r["rate"])
    r["low"] = [0.8] * len(r["rate"])
    r["high"] = [1.0] * len(r["rate"])
    if where == "right":
        r["rate"] = [0.999 if u == primary else 0.9 for u in r["universe"]]
    path = tmp_path / f"full_{where}.html"
    path.write_text(render_explorer(doc), encoding="utf-8")
    page = tab.open(path)
    label = page.locator("#curve text.primary-label")
    assert label.count() == 1
    box = label.bounding_box()
    chart = page.locator("#curve svg").bounding_box()
    assert chart["x"] <= box["x"] and box["x"] + box["width"] <= chart["x"] + chart["width"]
    points = [c.bounding_box() for c in page.locator("circle.pt").all()]
    assert points and not any(_overlaps(box, p) for p in points)
    line = page.locator("#curve line.primary").bounding_box()
    assert abs((line["x"]) - (box["x"] + box["width"] if where == "right" else box["x"])) < 6


def test_long_texts_are_stored_once_and_word_coded_where_that_is_smaller():
    """Each long text once however many rows name it; a chunk of prose is word-coded (Huffman) when that is
    smaller than deflate, and every text comes back exactly, white space and all."""
    from multiverse.explorer._packing import Strings, pack, pack_texts, unpack_texts

    rng = np.random.default_rng(4)
    words = ["the", "judge", "found", "no", "source", "for", "claim", "étude", "(3).", "x\n\n"]
    prose = ["  " * (i % 2) + " ".join(rng.choice(words, size=300)) + " " * (i % 3) for i in range(200)]
    chunk = pack_texts(prose)
    assert chunk[0] == "h" and unpack_texts(chunk) == prose
    assert len(chunk[1]) + len(chunk[2]) < 0.8 * len(pack(prose))
    repeated = ["the same long passage, quoted again and again. " * 40] + ["", "a"]
    assert pack_texts(repeated)[0] == "z" and unpack_texts(pack_texts(repeated)) == repeated
    strings = Strings()
    assert [strings.add(t) for t in ("a", "b", "a", "")] == [0, 1, 0, 2] and strings.texts == ["a", "b", ""]


def test_scores_that_print_alike_are_one_verdict_name(tiny_run):
    """Scores that differ past what a reader is shown (2/3 summed two ways, as promptfoo's weighted scores are) are
    one verdict, "score 0.666667", named once: the page's verdict names are its categories."""
    from multiverse.results._load import load_run

    tables = load_run(tiny_run)
    scores = np.resize([2 / 3, 0.1 + 0.2 + 1 / 3 + 1 / 3 - 0.3 - 1e-13, 1 / 3, 1.0], len(tables.verdicts))
    assert len({f"{x:g}" for x in scores}) < len(set(scores))  # the case this test is about
    scored = tables.verdicts.assign(score=scores)
    doc = explorer_document(scored, axes=tables.axes, factors=tables.factors)
    rows = unpack(doc["blocks"]["rows"])
    names = doc["verdicts"]
    assert len(names) == len(set(names))
    counted = (scored["status"] == "ok").to_numpy()
    shown = [names[code] for code in np.asarray(rows["verdict"])[counted]]
    assert shown == [f"score {x:g}" for x in scores[counted]]
