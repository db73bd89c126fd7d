"""The report: one self-contained HTML file with every figure and table of a run.

``write_report(source)`` reads a run directory, an import directory or a bare
verdicts table (``tables.load_run``), runs the analyses (specification curves
with joint tests, ranking stability, variance decomposition, judge agreement,
rates by design factor) and writes a single HTML file: figures are inline PNGs
(``data:`` URIs), styles and the one small script are inline, and nothing is
fetched from anywhere, so the file opens offline and can be mailed as is.
``build_report_html(tables)`` returns the same page as a string, for notebooks.

Everything that comes from the run (transcripts, rationales, reasons, the
spec, system, axis and option names) is HTML-escaped on the way in; a
Content-Security-Policy that allows only the page's own script (by hash) is
the second line of defence. A section whose analysis fails says so in place
and the rest of the report is still written.

The script at the top of ``<head>`` counts script errors and, on load, sets
``data-images-total``, ``data-images-loaded`` and ``data-script-errors`` on
``<body>``, so a headless browser can check that the page rendered.
"""

from __future__ import annotations

import base64
import hashlib
import html
import io
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .errors import InputError, MultiverseError
from .tables import RunTables, load_run

__all__ = ["write_report", "build_report_html", "EXAMPLES_PER_CELL", "MAX_DRILLDOWN"]

#: Example transcripts shown per universe x system in the drill-down.
EXAMPLES_PER_CELL = 3
#: Universe x system combinations whose examples are shown in full.
MAX_DRILLDOWN = 60
# Longer tables go behind a <details> or are cut, so the page stays readable.
_MAX_ROWS = 300
_MAX_TURN_CHARS = 4000
_DPI = 130
_RANK_BOOTSTRAP = 1000
_STATUSES = ("ok", "excluded", "rollout_failed", "judge_failed")

# Counts script errors (not failed images: those show up as images not loaded)
# and publishes what a headless browser needs to judge the page.
_SCRIPT = (
    "(function(){var n=0,m=[];"
    "window.addEventListener('error',function(e){n++;m.push(String(e.message||e.type));});"
    "window.addEventListener('load',function(){var i=document.images,k=0,j;"
    "for(j=0;j<i.length;j++){if(i[j].complete&&i[j].naturalWidth>0){k++;}}"
    "var b=document.body;b.setAttribute('data-images-total',i.length);"
    "b.setAttribute('data-images-loaded',k);b.setAttribute('data-script-errors',n);"
    "b.setAttribute('data-script-error-messages',m.join(' | '));});})();"
)

_CSS = """
body{margin:0;color:#1f2328;background:#fff;line-height:1.5;
 font-family:system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif}
main{max-width:72rem;margin:0 auto;padding:1.5rem 1.25rem 4rem}
h1{font-size:1.7rem;margin:.2rem 0 .6rem}
h2{font-size:1.3rem;margin:2.6rem 0 .6rem;padding-bottom:.2rem;border-bottom:1px solid #d0d7de}
h3{font-size:1.05rem;margin:1.6rem 0 .4rem}
p,li{max-width:60rem}
code{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:.85em}
.banner{background:#fff4d6;border:2px solid #d4a017;border-radius:6px;padding:.6rem .9rem;font-weight:600;
 margin:.8rem 0}
.facts{display:flex;flex-wrap:wrap;gap:.5rem 1.5rem;margin:.6rem 0;padding:0;list-style:none}
.facts li b{font-size:1.25rem}
nav ol{columns:2;font-size:.95rem}
figure{margin:1rem 0}
figure img{display:block;max-width:100%;height:auto}
figcaption,.howto{font-size:.9rem;color:#3d444d;background:#f6f8fa;border-left:3px solid #8c959f;
 padding:.45rem .75rem;margin:.4rem 0}
.scroll{overflow-x:auto;max-width:100%}
table{border-collapse:collapse;font-size:.85rem;margin:.6rem 0}
th,td{border:1px solid #d8dee4;padding:.2rem .5rem;text-align:left;vertical-align:top}
th{background:#f3f4f6;font-weight:600}
td.num,th.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
tr.primary td{background:#fff8e6}
tr.na td{color:#6e7781}
pre{white-space:pre-wrap;overflow-wrap:anywhere;background:#f6f8fa;border:1px solid #d8dee4;
 border-radius:4px;padding:.6rem .8rem;font-size:.8rem;max-height:40rem;overflow:auto}
details{border:1px solid #d8dee4;border-radius:4px;margin:.35rem 0;padding:.25rem .6rem}
details[open]{padding-bottom:.6rem}
summary{cursor:pointer}
.note{color:#57606a;font-size:.9rem}
.problem{background:#ffebe9;border:1px solid #ff8182;border-radius:4px;padding:.5rem .8rem}
.example{border-top:1px dashed #d0d7de;margin-top:.8rem;padding-top:.5rem}
.turn{border-radius:4px;padding:.3rem .6rem;margin:.3rem 0;white-space:pre-wrap;overflow-wrap:anywhere;font-size:.85rem}
.turn .role{display:block;font-size:.7rem;font-weight:700;letter-spacing:.04em;text-transform:uppercase;color:#57606a}
.turn.user{background:#eef4fb}.turn.assistant{background:#f4f4ee}.turn.tool{background:#f3eefb}
.turn.other{background:#f6f8fa}
.no{color:#b42318;font-weight:600}.yes{color:#1a7f37}
""".strip()


# --------------------------------------------------------------------------- HTML helpers


class _Raw(str):
    """Markup built here, already safe: the table helper does not escape it again."""


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _fmt(value: Any, digits: int = 3) -> str:
    if value is None or value is pd.NA:
        return "—"
    if isinstance(value, (bool, np.bool_)):
        return "yes" if value else "no"
    if isinstance(value, (float, np.floating)):
        return "—" if not np.isfinite(value) else f"{value:.{digits}f}"
    return str(value)


