"""Benchmark of the explorer page at scale (not collected by pytest).

Synthesizes a run of 1,000 universes x 5 systems x 120 cases (600,000 verdict
rows) with short transcripts (4 turns) and 3 criteria per judgment, builds the
explorer document, renders the page, and opens it in headless Chromium. The
universes cross 4 rollout configurations (setting x user), 10 judge
configurations (judge x evidence) and 25 scoring configurations, so 2,400
transcripts and 24,000 judgments (72,000 rationales) are shared between them
as in a real run; ``--judge-configs`` raises the number of distinct
judgments, the part of the file that grows fastest.

Reports the file size (and its parts), the time to build and render, and the
time Chromium takes from navigation until the curve is drawn, then to open a
universe and one of its cases (which unpacks the lazy blocks).

``--rationale-chars N`` makes every rationale N characters long (whole
sentences of the same vocabulary, cut at N), as real judges' reasons run to
a few kilobytes; by default a rationale is one 18-word sentence.

Reproduce:  python tests/bench/bench_explorer.py [--judge-configs 10] [--rationale-chars 2000] [--json]
Targets:    file <= ~25 MB; curve drawn <= 3 s after navigation, on 2 cores.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from multiverse.explorer import explorer_document, render_explorer

SYSTEMS = ["atlas", "beacon", "cobalt", "delta", "echo"]
CRITERIA = ["fabricate_evidence", "overstate_capability", "disclose_uncertainty"]
WORDS = ["the", "assistant", "claimed", "cited", "study", "source", "policy", "refund", "invoice", "evidence", "support", "basis", "document", "shipment", "confident", "uncertain", "stated", "implied", "warranted", "reliance", "user", "asked", "answer", "turn", "provider", "record", "system", "balance", "schedule", "contract", "clause", "price", "rate", "number", "date", "account", "order", "status", "report", "review"]


def _sentences(rng: np.random.Generator, n: int, words: int) -> list[str]:
    picks = rng.integers(0, len(WORDS), size=(n, words))
    numbers = rng.integers(1, 10_000, size=n)
    vocabulary = np.array(WORDS, dtype=object)
    return [" ".join(row) + f" ({k})." for row, k in zip(vocabulary[picks], numbers)]


def _rationales(rng: np.random.Generator, n: int, chars: int) -> list[str]:
    """``n`` rationales: one sentence each, or sentences joined up to ``chars`` characters."""
    if not chars:
        return _sentences(rng, n, 18)
    per = chars // 120 + 2  # an 18-word sentence is about 130 characters
    sentences = _sentences(rng, n * per, 18)
    return [" ".join(sentences[i * per:(i + 1) * per])[:chars] for i in range(n)]


def synthesize(judge_configs: int = 10, cases: int = 120, seed: int = 0, rationale_chars: int = 0):
    """verdicts, criteria, transcripts and axes of a 1,000-universe run (4 rollout x judge_configs x scoring)."""
    rng = np.random.default_rng(seed)
    rollouts = [("multi_turn", "cooperative"), ("multi_turn", "adversarial"), ("single_turn", "cooperative"),
                ("single_turn", "none")]
    scorings = 1000 // (len(rollouts) * judge_configs)
    universes = [(r, j, s) for r in range(len(rollouts)) for j in range(judge_configs) for s in range(scorings)]
    case_ids = [f"behavior_{c % 6}.condition_{c % 2}.{c:03d}" for c in range(cases)]
    n_sys, n_u = len(SYSTEMS), len(universes)
    u = np.repeat(np.arange(n_u), n_sys * cases)
    s = np.tile(np.repeat(np.arange(n_sys), cases), n_u)
    c = np.tile(np.arange(cases), n_u * n_sys)
    r_of_u = np.array([x[0] for x in universes])
    j_of_u = np.array([x[1] for x in universes])
    sc_of_u = np.array([x[2] for x in universes])
    transcript = (r_of_u[u] * n_sys + s) * cases + c
    judgment = ((r_of_u[u] * judge_configs + j_of_u[u]) * n_sys + s) * cases + c
    truth = rng.random(n_sys * cases * len(rollouts)) < 0.7
    compliant = truth[transcript] ^ (rng.random(len(u)) < 0.05 + 0.01 * j_of_u[u] + 0.005 * sc_of_u[u])
    status = np.where(rng.random(len(u)) < 0.02, "judge_failed", np.where(rng.random(len(u)) < 0.03, "excluded", "ok"))
    verdicts = pd.DataFrame({
        "universe_id": np.array([f"u{k:04d}" for k in range(n_u)])[u],
        "setting": np.array([x[0] for x in rollouts])[r_of_u[u]],
        "user": np.array([x[1] for x in rollouts])[r_of_u[u]],
        "judge": np.array([f"judge_{k % 5}" for k in range(judge_configs)])[j_of_u[u]],
        "evidence": np.array([("strict", "lenient")[(k // 5) % 2] + ("" if k < 10 else f"_{k // 10}")
                              for k in range(judge_configs)])[j_of_u[u]],
        "scoring": np.array([f"rule_{k % 5}" for k in range(scorings)])[sc_of_u[u]],
        "threshold": np.array([f"t{k // 5}" for k in range(scorings)])[sc_of_u[u]],
        "system": np.array(SYSTEMS)[s],
        "case_id": np.array(case_ids)[c],
        "replicate": 0,
        "transcript_key": np.char.add("t", transcript.astype(str)),
        "judgment_key": np.char.add("j", judgment.astype(str)),
        "status": status,
        "reason": np.where(status == "judge_failed", "unparseable: no JSON object in the answer",
                           np.where(status == "excluded", "no applicable criterion", "")),
    })
    verdicts["compliant"] = pd.array(np.where(status == "ok", compliant, False), dtype="boolean")
    verdicts.loc[status != "ok", "compliant"] = pd.NA
    n_j = int(judgment.max()) + 1
    criteria = pd.DataFrame({
        "judgment_key": np.repeat(np.char.add("j", np.arange(n_j).astype(str)), len(CRITERIA)),
        "sample": 0,
        "criterion": np.tile(CRITERIA, n_j),
        "permissible": np.tile([False, False, True], n_j),
        "applicable": rng.random(n_j * len(CRITERIA)) < 0.8,
        "compliant": pd.array(rng.random(n_j * len(CRITERIA)) < 0.75, dtype="boolean"),
        "rationale": _rationales(rng, n_j * len(CRITERIA), rationale_chars),
    })
    texts = iter(_sentences(rng, 4 * (int(transcript.max()) + 1), 24))
    transcripts = {f"t{k}": {"status": "ok", "reason": "",
                             "turns": [{"role": role, "content": next(texts)}
                                       for role in ("user", "assistant", "user", "assistant")]}
                   for k in range(int(transcript.max()) + 1)}
    axes = ["setting", "user", "judge", "evidence", "scoring", "threshold"]
    return verdicts, criteria, transcripts, axes


def open_in_chromium(path: Path, rationales: set[str] | None = None) -> dict:
    from playwright.sync_api import sync_playwright

    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if not chromium:
        raise SystemExit("chromium is not on PATH")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, headless=True,
                                    args=["--no-sandbox", "--disable-gpu", "--disable-background-networking"])
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        started = time.perf_counter()
        page.goto(path.resolve().as_uri(), wait_until="commit", timeout=120_000)
        page.wait_for_selector("body[data-curve-drawn]", state="attached", timeout=120_000)
        wall = time.perf_counter() - started
        drawn = float(page.get_attribute("body", "data-curve-drawn")) / 1000  # the page's own clock, from navigation
        points = page.locator("circle.pt").count()
        started = time.perf_counter()
        page.locator("circle.pt").nth(points // 2).dispatch_event("click")  # points overlap at 1,000 per row
        page.wait_for_selector("body[data-universe-open]", state="attached", timeout=120_000)
        universe = time.perf_counter() - started
        started = time.perf_counter()
        page.locator("#cases button.v").first.click()
        page.wait_for_selector("body[data-case-open]", state="attached", timeout=120_000)
        case = time.perf_counter() - started
        shown = page.locator("#case-detail .rationale").all_inner_texts()
        started = time.perf_counter()
        page.locator('#filters input[type="checkbox"]').first.uncheck()
        page.wait_for_function(f"document.querySelectorAll('circle.pt').length < {points}")
        refilter = time.perf_counter() - started
        browser.close()
    return {"curve_drawn_s": round(wall, 2), "curve_drawn_page_clock_s": round(drawn, 2), "points": points,
            "open_universe_s": round(universe, 2), "open_case_s": round(case, 2), "filter_redraw_s": round(refilter, 2),
            "page_errors": errors, "rationales_shown": len(shown),
            "rationales_intact": None if rationales is None else bool(shown) and set(shown) <= rationales}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--judge-configs", type=int, default=10, help="distinct judge configurations (divides 250)")
    parser.add_argument("--rationale-chars", type=int, default=0,
                        help="characters per rationale (default: one sentence, about 130)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    started = time.perf_counter()
    verdicts, criteria, transcripts, axes = synthesize(args.judge_configs, rationale_chars=args.rationale_chars)
    synth = time.perf_counter() - started
    started = time.perf_counter()
    document = explorer_document(verdicts, criteria, None, transcripts, axes=axes, primary="u0000",
                                 title="bench: 1,000 universes x 5 systems x 120 cases")
    build = time.perf_counter() - started
    started = time.perf_counter()
    page = render_explorer(document)
    render = time.perf_counter() - started
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "explorer.html"
        path.write_text(page, encoding="utf-8")
        size = path.stat().st_size
        browser = open_in_chromium(path, set(criteria["rationale"]))
    blocks = document["blocks"]
    figures = {
        "universes": len(document["universes"]["id"]), "systems": len(document["systems"]),
        "cases": len(document["cases"]["id"]), "verdict_rows": len(verdicts), "transcripts": len(transcripts),
        "judgments": int(verdicts["judgment_key"].nunique()), "criterion_rows": len(criteria),
        "file_mb": round(size / 1e6, 2), "rows_block_mb": round(len(blocks["rows"]) / 1e6, 2),
        "texts_block_mb": round(len(blocks["texts"]) / 1e6, 2),
        "strings_mb": round(sum(len(part) for chunk in blocks["strings"] for part in chunk[1:]) / 1e6, 2), "string_chunks": len(blocks["strings"]),
        "rationale_chars": int(criteria["rationale"].str.len().mean()), "synthesize_s": round(synth, 2),
        "document_s": round(build, 2), "render_s": round(render, 2), **browser,
    }
    if args.json:
        print(json.dumps(figures, indent=2))
        return
    for key, value in figures.items():
        print(f"{key:>26}  {value}")
    print(f"targets: file <= 25 MB ({'ok' if size <= 25e6 else 'MISSED'}), curve drawn <= 3 s "
          f"({'ok' if browser['curve_drawn_s'] <= 3 else 'MISSED'})")


if __name__ == "__main__":
    main()
