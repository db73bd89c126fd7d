"""The HTML report: one self-contained file, every figure a valid inline PNG, all run text escaped.

The session's tiny simulated run (2 systems, judge x evidence axes, so judge
agreement exists; conftest.sim_run) is copied once per module. The browser tests open the report in headless
Chromium; without it they skip, except under CI (``CI`` set), where they fail.
"""

from __future__ import annotations

import base64
import hashlib
import html
import io
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pandas as pd
import pytest
from store_rows import stored_records

from multiverse.errors import InputError
from multiverse.tables._folder import read_transcripts

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
SCRIPT = "<script>alert(1)</script>"
IMG = "<img src=x onerror=alert(2)>"
SPEC_PAYLOAD = "</pre><script>alert(3)</script>"
SYSTEM = "<b>beacon</b>"
EXTERNAL = re.compile(r"""\b(?:src|href|action|poster|data)\s*=\s*["']?\s*(?:https?:)?//""", re.I)


# --------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def tiny_run(sim_run, tmp_path_factory):
    """The session's tiny run (judge x evidence axes), copied: this module writes its report into the run folder."""
    out = tmp_path_factory.mktemp("report_run") / "run"
    shutil.copytree(sim_run.out, out)
    return out, sim_run.store


@pytest.fixture(scope="module")
def report(tiny_run):
    from multiverse.reporting import write_report

    out, _ = tiny_run
    path = write_report(out)
    return path, path.read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def hostile_run(tiny_run, tmp_path_factory):
    """A copy of the tiny run whose transcripts, rationales, reasons, spec and a system name carry markup."""
    from multiverse.tables._tables import write_table

    source, _ = tiny_run
    root = tmp_path_factory.mktemp("hostile")
    run_dir = root / "run"
    shutil.copytree(source, run_dir)
    lines = []
    for record in read_transcripts(run_dir).values():
        record["turns"][0]["content"] = f"{SCRIPT} {IMG} " + record["turns"][0]["content"]
        lines.append(json.dumps(record))
    (run_dir / "transcripts.jsonl").write_text("\n".join(lines) + "\n")

    criteria = pd.read_parquet(run_dir / "criteria.parquet")
    criteria["rationale"] = f"{SCRIPT} " + criteria["rationale"]
    write_table(criteria, run_dir, "criteria")
    verdicts = pd.read_parquet(run_dir / "verdicts.parquet")
    failed = verdicts.index[:2]
    verdicts.loc[failed, "status"] = "judge_failed"
    verdicts.loc[failed, "reason"] = f"unparseable: {IMG}"
    verdicts.loc[failed, "compliant"] = pd.NA
    verdicts["system"] = verdicts["system"].replace("beacon", SYSTEM)
    write_table(verdicts, run_dir, "verdicts")
    rates = pd.read_parquet(run_dir / "rates.parquet")
    rates["system"] = rates["system"].replace("beacon", SYSTEM)
    write_table(rates, run_dir, "rates")
    spec = run_dir / "spec.yaml"
    spec.write_text(spec.read_text() + f"# {SPEC_PAYLOAD}\n")
    return run_dir


def _images(page: str) -> list[tuple[str, str]]:
    """(src, alt) of every <img> in the page."""
    found = []
    for tag in re.findall(r"<img\b[^>]*>", page):
        src = re.search(r'\ssrc="([^"]*)"', tag)
        alt = re.search(r'\salt="([^"]*)"', tag)
        found.append((src.group(1) if src else "", alt.group(1) if alt else ""))
    return found


# The explorer's inert data block and its one script: no other script element may appear.
OWN_SCRIPTS = ['<script type="application/json" id="explorer-data">', "<script>"]


def _script_tags(page: str) -> list[str]:
    return re.findall(r"<script\b[^>]*>", page, re.I)


def _problems(page: str) -> list[str]:
    return re.findall(r'class="problem">(.*?)</p>', page)


# --------------------------------------------------------------------------- the file