def _cell(value: Any, tag: str = "td") -> str:
    if isinstance(value, _Raw):
        return f"<{tag}>{value}</{tag}>"
    numeric = isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, (bool, np.bool_))
    klass = ' class="num"' if numeric else ""
    return f"<{tag}{klass}>{_e(_fmt(value))}</{tag}>"


def _table(header: Sequence[str] | None, rows: Sequence[Sequence[Any]], *, row_classes: Sequence[str] | None = None,
           limit: int = _MAX_ROWS) -> str:
    """An escaped HTML table (cells may be ``_Raw``); rows past ``limit`` are cut with a note."""
    head = "<thead><tr>" + "".join(f"<th>{_e(h)}</th>" for h in header) + "</tr></thead>" if header else ""
    body = []
    for i, row in enumerate(rows[:limit]):
        klass = f' class="{_e(row_classes[i])}"' if row_classes and row_classes[i] else ""
        body.append(f"<tr{klass}>" + "".join(_cell(v) for v in row) + "</tr>")
    more = f'<p class="note">{len(rows) - limit} more rows not shown.</p>' if len(rows) > limit else ""
    return f'<div class="scroll"><table>{head}<tbody>{"".join(body)}</tbody></table></div>{more}'


def _png(figure) -> tuple[str, int, int]:
    """A matplotlib Figure as a base64 PNG and its display size in CSS pixels."""
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=_DPI, facecolor="white")
    data = buffer.getvalue()
    width, height = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    scale = 96 / _DPI  # show at the figure's own size, not the PNG's pixel count
    return base64.b64encode(data).decode("ascii"), round(width * scale), round(height * scale)


def _figure(figure, alt: str, caption: str) -> str:
    encoded, width, height = _png(figure)
    return (f'<figure><img src="data:image/png;base64,{encoded}" width="{width}" height="{height}" '
            f'alt="{_e(alt)}"><figcaption><b>How to read this.</b> {caption}</figcaption></figure>')


def _list(lines: Sequence[str]) -> str:
    return "<ul>" + "".join(f"<li>{_e(line)}</li>" for line in lines) + "</ul>" if lines else ""


def _notes(lines: Sequence[str]) -> str:
    return "".join(f'<p class="note">Note: {_e(line)}</p>' for line in lines)


def _collapsed(summary: str, body: str, *, open_: bool = False) -> str:
    return f"<details{' open' if open_ else ''}><summary>{_e(summary)}</summary>{body}</details>"


# --------------------------------------------------------------------------- the run, prepared once


@dataclass
class _Run:
    """What every section needs: the tables, who is who, and the analyses' shared inputs."""

    tables: RunTables
    verdicts: pd.DataFrame
    axes: list[str]
    factors: list[str]
    systems: list[str]
    universes: pd.DataFrame  # universe_id, label, axis columns, in report order (primary first)
    primary: str
    primary_declared: bool
    store: Any
    store_note: str
    threshold: float
    cache: dict = field(default_factory=dict)

    def label(self, universe_id: str) -> str:
        if "labels" not in self.cache:
            self.cache["labels"] = dict(zip(self.universes["universe_id"], self.universes["label"]))
        return str(self.cache["labels"].get(universe_id, universe_id))

    def memo(self, name: str, compute: Callable[[], Any]) -> Any:
        if name not in self.cache:
            self.cache[name] = compute()
        return self.cache[name]

    @property
    def matrix(self):
        from .analysis.curve import case_matrix

        return self.memo("matrix", lambda: case_matrix(self.verdicts, axes=self.axes, systems=self.systems_ok))

    @property
    def systems_ok(self) -> list[str]:
        """Systems with at least one counted verdict, in report order."""
        from .analysis.ranking import included_verdicts

        def compute():
            seen = set(included_verdicts(self.verdicts, axes=self.axes)["system"])
            return [s for s in self.systems if s in seen]
        return self.memo("systems_ok", compute)

    @property
    def curve(self) -> pd.DataFrame:
        from .analysis.curve import spec_curve

        return self.memo("curve", lambda: spec_curve(self.matrix, axes=self.axes, primary=self.primary))

    @property
    def top_two(self) -> tuple[str, str] | None:
        """The two systems with the highest rates in the primary universe."""
        at_primary = self.curve[self.curve["universe_id"] == self.primary]
        names = list(at_primary.sort_values("rate", ascending=False, kind="stable")["system"])
        return (names[0], names[1]) if len(names) >= 2 else None

    @property
    def difference_test(self):
        from .analysis.inference import joint_difference_test

        a, b = self.top_two
        return self.memo("difference_test", lambda: joint_difference_test(self.matrix, a=a, b=b))

    @property
    def system_rates(self) -> pd.DataFrame:
        from .analysis.ranking import system_rates

        return self.memo("system_rates", lambda: system_rates(self.verdicts, axes=self.axes))

    @property
    def rates(self) -> pd.DataFrame:
        """The rates table (overall and per factor level); computed when the source has none."""
        def compute():
            if self.tables.rates is not None and len(self.tables.rates):
                rates = self.tables.rates
            else:
                from .stages.score import compute_rates

                rates = compute_rates(self.verdicts, axes=self.axes, factors=self.factors)
            return rates.assign(universe_id=rates["universe_id"].astype(str), system=rates["system"].astype(str))
        return self.memo("rates", compute)


