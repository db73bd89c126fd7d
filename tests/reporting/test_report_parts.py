"""Parts of the report that need no simulated run: untested systems, the list of top flips, saved figures,
the option order of a bare table."""

from __future__ import annotations

import base64
import html
import io
from pathlib import Path

import pandas as pd


def _problems(page: str) -> list[str]:
    import re

    return re.findall(r'class="problem">(.*?)</p>', page)


def test_primary_rate_of_zero_or_one_is_said_not_tested():
    from multiverse.reporting import build_report_html
    from multiverse.results._results import Results

    rows = [{"system": s, "case_id": f"c{c}", "judge": j, "compliant": (s == "always") or (c + k) % 3 > 0}
            for s in ("always", "sometimes") for k, j in enumerate(("j1", "j2", "j3")) for c in range(12)]
    from multiverse.tables._tables import universe_ids

    verdicts = pd.DataFrame(rows)
    verdicts["universe_id"] = universe_ids(verdicts, ["judge"])
    primary = str(verdicts.loc[verdicts["judge"] == "j1", "universe_id"].iloc[0])
    page = build_report_html(Results(verdicts=verdicts, axes=["judge"], primary=primary), progress=False)
    assert "always: no joint test, as its primary rate is 1" in page
    assert "(its primary rate) in every universe" in page  # the other system is tested
    assert _problems(page) == []


def _flip_table(tmp_path, rng, n_options=3) -> Path:
    """Three systems of equal rate over 3 x 3 x 3 universes: the top flips in most of them."""
    rows = [{"system": s, "case_id": f"c{c}", "judge": j, "evidence": e, "scoring": g,
             "compliant": bool(rng.random() < 0.6)}
            for s in ("alpha", "beta", "gamma") for j in [f"j{k}" for k in range(n_options)]
            for e in ("strict", "lenient", "mixed")[:n_options] for g in ("all", "some", "none")[:n_options]
            for c in range(15)]
    table = tmp_path / "flips.csv"
    pd.DataFrame(rows).to_csv(table, index=False)
    return table


def test_every_top_flip_is_listed_with_its_universe(tmp_path, rng, monkeypatch):
    import dataclasses

    # Results reads the analyses from the facade when it runs one, so the facade's name is the one to swap.
    import multiverse.analysis as ranking_module
    from multiverse.reporting import build_report_html
    from multiverse.results._load import load_run

    tables = load_run(_flip_table(tmp_path, rng))
    first = tables.verdicts.iloc[0]
    tables = dataclasses.replace(tables, primary=str(first["universe_id"]))  # a bare table declares none
    real = ranking_module.ranking
    seen = {}

    def ranking_with_a_new_field(*args, **kwargs):
        result = real(*args, **kwargs)
        for flip in result["flips"]:
            flip["margin_of_flip"] = 0.125
            flip["also_flips"] = [{"axis": "judge", "option": "j9"}, {"axis": "scoring", "option": "z"}]
        seen.update(result)
        return result

    monkeypatch.setattr(ranking_module, "ranking", ranking_with_a_new_field)
    page = build_report_html(tables, tests=False, progress=False)
    flips = seen["flips"]
    assert len(flips) > 15  # more than the report used to show
    section = page[page.index("<h3>Top flips</h3>"):]
    section = section[:section.index("</section>")]
    assert section.count("<details") == 1 and "<summary>All " in section
    body = section[section.index("<tbody>"):section.index("</tbody>")]
    assert body.count("<tr") == len(flips)
    for flip in flips:
        assert html.escape(str(flip["universe_id"])) in body
    assert "margin of flip" in section and "0.125" in section  # a field the report does not know is shown
    assert "axis=judge, option=j9; axis=scoring, option=z" in section
    assert "more rows not shown" not in section


def test_bare_table_options_keep_their_first_appearance(tmp_path):
    from multiverse.reporting._run import _prepare
    from multiverse.results._load import load_run

    table = tmp_path / "t.csv"
    rows = [{"system": s, "case_id": f"c{c}", "judge": j, "compliant": c % 2 == 0}
            for j in ("zulu", "alpha", "mike") for s in ("a", "b") for c in range(4)]
    pd.DataFrame(rows).to_csv(table, index=False)
    assert _prepare(load_run(table), None, None, True).options == {"judge": ["zulu", "alpha", "mike"]}