def test_report_is_one_offline_file(tiny_run, report):
    path, page = report
    out, _ = tiny_run
    assert path == out / "report.html" and path.is_file()
    assert page.startswith("<!DOCTYPE html>")
    assert not EXTERNAL.search(page), EXTERNAL.search(page).group(0)
    assert "<link" not in page and "@import" not in page and "url(" not in page
    assert not re.search(r"<script\b[^>]*\bsrc=", page)
    assert not re.search(r"<iframe|<object|<embed", page)
    # The charset must be declared within the first 1024 bytes, before anything from the run.
    head = page.encode()[:1024]
    assert b'<meta charset="utf-8">' in head and head.index(b"<meta charset") < head.index(b"<title>")
    # The page is the explorer: its data in one inert JSON block, one script of its own, allowed by hash.
    assert _script_tags(page) == OWN_SCRIPTS
    policy = html.unescape(re.search(r'http-equiv="Content-Security-Policy" content="([^"]*)"', page).group(1))
    assert "default-src 'none'" in policy and "unsafe" not in policy
    script = re.findall(r"<script>(.*?)</script>", page, re.S)[0]
    digest = base64.b64encode(hashlib.sha256(script.encode()).digest()).decode()
    assert f"script-src 'sha256-{digest}'" in policy
    assert 'id="app"' in page and 'id="details"' in page and page.index('id="app"') < page.index('id="details"')
    assert _problems(page) == []


def test_every_figure_is_a_valid_inline_png(report):
    from PIL import Image

    _, page = report
    images = _images(page)
    # curves, difference, ranking, variance, agreement for judge and for evidence, design factors
    assert len(images) >= 7
    for src, alt in images:
        assert src.startswith("data:image/png;base64,"), src[:40]
        assert alt.strip()
        data = base64.b64decode(src.split(",", 1)[1], validate=True)
        assert data.startswith(PNG_SIGNATURE)
        with Image.open(io.BytesIO(data)) as png:
            png.verify()
        with Image.open(io.BytesIO(data)) as png:
            width, height = png.size
        assert width > 200 and height > 100
    assert page.count("<figcaption>") == len(images)
    assert page.count("How to read this.") >= len(images)


def test_report_states_the_run(tiny_run, report):
    from multiverse.results._load import load_run

    _, page = report
    tables = load_run(tiny_run[0])
    manifest = tables.manifest
    assert "<h1>tiny</h1>" in page
    assert "SIMULATED" in page and manifest.simulated is True
    assert f"<b>{tables.verdicts['universe_id'].nunique()}</b> universes" in page
    assert f"<b>{tables.verdicts['case_id'].nunique()}</b> cases" in page
    # The primary universe's rates and intervals, as the table prints them.
    primary = tables.rates[(tables.rates["universe_id"] == manifest.primary) & (tables.rates["subgroup"] == "all")]
    assert len(primary) == 2
    for row in primary.itertuples():
        cells = [f"<td>{row.system}</td>", f'<td class="num">{row.n}</td>', f'<td class="num">{row.rate:.3f}</td>',
                 f'<td class="num">{row.ci_low:.3f}</td>', f'<td class="num">{row.ci_high:.3f}</td>']
        assert all(cell in page for cell in cells), row
    # Failure accounting: every status with its count.
    counts = tables.verdicts["status"].value_counts()
    for status in ("ok", "excluded", "rollout_failed", "judge_failed"):
        assert f"<b>{status}</b> {int(counts.get(status, 0))}" in page
    # Provenance, spec and the analyses' sections.
    assert manifest.spec_hash in page
    assert "judge_a" in page and "Krippendorff" in page
    # The joint tests and the grey band hold each system at its own primary rate (README), not at 0.5.
    assert "= 0.5 in every universe" not in page
    for system in ("atlas", "beacon"):
        rate = primary.loc[primary["system"] == system, "rate"].iloc[0]
        expected = (f"rate({system}) = {rate:.3f} (its primary rate) in every universe" if 0 < rate < 1
                    else f"{system}: no joint test, as its primary rate is {rate:g}")
        assert expected in page
    assert "every universe had the system's rate in the primary universe" in page
    assert "Top flips" in page and "In plain words" in page
    for stage in manifest.stages:
        assert f"<td>{stage}</td>" in page
    assert "<pre># The resolved spec of this run" in page
    # Drill-down: collapsible, with transcripts from transcripts.jsonl and the judge's rationales.
    assert page.count("<details") >= 4
    assert 'class="turn user"' in page and 'class="turn assistant"' in page
    assert "[simulated]" in page  # the sim's rationales