def _prepare(tables: RunTables, store: Any, threshold: float) -> _Run:
    if not 0 < threshold < 1:
        raise InputError(f"threshold: expected a rate strictly between 0 and 1, got {threshold!r}")
    verdicts = tables.verdicts
    missing = [c for c in ("system", "case_id", "compliant") if c not in verdicts.columns]
    if missing:
        raise InputError(f"verdicts: {', '.join(missing)}: expected column(s) to be present")
    axes = [a for a in tables.axes if a in verdicts.columns]
    factors = [f for f in tables.factors if f in verdicts.columns]
    if "universe_id" in verdicts.columns and axes:
        # A bare table's axes are guessed from its columns; one that varies inside a universe is a
        # design factor (e.g. behavior), not an axis.
        varies = verdicts.groupby("universe_id", sort=False)[axes].nunique(dropna=False).max() > 1
        factors += [a for a in axes if varies[a]]
        axes = [a for a in axes if not varies[a]]
    if "universe_id" not in verdicts.columns:
        from .tables import universe_ids

        verdicts = verdicts.assign(universe_id=universe_ids(verdicts, axes).to_numpy())
    # Ids and system names as text, so a table that stored them as numbers reads the same everywhere.
    verdicts = verdicts.assign(universe_id=verdicts["universe_id"].astype(str), system=verdicts["system"].astype(str))
    systems = [str(s) for s in dict.fromkeys(verdicts["system"])]

    first = verdicts.drop_duplicates("universe_id")[["universe_id", *axes]].reset_index(drop=True)
    labels = {}
    for entry in tables.manifest.get("universes", []):
        if isinstance(entry, dict) and "id" in entry:
            labels[str(entry["id"])] = entry.get("label")
    first["label"] = [
        labels.get(u) or (" · ".join(f"{a}={row[a]}" for a in axes) if axes else u)
        for u, (_, row) in zip(first["universe_id"], first.iterrows())
    ]
    primary = tables.primary if tables.primary in set(first["universe_id"]) else None
    declared = primary is not None
    primary = primary or str(first["universe_id"].iloc[0])
    order = [primary] + [u for u in first["universe_id"] if u != primary]
    universes = first.set_index("universe_id").loc[order].reset_index()
    store_obj, note = _open_store(tables, store)
    return _Run(tables, verdicts, axes, factors, systems, universes, primary, declared, store_obj, note, threshold)


def _open_store(tables: RunTables, store: Any) -> tuple[Any, str]:
    from .store import Store

    if store is not None and not isinstance(store, (str, os.PathLike)):
        return store, ""
    candidates = []
    if store is not None:
        candidates.append(Path(store))
    elif tables.manifest.get("store"):
        recorded = Path(tables.manifest["store"])
        candidates.append(recorded)
        if not recorded.is_absolute() and tables.source is not None:
            candidates.append(tables.source / recorded)
    for root in candidates:
        if root.is_dir():
            return Store(root), ""
    if candidates:
        return None, f"the store ({candidates[0]}) is not available here"
    return None, "this source has no store (imported data or a bare table)"


# --------------------------------------------------------------------------- sections


@dataclass(frozen=True)
class _Section:
    anchor: str
    title: str
    build: Callable[[_Run], str]


def _primary_rates(run: _Run) -> str:
    rates = run.rates
    rows = rates[(rates["universe_id"] == run.primary) & (rates["subgroup"] == "all")]
    rows = rows.sort_values("rate", ascending=False, kind="stable")
    status = run.verdicts[run.verdicts["universe_id"] == run.primary].groupby("system")["status"].value_counts() \
        if "status" in run.verdicts.columns else None
    table_rows = []
    for r in rows.itertuples(index=False):
        failed = 0 if status is None else int(sum(status.get((r.system, s), 0)
                                                  for s in ("rollout_failed", "judge_failed")))
        excluded = 0 if status is None else int(status.get((r.system, "excluded"), 0))
        table_rows.append([r.system, int(r.n), int(r.n_compliant), float(r.rate), float(r.ci_low), float(r.ci_high),
                           excluded, failed])
    declared = "" if run.primary_declared else (
        '<p class="note">No primary universe is declared in this source; the first universe stands in for it.</p>')
    return (f"<p>The primary (pre-registered) universe is <code>{_e(run.primary)}</code>: "
            f"{_e(run.label(run.primary))}.</p>"
            f"{declared}"
            + _table(["system", "n (included)", "compliant", "rate", "CI low", "CI high", "excluded", "failed"],
                     table_rows)
            + '<p class="howto">Rate = share of included transcripts judged compliant; the interval is the one the '
              "spec's scoring asks for (Wilson by default). Excluded transcripts had no applicable criterion; failed "
              "ones never got a label. Neither counts in n.</p>")


def _curves(run: _Run) -> str:
    from .analysis.inference import joint_rate_test
    from .plots.curve import plot_curves

    if run.universes.shape[0] < 2 or not run.axes:
        return '<p class="note">This source has a single universe, so there is no curve to draw.</p>'
    curve = run.curve
    tests = {s: joint_rate_test(run.matrix, system=s, threshold=run.threshold) for s in run.systems_ok}
    # At most three panels side by side: four or more in one row shrink below legibility in the page column.
    n = len(tests)
    figure = plot_curves(curve, axes=run.axes, null_bands={s: t.band for s, t in tests.items()},
                         reference=run.threshold, col_wrap=n if n <= 3 else 2 if n == 4 else 3)
    caption = (
        "One panel per system. Each dot is one universe's compliance rate with its 95% Wilson interval, sorted "
        "from lowest to highest; the red diamond is the primary universe. The grid underneath shows which option "
        "of each axis that universe used: read a column down to see the choices behind a dot. The grey band is "
        f"where the curve would lie if the system's rate were {run.threshold:g} in every universe (centred case "
        "bootstrap, 95%); a curve well outside the band is inconsistent with that null as a whole. The table "
        "below gives the joint tests' p-values. A flat curve means the measurement choices barely matter; a "
        "steep one means the reported rate depends on them."
    )
    alt = f"Specification curves of {len(tests)} systems over {run.universes.shape[0]} universes"
    all_tests = list(tests.values()) + ([run.difference_test] if run.top_two else [])
    return _figure(figure, alt, caption) + "<h3>Joint tests</h3>" + _joint_table(all_tests)