def test_png_keeps_a_legend_drawn_past_the_figure_edge():
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from PIL import Image

    from multiverse.reporting._markup import _png

    figure = Figure(figsize=(4, 3))
    ax = figure.add_subplot()
    ax.plot([0, 1], [0, 1], label="a label long enough to reach past the right edge")
    ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0))
    encoded, _, _ = _png(figure)
    with Image.open(io.BytesIO(base64.b64decode(encoded))) as png:
        width = png.size[0]
    renderer = FigureCanvasAgg(figure).get_renderer()
    legend = ax.get_legend().get_window_extent(renderer)
    left = figure.get_tightbbox(renderer).x0  # inches: the saved image starts at the leftmost ink
    assert width > 4 * 130  # wider than the figure: the legend past its edge was kept
    assert width >= (legend.x1 / figure.dpi - left) * 130 - 2


def test_ranking_section_says_in_words_which_systems_are_separable():
    # Two systems with identical behaviour and one far below: the report must say
    # the twins are not separable and that both rank above the third (issue 12, item 5).
    import numpy as np

    from multiverse.reporting import build_report_html
    from multiverse.results._results import Results
    from multiverse.tables._tables import universe_ids

    rng = np.random.default_rng(5)
    rows = [{"system": s, "case_id": f"c{c}", "judge": j, "compliant": bool(rng.random() < p)}
            for s, p in (("<twin-a>", 0.8), ("twin-b", 0.8), ("low", 0.2)) for j in ("j1", "j2") for c in range(40)]
    verdicts = pd.DataFrame(rows)
    verdicts["universe_id"] = universe_ids(verdicts, ["judge"])
    primary = str(verdicts.loc[verdicts["judge"] == "j1", "universe_id"].iloc[0])
    page = build_report_html(Results(verdicts=verdicts, axes=["judge"], primary=primary), tests=False,
                             progress=False)
    section = page[page.index("Can neighbours in the primary universe"):]
    section = section[:section.index("</ul>")]
    assert "&lt;twin-a&gt; and twin-b are not separable" in section or \
        "twin-b and &lt;twin-a&gt; are not separable" in section
    assert "<twin-a>" not in section  # escaped
    assert "above low" in section and "ranks above low" in section
    assert "P(top), 95% interval" in page


def test_every_figure_of_a_simulated_run_is_stamped_and_no_other_is(monkeypatch):
    """The report's figures go through one door (markup._figure): a simulated run's all carry the stamp."""
    from multiverse.plots._stamp import is_stamped
    from multiverse.reporting import _markup as markup
    from multiverse.reporting import build_report_html
    from multiverse.results._results import Results
    from multiverse.tables._tables import universe_ids

    rows = [{"system": s, "case_id": f"c{c}", "judge": j, "evidence": e, "behavior": ["lie", "omit"][c % 2],
             "compliant": (c + k + len(s)) % 3 > 0}
            for s in ("atlas", "beacon") for k, j in enumerate(("j1", "j2")) for e in ("strict", "lenient")
            for c in range(12)]
    verdicts = pd.DataFrame(rows)
    verdicts["universe_id"] = universe_ids(verdicts, ["judge", "evidence"])
    drawn: list = []
    real = markup._png
    monkeypatch.setattr(markup, "_png", lambda figure: (drawn.append(figure), real(figure))[1])
    for simulated in (True, False):
        drawn.clear()
        results = Results(verdicts=verdicts, axes=["judge", "evidence"], factors=["behavior"],
                          manifest={"simulated": simulated})
        page = build_report_html(results, progress=False)
        assert _problems(page) == []
        assert len(drawn) >= 5  # curves, difference, ranking, variance, agreement, factors
        assert [is_stamped(f) for f in drawn] == [simulated] * len(drawn)