def test_build_report_html_matches_the_file(tiny_run):
    from multiverse.reporting import build_report_html
    from multiverse.results._load import load_run

    page = build_report_html(load_run(tiny_run[0]), store=tiny_run[1], threshold=0.8)
    assert page.startswith("<!DOCTYPE html>") and _problems(page) == []
    assert "rate(atlas) = 0.8 in every universe" in page


# --------------------------------------------------------------------------- escaping


def test_run_text_is_escaped(hostile_run, tmp_path):
    from multiverse.reporting import write_report

    page = write_report(hostile_run, tmp_path / "hostile.html").read_text(encoding="utf-8")
    for payload in (SCRIPT, IMG, SPEC_PAYLOAD, SYSTEM):
        assert payload not in page, payload
    assert html.escape(SCRIPT) in page  # in a transcript turn and in the rationales
    assert html.escape(IMG) in page  # in a transcript turn and in a failure reason
    assert html.escape(SPEC_PAYLOAD) in page
    assert html.escape(SYSTEM) in page
    assert _script_tags(page) == OWN_SCRIPTS  # the page's own: its data block and its script
    assert not re.search(r"<[a-z]+\b[^>]*\sonerror\s*=", page, re.I)
    assert page.count("</pre>") == page.count("<pre>")
    # The fixture failed two verdicts after the run wrote its rates: the page counts the verdicts and says so.
    assert [p for p in _problems(page) if not p.startswith("Stale rates table: rates.parquet does not match")] == []
    assert len(_problems(page)) == 1


def test_without_transcripts_jsonl_or_a_store_given_rationales_are_shown_alone(tiny_run, tmp_path):
    """An older run folder: its manifest names its store (which is here), yet only a store given is read."""
    from multiverse.reporting import write_report

    run_dir = tmp_path / "run"
    shutil.copytree(tiny_run[0], run_dir)
    (run_dir / "transcripts.jsonl").unlink()
    assert Path(json.loads((run_dir / "manifest.json").read_text())["store"]).is_dir()
    page = write_report(run_dir).read_text(encoding="utf-8")
    assert "Transcripts are unavailable" in page and "give the store that holds the run" in page
    assert 'class="turn' not in page
    assert "[simulated]" in page
    assert _problems(page) == []
    given = write_report(run_dir, tmp_path / "given.html", store=tiny_run[1]).read_text(encoding="utf-8")
    assert "Transcripts are unavailable" not in given and 'class="turn user"' in given
    assert _problems(given) == []


def test_a_store_given_that_is_not_there_is_refused(tiny_run, tmp_path):
    from multiverse.reporting import write_report

    run_dir = tmp_path / "run"
    shutil.copytree(tiny_run[0], run_dir)
    (run_dir / "transcripts.jsonl").unlink()
    with pytest.raises(InputError, match="store"):
        write_report(run_dir, tmp_path / "refused.html", store=tmp_path / "nowhere")
    assert not (tmp_path / "refused.html").exists()


def _label_table(tmp_path, rng) -> Path:
    rows = [
        {"system": system, "case_id": f"c{case}", "judge": judge, "behavior": f"b{case % 2}",
         "compliant": bool(rng.random() < rate)}
        for system, rate in (("alpha", 0.8), ("beta", 0.6), ("gamma", 0.4))
        for judge in ("j1", "j2", "j3")
        for case in range(12)
    ]
    table = tmp_path / "labels.csv"
    pd.DataFrame(rows).to_csv(table, index=False)
    return table


def test_bare_verdicts_table(tmp_path, rng):
    """A table from elsewhere: no manifest, spec, criteria, rates or store; still a full report."""
    from multiverse.reporting import write_report

    table = _label_table(tmp_path, rng)
    pd.read_csv(table).drop(columns="behavior").to_csv(table, index=False)  # every other column is an axis
    path = write_report(table)
    page = path.read_text(encoding="utf-8")
    assert path == tmp_path / "report.html"
    assert "SIMULATED" not in page and "Transcripts are unavailable" in page
    assert "no spec.yaml" in page and "no design-factor rates" in page
    assert "<h3>Axis <code>judge</code></h3>" in page
    assert len(_images(page)) >= 5  # curves, difference, ranking, variance, agreement
    assert _problems(page) == []