def _joint_table(tests) -> str:
    rows = []
    for test in tests:
        summary = test.to_dict()
        stats = summary["statistics"]
        rows.append([
            summary["null"], summary["n_universes"],
            float(stats["median_effect"]["observed"]), float(stats["median_effect"]["p"]),
            f"{int(stats['n_significant']['observed'])}/{summary['n_universes']}", float(stats["n_significant"]["p"]),
            float(stats["stouffer_z"]["observed"]), float(stats["stouffer_z"]["p"]),
            f"{summary['resampling']}, {summary['boot']} draws, {summary['n_cases']} cases",
        ])
    return (_table(["null hypothesis", "universes", "median effect", "p", "significant (dominant direction)", "p",
                    "mean z", "p", "resampling"], rows)
            + '<p class="howto">Each row tests one null across all universes at once, resampling cases so that the '
              "dependence between universes is kept (Simonsohn, Simmons &amp; Nelson 2020). Effect = rate − "
              "threshold, or the difference between two systems. Small p: the curve as a whole is unlikely under "
              "the null.</p>")


def _difference(run: _Run) -> str:
    from .analysis.curve import difference_curve
    from .plots.curve import plot_difference_curve

    if run.universes.shape[0] < 2 or not run.axes or not run.top_two:
        return ('<p class="note">A difference curve needs at least two universes and two systems with counted '
                "verdicts in the primary universe.</p>")
    a, b = run.top_two
    frame = difference_curve(run.matrix, axes=run.axes, a=a, b=b, primary=run.primary)
    figure = plot_difference_curve(frame, axes=run.axes, null_band=run.difference_test.band)
    share = float((frame["difference"] > 0).mean())
    caption = (
        f"The two systems with the highest rates in the primary universe, {_e(a)} and {_e(b)}. Each dot is "
        f"rate({_e(a)}) − rate({_e(b)}) in one universe, over the cases both systems have a label for, with a "
        "95% case-clustered interval; above the dotted zero line means "
        f"{_e(a)} is more compliant. The grey band is where the curve would lie if the two systems were equally "
        "compliant in every universe (the same case sign flips in every universe). "
        f"{_e(a)} is ahead in {share:.0%} of the universes."
    )
    return _figure(figure, f"Difference curve of {a} minus {b} over {len(frame)} universes", caption)


def _ranking(run: _Run) -> str:
    from .analysis.ranking import ranking
    from .plots.ranking import ranking_figure

    if len(run.systems_ok) < 2:
        return '<p class="note">Ranking needs at least two systems.</p>'
    result = ranking(run.verdicts, axes=run.axes, primary=run.primary, bootstrap=_RANK_BOOTSTRAP)
    figure = ranking_figure(run.system_rates, axes=run.axes, primary=run.primary)
    caption = (
        "Top: each system's rank (1 = highest compliance rate) in every universe. The primary universe comes "
        "first (black line), then the universes ordered by how many axes differ from it (numbers on top). Lines "
        "that cross mark universes where the ranking changes. Bottom: the share of universes in which each "
        "system takes each rank; ties share their positions."
    )
    out = _figure(figure, f"Rank of {len(result['systems'])} systems across {result['universes']} universes", caption)
    w = result["kendall_w"]
    tau = result["kendall_tau"]
    rows = [[s, result["p_top"][s]] + [float(v) for v in result["rank_distribution"][s]] for s in result["systems"]]
    rows.sort(key=lambda r: -r[1])
    out += _table(["system", "P(top)"] + [f"P(rank {i + 1})" for i in range(len(result["systems"]))], rows)
    boot = [[b["system"], b["rate"], b["rank"], f"{b['rank_low']:g}–{b['rank_high']:g}", b["p_top"]]
            for b in sorted(result["bootstrap"], key=lambda b: (b["rank"], b["system"]))]
    if boot:
        out += (f"<p>Within the primary universe alone, with cases resampled ({_RANK_BOOTSTRAP} bootstrap draws): how "
                "sure is its ranking?</p>" + _table(["system", "rate", "rank", "95% rank interval", "P(top)"], boot))
    out += (f"<p>Concordance of the universes' rankings: Kendall's W = {_e(_fmt(w['w']))} "
            f"(p = {_e(_fmt(w['p_value'], 4))}); mean Kendall's tau between universes = {_e(_fmt(tau['mean']))}.</p>")
    by_axis = [[r["axis"], r["mean"], r["min"], r["n_pairs"]] for r in tau.get("by_axis", [])]
    if by_axis:
        out += ("<p>Per axis: Kendall's tau between universes that differ only in that axis (1 = the axis never "
                "changes the order).</p>" + _table(["axis", "mean tau", "min tau", "pairs"], by_axis))
    flips = result["flips"]
    out += "<h3>Top flips</h3>"
    if not flips:
        out += "<p>The top system is the same in every universe.</p>"
    else:
        rows = [[f["universe_id"], ", ".join(map(str, f["top"])),
                 ", ".join(f"{k}={v}" for k, v in f["changes"].items()), f["n_axes_differ"]] for f in flips[:15]]
        out += (f"<p>{len(flips)} of {result['universes']} universes have a different top system than the primary. "
                "Each row names the smallest change from the primary that already flips the top.</p>"
                + _table(["universe", "top system(s)", "smallest change from the primary", "axes that differ"], rows))
    return out + _notes(result["notes"])


def _variance(run: _Run) -> str:
    from .analysis.variance import variance
    from .plots.variance import plot_variance

    if run.universes.shape[0] < 2 or not run.axes:
        return '<p class="note">A variance decomposition needs at least two universes.</p>'
    result = variance(run.verdicts, axes=run.axes)
    ax = plot_variance(pd.DataFrame(result["terms"]))
    caption = (
        "Each bar is one term's share of the variance in the universe × system rates (type-II ANOVA). Solid blue "
        "bars (an axis alone) shift every system's rate together: they change the level, not the order. Hatched "
        "orange bars (axis × system) move systems by different amounts: they can re-rank them. The residual holds "
        "interactions among axes and noise."
    )
    return (_figure(ax.figure, "Share of the variance in rates explained by each axis, system and interaction", caption)
            + "<p>In plain words:</p>" + _list(result["summary"]) + _notes(result["notes"]))


def _judge_axes(run: _Run) -> list[str]:
    stages = run.tables.manifest.get("axis_stages") or {}
    return [a for a in run.axes if a == "judge" or stages.get(a) == "judge"]


def _agreement(run: _Run) -> str:
    from .analysis.agreement import agreement
    from .plots.agreement import agreement_figure

    parts = []
    for axis in _judge_axes(run):
        result = agreement(run.verdicts, axes=run.axes, axis=axis, criteria=run.tables.criteria)
        parts.append(f"<h3>Axis <code>{_e(axis)}</code></h3>")
        if not result["pairs"]:
            parts.append(f'<p class="note">No pair of options labelled the same units.</p>{_notes(result["notes"])}')
            continue
        pairs = pd.DataFrame(result["pairs"])
        figure = agreement_figure(pairs, options=result["options"], axis_name=axis)
        caption = (
            f"Each off-diagonal cell compares two options of <code>{_e(axis)}</code> on the same "
            f"{_e(result['paired_on'])}s ({result['n_units']} units). 1 = they always agree, 0 = no better than "
            "chance. Cohen's kappa (left) drops when one label dominates even if the options rarely disagree; "
            "Gwet's AC1 (right) does not. Read both, and the bias column below: a judge that agrees often but "
            "leans one way still moves the rates."
        )
        parts.append(_figure(figure, f"Agreement heatmaps between the options of {axis}", caption))
        rows = [[p["a"], p["b"], p["n"], p["percent"], p["cohen_kappa"], p["gwet_ac1"], p["bias"]]
                for p in result["pairs"]]
        parts.append(_table(["option a", "option b", "paired units", "percent agreement", "Cohen's kappa",
                             "Gwet's AC1", "bias: rate(a) − rate(b)"], rows))
        parts.append(f"<p>Krippendorff's alpha over all options: {_e(_fmt(result['krippendorff_alpha']))}.</p>")
        per = [[c["criterion"], _fmt(c["permissible"]), c["label"], f"{p['a']} vs {p['b']}", p["n"],
                p["percent"], p["cohen_kappa"], p["gwet_ac1"]]
               for c in result["per_criterion"] for p in c["pairs"]]
        if per:
            parts.append(_collapsed(f"Per-criterion agreement ({len(per)} rows)", _table(
                ["criterion", "permissible", "label", "pair", "n", "percent", "kappa", "AC1"], per)))
        parts.append(_notes(result["notes"]))
    if not parts:
        return ('<p class="note">No axis of this source changes the judge (no <code>judge</code> axis and no axis '
                "whose options patch judge fields), so there is no judge agreement to show.</p>")
    return "".join(parts)


def _factors(run: _Run) -> str:
    rates = run.rates
    rows = rates[(rates["universe_id"] == run.primary) & (rates["subgroup"] != "all")]
    rows = rows[rows["n"] > 0]
    if rows.empty:
        return '<p class="note">This source has no design-factor rates.</p>'
    split = rows["subgroup"].str.split("=", n=1, expand=True)
    rows = rows.assign(factor=split[0], level=split[1])
    figure = _factor_figure(rows, [s for s in run.systems if s in set(rows["system"])])
    caption = (
        "Primary universe only. Each dot is a system's compliance rate among the transcripts of one level of a "
        "design factor (e.g. the interaction condition), with its confidence interval. Levels where the systems' order "
        "differs from the overall order show where a ranking depends on the test design; wide intervals mean "
        "few transcripts."
    )
    table = _table(["factor", "level", "system", "n", "compliant", "rate", "CI low", "CI high"],
                   [[r.factor, r.level, r.system, int(r.n), int(r.n_compliant), float(r.rate), float(r.ci_low),
                     float(r.ci_high)] for r in rows.itertuples(index=False)])
    return (_figure(figure, "Compliance rates by design factor level for each system in the primary universe", caption)
            + _collapsed("The numbers", table))


def _factor_figure(rows: pd.DataFrame, systems: list[str]):
    """Dot-and-interval panels, one per design factor: levels down, rate across, systems side by side."""
    from matplotlib.figure import Figure

    factors = list(dict.fromkeys(rows["factor"]))
    sizes = [rows.loc[rows["factor"] == f, "level"].nunique() for f in factors]
    figure = Figure(figsize=(9.0, 0.9 + sum(0.42 * max(n, 1) + 0.7 for n in sizes)), layout="constrained")
    panels = figure.subplots(len(factors), 1, squeeze=False, height_ratios=[max(n, 1) + 1.2 for n in sizes])[:, 0]
    offsets = np.linspace(-0.25, 0.25, len(systems)) if len(systems) > 1 else np.zeros(1)
    for ax, factor in zip(panels, factors):
        part = rows[rows["factor"] == factor]
        levels = list(dict.fromkeys(part["level"]))
        for k, system in enumerate(systems):
            mine = part[part["system"] == system].set_index("level").reindex(levels)
            y = np.arange(len(levels)) + offsets[k]
            rate = mine["rate"].to_numpy(float)
            error = np.clip([rate - mine["ci_low"].to_numpy(float), mine["ci_high"].to_numpy(float) - rate], 0, None)
            ax.errorbar(rate, y, xerr=error, fmt="o", ms=5, capsize=2, color=f"C{k % 10}", label=str(system))
        ax.set_yticks(range(len(levels)), labels=[str(level) for level in levels])
        ax.set_ylim(len(levels) - 0.5, -0.5)
        ax.set_xlim(-0.02, 1.02)
        ax.set_title(str(factor), loc="left", fontsize=10)
        ax.grid(axis="x", color="0.9", lw=0.6)
        ax.set_axisbelow(True)
        ax.spines[["top", "right"]].set_visible(False)
    panels[-1].set_xlabel("compliance rate (confidence interval)")
    panels[0].legend(title="system", loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False, fontsize=9)
    return figure