def test_import_directory(tmp_path, rng):
    from multiverse.importers import import_table
    from multiverse.reporting import write_report

    imported = import_table(_label_table(tmp_path, rng), system="system", item="case_id", label="compliant",
                            axes=["judge"], factors=["behavior"], out_dir=tmp_path / "imported")
    path = write_report(imported.out_dir)
    page = path.read_text(encoding="utf-8")
    assert path == imported.out_dir / "report.html"
    assert "imported (table)" in page and "Transcripts are unavailable" in page
    # No universe stands in for an undeclared primary (issue 12, item 7).
    assert "No primary (pre-registered) universe is declared" in page and "stands in" not in page
    # Without a primary there is no primary-only factor figure; the rest are drawn.
    assert len(_images(page)) >= 5
    assert _problems(page) == []


# --------------------------------------------------------------------------- in a browser


def _chromium() -> str:
    for name in ("chromium", "chromium-browser"):
        found = shutil.which(name)
        if found:
            return found
    if os.environ.get("CI"):
        pytest.fail("chromium is not on PATH; CI installs it (.ci/run) for the report's browser test")
    pytest.skip("chromium is not on PATH (install it to run the report's browser test)")


def _browse(page: Path, tmp_path: Path, *extra: str) -> str:
    command = [
        _chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync",
        f"--user-data-dir={tmp_path / 'chromium-profile'}", "--virtual-time-budget=10000", *extra,
        page.resolve().as_uri(),
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def _body_attributes(dom: str) -> dict[str, str]:
    body = re.search(r"<body\b([^>]*)>", dom)
    assert body, dom[:500]
    return dict(re.findall(r'([\w-]+)="([^"]*)"', body.group(1)))


@pytest.mark.browser
def test_report_renders_in_chromium(report, tmp_path):
    from PIL import Image, ImageStat

    path, page = report
    attributes = _body_attributes(_browse(path, tmp_path, "--dump-dom"))
    total = int(attributes["data-images-total"])
    assert total == len(_images(page)) > 0
    assert int(attributes["data-images-loaded"]) == total
    assert int(attributes["data-script-errors"]) == 0, attributes.get("data-script-error-messages")

    shot = tmp_path / "shot.png"
    _browse(path, tmp_path, f"--screenshot={shot}", "--window-size=1280,4000", "--hide-scrollbars")
    assert shot.read_bytes().startswith(PNG_SIGNATURE)
    with Image.open(shot) as image:
        assert image.size == (1280, 4000)
        grey = image.convert("L")
        # A blank or failed page is one flat colour; a rendered report has text and figures.
        assert ImageStat.Stat(grey).stddev[0] > 20
        assert len(grey.getcolors(maxcolors=256 * 256) or range(257)) > 50


@pytest.mark.browser
def test_hostile_report_runs_no_injected_script(hostile_run, tmp_path):
    from multiverse.reporting import write_report

    path = write_report(hostile_run, tmp_path / "hostile.html")
    attributes = _body_attributes(_browse(path, tmp_path, "--dump-dom"))
    assert int(attributes["data-script-errors"]) == 0, attributes.get("data-script-error-messages")
    assert int(attributes["data-images-loaded"]) == int(attributes["data-images-total"]) > 0


# --------------------------------------------------------------------------- what the report says


def test_grey_band_is_each_systems_primary_rate(tiny_run):
    """The band and the tests hold every universe at the system's primary rate, unless a threshold is given."""
    from multiverse.reporting._run import _prepare
    from multiverse.results._load import load_run

    tables = load_run(tiny_run[0])
    run = _prepare(tables, tiny_run[1], None, True)
    at_primary = run.curve[run.curve["is_primary"]].set_index("system")["rate"]
    tests, skipped = run.rate_tests
    assert len(tests) + len(skipped) == len(run.systems_ok) == 2
    for system, test in tests.items():
        assert test.threshold == pytest.approx(at_primary[system])
        # The band is centred on that rate: its median curve straddles it.
        assert test.band["low"].min() <= at_primary[system] <= test.band["high"].max()
    fixed = _prepare(tables, tiny_run[1], 0.8, True).rate_tests[0]
    assert {t.threshold for t in fixed.values()} == {0.8}
    assert _prepare(tables, tiny_run[1], None, False).rate_tests == ({}, [])
    for bad in (0.0, 1.0, -0.2, float("nan"), True):
        with pytest.raises(InputError, match="threshold"):
            _prepare(tables, tiny_run[1], bad, True)


def test_tests_can_be_turned_off_and_progress_shown(tiny_run, capfd):
    from multiverse.reporting import build_report_html
    from multiverse.results._load import load_run

    page = build_report_html(load_run(tiny_run[0]), store=tiny_run[1], tests=False, progress=True)
    err = capfd.readouterr().err
    assert "<h3>Joint tests</h3>" not in page and "null hypothesis" not in page and "its primary rate" not in page
    assert "Joint tests were turned off" in page and "grey band is where" not in page
    assert _problems(page) == [] and len(_images(page)) >= 7
    # One step per section, named, on stderr.
    assert "report" in err and "Specification curves" in err and "Examples: transcripts" in err
    build_report_html(load_run(tiny_run[0]), store=tiny_run[1], tests=False, progress=False)
    assert capfd.readouterr().err == ""


def test_displayed_transcripts_carry_no_sim_markers(tiny_run, report):
    from multiverse.reporting._markup import _without_markers
    from multiverse.sim import strip_markers

    _, page = report
    assert "[[sim:" not in page
    assert "hidden ground-truth markers" in page
    texts = [turn.get("content") or "" for record in stored_records(tiny_run[1], "transcript").values()
             for turn in record.get("turns", [])]
    marked = [t for t in texts if "[[sim:" in t]
    assert marked  # the store keeps them
    for text in marked + ["no marker here", "a [[sim:turn t=1 opp=x,y]] b [[sim:reply viol=~z]]", "[[not:sim]]"]:
        assert _without_markers(text).strip() == strip_markers(text)


def test_simulated_failures_are_explained(report, tmp_path, rng):
    from multiverse.reporting import write_report

    _, page = report
    assert "injects failures on purpose" in page
    bare = write_report(_label_table(tmp_path, rng), progress=False).read_text(encoding="utf-8")
    assert "injects failures on purpose" not in bare


def test_report_keeps_the_declared_option_order(tiny_run):
    from multiverse.reporting._run import _prepare
    from multiverse.results._load import load_run

    run = _prepare(load_run(tiny_run[0]), tiny_run[1], None, True)
    assert run.options == {"judge": ["judge_a", "judge_b"], "evidence": ["strict", "lenient"]}


DOLLAR_NAMES = ["a $\\b $_c", "$x^2$"]


@pytest.fixture(scope="module")
def dollar_run(tiny_run, tmp_path_factory):
    """The tiny run with systems and an axis option whose names matplotlib would read as mathtext."""
    from multiverse.tables._tables import write_table

    source, _ = tiny_run
    run_dir = tmp_path_factory.mktemp("dollar") / "run"
    shutil.copytree(source, run_dir)
    names = dict(zip(("atlas", "beacon"), DOLLAR_NAMES))
    for name in ("verdicts", "rates"):
        frame = pd.read_parquet(run_dir / f"{name}.parquet")
        frame["system"] = frame["system"].replace(names)
        frame["evidence"] = frame["evidence"].replace({"lenient": "len$ient <script>"})
        write_table(frame, run_dir, name)
    return run_dir


def test_dollar_names_render_literally_in_every_section(dollar_run, tmp_path):
    from multiverse.reporting import write_report

    page = write_report(dollar_run, tmp_path / "dollar.html", progress=False).read_text(encoding="utf-8")
    assert _problems(page) == []
    for name in DOLLAR_NAMES + ["len$ient <script>"]:
        assert html.escape(name) in page
    assert "<script>alert" not in page and _script_tags(page) == OWN_SCRIPTS
    assert len(_images(page)) >= 7