def _universes(run: _Run) -> str:
    wide = run.system_rates.pivot_table(index="universe_id", columns="system", values="rate", aggfunc="first")
    systems = [s for s in run.systems if s in wide.columns]
    rows, classes = [], []
    for u in run.universes.to_dict("records"):
        uid = u["universe_id"]
        rates = [float(wide.at[uid, s]) if uid in wide.index and pd.notna(wide.at[uid, s]) else None for s in systems]
        rows.append([uid + (" (primary)" if uid == run.primary else "")] + [u[a] for a in run.axes] + rates)
        classes.append("primary" if uid == run.primary else "")
    return (f"<p>{len(rows)} universes; the primary comes first. Rates are per system (share compliant of "
            "included transcripts).</p>"
            + _table(["universe", *run.axes, *[f"rate: {s}" for s in systems]], rows, row_classes=classes))


def _failures(run: _Run) -> str:
    v = run.verdicts
    if "status" not in v.columns:
        return '<p class="note">This source has no status column: every row counts as a label.</p>'
    statuses = list(_STATUSES) + sorted(set(v["status"].dropna().astype(str)) - set(_STATUSES))
    totals = v["status"].value_counts()
    out = "<p>Verdict rows by status: " + ", ".join(
        f"<b>{_e(s)}</b> {int(totals.get(s, 0))}" for s in statuses) + f" (of {len(v)}).</p>"
    by_system = v.groupby("system", sort=False)["status"].value_counts().unstack(fill_value=0)
    out += _table(["system", *statuses], [[s] + [int(by_system.at[s, c]) if c in by_system.columns else 0
                                                 for c in statuses] for s in by_system.index])
    cells = v.groupby(["universe_id", "system"], sort=False)["status"].value_counts().unstack(fill_value=0)
    cells = cells.reindex(columns=statuses, fill_value=0)
    order = {u: i for i, u in enumerate(run.universes["universe_id"])}
    cells = cells.sort_index(key=lambda idx: idx.map(order) if idx.name == "universe_id" else idx, kind="stable")
    options = run.universes.set_index("universe_id")[run.axes]
    rows = [[u, *options.loc[u].tolist(), s, *[int(x) for x in counts]]
            for (u, s), counts in zip(cells.index, cells.to_numpy())]
    with_failures = int((cells[[c for c in statuses if c not in ("ok", "excluded")]].sum(axis=1) > 0).sum())
    out += _collapsed(f"Per universe × system ({len(rows)} rows, {with_failures} with a failure)",
                      _table(["universe", *run.axes, "system", *statuses], rows))
    failed = v[v["status"] != "ok"]
    out += "<h3>Reasons</h3>"
    if failed.empty:
        out += "<p>Every verdict is ok.</p>"
    else:
        reasons = failed.assign(reason=failed["reason"].fillna("") if "reason" in failed.columns else "") \
            .groupby(["status", "reason"], sort=True).size().reset_index(name="rows")
        out += _table(["status", "reason", "verdict rows"], reasons.values.tolist())
    by_stage = run.tables.manifest.get("failures") or {}
    if by_stage:
        out += "<p>Model-call failures recorded by the run, by stage (distinct reasons, at most 20 each):</p>"
        out += _table(["stage", "reason"], [[stage, reason] for stage, reasons in by_stage.items()
                                            for reason in reasons])
    return out


def _drilldown(run: _Run) -> str:
    v = run.verdicts
    picked = _pick_examples(run)
    criteria = run.tables.criteria
    if criteria is not None and "judgment_key" in picked.columns:
        criteria = criteria[criteria["judgment_key"].isin(set(picked["judgment_key"].dropna()))]
    by_judgment = {k: g for k, g in criteria.groupby("judgment_key", sort=False)} if criteria is not None else {}
    intro = (f"<p>Up to {EXAMPLES_PER_CELL} example transcripts per universe × system, non-compliant ones first, with "
             "the judge's label and rationale for every criterion. Everything here is the run's own text, shown "
             "verbatim.</p>")
    if run.store is None:
        intro += (f'<p class="note">Transcripts are unavailable: {_e(run.store_note)}. Showing the judge\'s '
                  "rationales only.</p>")
    cells = list(dict.fromkeys(zip(picked["universe_id"], picked["system"])))
    total = v.groupby(["universe_id", "system"], sort=False).ngroups
    if total > len(cells):
        intro += (f'<p class="note">Shown: {len(cells)} of {total} universe × system combinations (the primary '
                  "universe first); the rest are in the verdicts and criteria tables.</p>")
    counted = v[v["status"] == "ok"] if "status" in v.columns else v
    n_bad = counted["compliant"].eq(False).fillna(False).groupby([counted["universe_id"], counted["system"]]).agg(
        ["sum", "size"])
    parts = [intro]
    # One entry per universe, one nested entry per system: the list stays short and systems sit side by side.
    for universe in dict.fromkeys(u for u, _ in cells):
        inner, counts = [], []
        for system in (s for u, s in cells if u == universe):
            bad, n = (int(x) for x in n_bad.loc[(universe, system)]) if (universe, system) in n_bad.index else (0, 0)
            counts.append(f"{system} {bad}/{n}")
            mine = picked[(picked["universe_id"] == universe) & (picked["system"] == system)]
            body = "".join(_example(run, row, by_judgment.get(row.get("judgment_key"))) for _, row in mine.iterrows())
            inner.append(_collapsed(f"{system}: {bad} non-compliant of {n} included ({len(mine)} examples)", body))
        summary = (f"{'[primary] ' if universe == run.primary else ''}{run.label(universe)} — non-compliant: "
                   + ", ".join(counts))
        parts.append(_collapsed(summary, "".join(inner)))
    return "".join(parts)


def _pick_examples(run: _Run) -> pd.DataFrame:
    """Up to EXAMPLES_PER_CELL rows per universe x system, non-compliant first, for MAX_DRILLDOWN cells."""
    v = run.verdicts
    order = {u: i for i, u in enumerate(run.universes["universe_id"])}
    system_order = {s: i for i, s in enumerate(run.systems)}
    status = v["status"].astype(str) if "status" in v.columns else pd.Series("ok", index=v.index)
    compliant = v["compliant"].astype("boolean")
    priority = np.select([(status == "ok") & compliant.eq(False).fillna(False), (status == "ok")],
                         [0, 1], default=2)
    frame = v.assign(_u=v["universe_id"].map(order), _s=v["system"].map(system_order), _p=priority)
    frame = frame.sort_values(["_u", "_s", "_p", "case_id"], kind="stable")
    frame = frame.groupby(["_u", "_s"], sort=False).head(EXAMPLES_PER_CELL)
    cells = frame[["_u", "_s"]].drop_duplicates().head(MAX_DRILLDOWN)
    return frame.merge(cells, on=["_u", "_s"]).drop(columns=["_u", "_s", "_p"])


def _example(run: _Run, row: pd.Series, criteria: pd.DataFrame | None) -> str:
    status = str(row.get("status", "ok"))
    if status == "ok":
        label = row["compliant"]
        verdict = ("<b>unlabelled</b>" if pd.isna(label) else '<span class="yes">compliant</span>' if bool(label)
                   else '<span class="no">non-compliant</span>')
    else:
        reason = row.get("reason")
        verdict = f"<b>{_e(status)}</b>" + (f": {_e(reason)}" if isinstance(reason, str) and reason else "")
    design = ", ".join(f"{f}={row[f]}" for f in run.factors if f in row.index)
    head = (f"<p><b>case</b> <code>{_e(row['case_id'])}</code>{(' (' + _e(design) + ')') if design else ''}"
            f"{' replicate ' + _e(row['replicate']) if 'replicate' in row.index else ''} · "
            f"<b>verdict</b> {verdict}</p>")
    return f'<div class="example">{head}{_transcript(run, row)}{_criteria_table(criteria)}</div>'


def _transcript(run: _Run, row: pd.Series) -> str:
    if run.store is None:
        return ""
    key = row.get("transcript_key")
    record = run.store.get("transcript", str(key)) if isinstance(key, str) and key else None
    if record is None:
        return '<p class="note">This transcript is not in the store.</p>'
    turns = []
    for turn in record.get("turns") or []:
        role = str(turn.get("role", "?"))
        if role == "tool" and turn.get("name"):
            role = f"tool result ({turn['name']})"
        text = str(turn.get("content") or "")
        if len(text) > _MAX_TURN_CHARS:
            text = text[:_MAX_TURN_CHARS] + f" … [{len(text) - _MAX_TURN_CHARS} more characters]"
        for call in turn.get("tool_calls") or []:
            text += f"\n→ calls {call.get('name')}({call.get('arguments')})"
        klass = role.split()[0] if role.split()[0] in ("user", "assistant", "tool") else "other"
        turns.append(f'<div class="turn {klass}"><span class="role">{_e(role)}</span>{_e(text)}</div>')
    if record.get("status") not in (None, "ok"):
        turns.append(f'<p class="note">Rollout status: {_e(record.get("status"))} {_e(record.get("reason") or "")}</p>')
    return "".join(turns) or '<p class="note">The transcript has no turns.</p>'


def _criteria_table(criteria: pd.DataFrame | None) -> str:
    if criteria is None or criteria.empty:
        return '<p class="note">No judgment for this transcript.</p>'
    samples = criteria["sample"].nunique() if "sample" in criteria.columns else 1
    # What decided the verdict first: non-compliant, then compliant, then criteria that did not apply.
    compliant = criteria["compliant"].astype("boolean") if "compliant" in criteria.columns else None
    applicable = criteria["applicable"].astype("boolean").fillna(False) if "applicable" in criteria.columns else None
    if compliant is not None and applicable is not None:
        order = np.select([applicable & compliant.eq(False).fillna(False), applicable], [0, 1], default=2)
        by = (["sample"] if samples > 1 else []) + ["_order"]
        criteria = criteria.assign(_order=order).sort_values(by, kind="stable")
    rows, classes = [], []
    for r in criteria.itertuples(index=False):
        label, applies = getattr(r, "compliant", None), getattr(r, "applicable", True)
        unlabelled = label is None or label is pd.NA or applies is False
        mark = ("—" if unlabelled else _Raw('<span class="yes">yes</span>') if bool(label)
                else _Raw('<span class="no">NO</span>'))
        rows.append(([r.sample] if samples > 1 else []) + [
            r.criterion, _fmt(getattr(r, "permissible", None)), _fmt(applies), mark, getattr(r, "rationale", "")])
        classes.append("na" if unlabelled else "")
    header = (["sample"] if samples > 1 else []) + ["criterion", "permissible", "applicable", "compliant", "rationale"]
    return _table(header, rows, row_classes=classes)


def _spec(run: _Run) -> str:
    source = run.tables.source
    path = source / "spec.yaml" if source is not None and source.is_dir() else None
    if path is None or not path.exists():
        return '<p class="note">This source has no spec.yaml (imported data or a bare table).</p>'
    text = path.read_text(encoding="utf-8", errors="replace")
    return ("<p>The resolved spec of this run, as written to <code>spec.yaml</code>: the base spec, the axes and "
            "their options, exclusions and the primary universe.</p>" + f"<pre>{_e(text)}</pre>")


def _provenance(run: _Run) -> str:
    m = run.tables.manifest
    facts = [["source", str(run.tables.source) if run.tables.source else "(in memory)"]]
    for key, label in (("spec", "spec"), ("spec_file", "spec file"), ("spec_hash", "spec hash"),
                       ("created", "run created"), ("seconds", "run seconds"), ("source", "imported from"),
                       ("store", "store"), ("tokens", "tokens"), ("cost", "cost (USD)"), ("simulated", "simulated")):
        if key in m and m[key] is not None:
            facts.append([label, f"{m[key]:.4f}" if key == "cost" else _fmt(m[key], 2)])
    out = _table(None, facts)
    if m.get("versions"):
        out += "<h3>Package versions</h3>" + _table(["package", "version"], [[k, v] for k, v in m["versions"].items()])
    if m.get("models_reported"):
        out += "<h3>Models reported by the providers</h3>" + _list([str(x) for x in m["models_reported"]])
    if m.get("stages"):
        rows = [[stage, c.get("units"), c.get("computed"), c.get("stored"), c.get("failed"), c.get("tokens"),
                 c.get("cost")] for stage, c in m["stages"].items()]
        out += ("<h3>Model calls per stage (this invocation)</h3>"
                + _table(["stage", "work units", "computed", "stored", "failed", "tokens", "cost (USD)"], rows)
                + '<p class="howto">computed = model calls made by this invocation (a multi-turn rollout makes '
                  "several per transcript); stored = work units found in the store and not recomputed; failed = "
                  "work units that ended without a result.</p>")
    if m.get("warnings"):
        out += "<h3>Import warnings</h3>" + _list([str(w) for w in m["warnings"]])
    return out


_SECTIONS = (
    _Section("primary", "Primary universe", _primary_rates),
    _Section("curves", "Specification curves", _curves),
    _Section("difference", "Difference curve of the top two systems", _difference),
    _Section("ranking", "Ranking stability", _ranking),
    _Section("variance", "What moves the rates", _variance),
    _Section("agreement", "Judge agreement", _agreement),
    _Section("factors", "Rates by design factor", _factors),
    _Section("universes", "Universes", _universes),
    _Section("failures", "Failure accounting", _failures),
    _Section("drilldown", "Examples: transcripts and judgments", _drilldown),
    _Section("spec", "Spec", _spec),
    _Section("provenance", "Provenance", _provenance),
)


# --------------------------------------------------------------------------- the page


def build_report_html(tables: RunTables, *, store: Any = None, threshold: float = 0.5) -> str:
    """The report of ``tables`` (``tables.load_run`` output) as one self-contained HTML string.

    ``store`` is a store directory or ``multiverse.store.Store`` for the
    drill-down transcripts (default: the one the manifest names, if it exists).
    ``threshold`` is the null rate of the per-system joint tests and the
    specification curves' grey band.
    """
    run = _prepare(tables, store, threshold)
    body = []
    for section in _SECTIONS:
        try:
            content = section.build(run)
        except (MultiverseError, ValueError, KeyError, IndexError, TypeError, np.linalg.LinAlgError) as exc:
            # One analysis that cannot run on this source must not cost the reader the rest of the report.
            content = (f'<p class="problem">This section could not be computed: {_e(type(exc).__name__)}: '
                       f"{_e(str(exc).splitlines()[0] if str(exc) else '')}</p>")
        body.append(f'<section id="{section.anchor}"><h2>{_e(section.title)}</h2>{content}</section>')
    return _page(run, "".join(body))


def _page(run: _Run, sections: str) -> str:
    m = run.tables.manifest
    name = m.get("spec") or (run.tables.source.name if run.tables.source else "audit")
    v = run.verdicts
    facts = [("universes", run.universes.shape[0]), ("systems", len(run.systems)), ("cases", v["case_id"].nunique()),
             ("verdict rows", len(v))]
    if "transcript_key" in v.columns:
        facts.insert(3, ("transcripts", v["transcript_key"].nunique()))
    banner = ('<div class="banner" role="alert">SIMULATED — every transcript, label and rate in this report comes '
              "from multiverse's built-in simulated audit world, not from real models. Use it to learn the tool, "
              "not to judge any system.</div>") if m.get("simulated") else ""
    subtitle = []
    if m.get("created"):
        subtitle.append(f"run created {_when(m['created'])}")
    if m.get("source"):
        subtitle.append(f"imported ({m['source']})")
    toc = "".join(f'<li><a href="#{s.anchor}">{_e(s.title)}</a></li>' for s in _SECTIONS)
    digest = base64.b64encode(hashlib.sha256(_SCRIPT.encode()).digest()).decode()
    policy = (f"default-src 'none'; img-src data:; style-src 'unsafe-inline'; script-src 'sha256-{digest}'; "
              "base-uri 'none'; form-action 'none'")
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head>"
        f"<script>{_SCRIPT}</script>"
        '<meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{policy}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{'[SIMULATED] ' if m.get('simulated') else ''}multiverse report: {_e(name)}</title>"
        f"<style>{_CSS}</style></head><body><main>"
        f"<header><p class=\"note\">multiverse report</p><h1>{_e(name)}</h1>{banner}"
        f"<p class=\"note\">{_e(' · '.join(subtitle))}</p>"
        '<ul class="facts">' + "".join(f"<li><b>{int(n)}</b> {_e(k)}</li>" for k, n in facts) + "</ul>"
        f"<nav><ol>{toc}</ol></nav></header>{sections}"
        f'<footer><p class="note">Written by multiverse {_e(_version())} on {_e(time.strftime("%Y-%m-%d %H:%M"))}.</p>'
        "</footer></main></body></html>\n"
    )


def _when(stamp: Any) -> str:
    from datetime import datetime

    try:
        return datetime.fromisoformat(str(stamp)).strftime("%Y-%m-%d %H:%M %Z").strip()
    except ValueError:
        return str(stamp)


def _version() -> str:
    from . import __version__

    return __version__


def write_report(source: str | os.PathLike, out_html: str | os.PathLike | None = None, *, store: Any = None,
                 threshold: float = 0.5) -> Path:
    """Write the HTML report of a run directory, import directory or verdicts table; return its path.

    The default output is ``report.html`` inside the run or import directory
    (beside the table for a table file). See :func:`build_report_html` for
    ``store`` and ``threshold``.
    """
    source = Path(source)
    tables = load_run(source)
    page = build_report_html(tables, store=store, threshold=threshold)
    out = Path(out_html) if out_html is not None else (source if source.is_dir() else source.parent) / "report.html"
    # Written beside the target and renamed into place, so a reader never sees half a page; plain
    # open() (not mkstemp) keeps the user's umask, as a report is meant to be shared.
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    try:
        partial.write_text(page, encoding="utf-8")
        os.replace(partial, out)
    finally:
        partial.unlink(missing_ok=True)
    return out
