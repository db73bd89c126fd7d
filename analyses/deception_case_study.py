"""The case study's figures and summary, from one run directory.

Reproduces the figures of the conversational-misrepresentation case study
(specs/deception.yaml with real models, specs/deception-sim.yaml on the
simulated world) and prints a short summary::

    python analyses/deception_case_study.py runs/deception-sim [--figures figures]

Figures (PNG, written to ``--figures``, default ``figures/``):

- ``deception_curves.png``: a specification curve per system, with the null
  band of a joint rate test (by default: where the curve would lie if every
  universe had the primary universe's rate, i.e. sampling noise alone);
- ``deception_agreement.png``: agreement between the judges on the same
  transcripts (Cohen's kappa and Gwet's AC1);
- ``deception_ranking.png``: the systems' rank in every universe (bump chart)
  over the share of universes in which each takes each rank;
- ``deception_variance.png``: the share of the variance in rates due to each
  axis, each axis x system interaction and the systems themselves;
- ``deception_conditions.png``: rates by interaction condition in the primary
  universe and in the universes one axis away from it.

and ``deception_case_study.json`` beside them: the numbers each figure shows
(its titles, labels and annotations, and the analyses' values it draws) and,
under ``quoted``, every number README's case study quotes, written as README
writes it. ``tests/test_case_study.py`` reruns the study and this script and
fails when the committed figures' numbers or README's quotes differ from
what they produce.

The script reads the run with ``multiverse.load_run`` and takes every
analysis and figure from the returned ``Results``; the one figure drawn
here, rates by condition across universes, is specific to this case study. A run
on ``sim/`` models is labelled SIMULATED on every figure.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import sys
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

import multiverse as mv
from multiverse.analysis import universe_ranks
from multiverse.results import AgreementDocument, CurveDocument, RankingDocument, VarianceDocument

__all__ = ["FIGURES", "NUMBERS", "main", "write_figures"]

#: The figure files the script writes, in order.
FIGURES = (
    "deception_curves.png",
    "deception_agreement.png",
    "deception_ranking.png",
    "deception_variance.png",
    "deception_conditions.png",
)
#: The numbers behind the figures and README's text, written beside the figures.
NUMBERS = "deception_case_study.json"

CONDITION = "interaction_condition"
_DPI = 130


# --------------------------------------------------------------------------- labelling


def _label(tables: mv.Results) -> str:
    """The provenance line every figure carries."""
    spec = tables.manifest.spec if tables.manifest is not None else None
    name = spec or (tables.source.name if tables.source else "run")
    if tables.simulated:
        return f"SIMULATED world ({name}): illustrative numbers, not measurements of real models"
    return f"run: {name}"


def _save(figure: Figure, path: Path, label: str, title: str) -> Figure:
    figure.suptitle(f"{title}\n{label}", x=0.01, ha="left", fontsize=11)
    figure.savefig(path, dpi=_DPI)
    return figure


def _texts(figure: Figure) -> list[dict]:
    """What a reader reads on a figure, panel by panel: titles, labels, annotations and cell values.

    Tick labels are left out: their placement is matplotlib's, not the data's.
    """
    panels = [{"panel": "figure", "texts": [t.get_text() for t in figure.texts if t.get_text()]}]  # suptitle too
    for k, ax in enumerate(figure.axes):
        texts = [ax.get_title(loc) for loc in ("left", "center", "right") if ax.get_title(loc)]
        texts += [ax.get_xlabel(), ax.get_ylabel()]
        texts += [t.get_text() for t in ax.texts]
        legend = ax.get_legend()
        if legend is not None:
            texts += [t.get_text() for t in legend.get_texts()]
        texts = [t for t in texts if t]
        if texts:
            panels.append({"panel": k, "texts": texts})
    for legend in figure.legends:
        panels.append({"panel": "legend", "texts": [t.get_text() for t in legend.get_texts()]})
    return panels


def _rounded(value):
    """JSON-ready, floats to 4 decimals: the numbers compare across machines, not their last bits."""
    if isinstance(value, dict):
        return {str(k): _rounded(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_rounded(v) for v in value]
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return None if not np.isfinite(value) else round(float(value), 4)
    return value


# --------------------------------------------------------------------------- universes


def _neighbours(universes: pd.DataFrame, axes: list[str], primary: str,
                order: dict[str, list[str]]) -> list[tuple[str, str]]:
    """The primary and, per axis, the first universe that differs from it in that axis alone.

    ``universes`` has universe_id and the axis columns (as text). Returns
    (universe_id, panel title) pairs, primary first.
    """
    base = universes.set_index("universe_id").loc[primary, axes]
    chosen = [(primary, "primary universe")]
    for axis in axes:
        others = [a for a in axes if a != axis]
        same = (universes[others] == base[others]).all(axis=1) if others else True
        for option in order[axis]:
            if option == base[axis]:
                continue
            hit = universes[same & (universes[axis] == option)]
            if len(hit):
                chosen.append((hit["universe_id"].iloc[0], f"primary, but {axis} = {option}"))
                break
    return chosen


# --------------------------------------------------------------------------- figures


def _curves(tables, threshold, label, path):
    """Specification curves with joint-test null bands; returns the curve summary."""
    # The default null: each system's primary rate holds in every universe,
    # so the band is what sampling noise alone would make of the curve.
    curves = tables.curve(threshold=threshold if threshold is not None else "primary")
    null = (f"rate = {threshold:g} in every universe" if threshold is not None
            else "every universe has the primary universe's rate")
    # The title goes in through the figure, whose layout keeps it clear of the primary's labels.
    title = f"Specification curves: compliance rate of each system in every universe (grey band: {null})"
    figure = curves.figure(title=f"{title}\n{label}")
    figure.savefig(path, dpi=_DPI)
    return curves, figure


def _agreement(tables, label, path):
    try:
        axis = tables.judge_axis()
    except mv.InputError:  # no judge axis: nothing to compare
        return None, None
    result = tables.agreement(axis)
    figure = _save(result.figure(), path, label,
                   f"Agreement between the options of {axis!r} on the same {result.document.paired_on}s "
                   f"({result.document.n_units} units)")
    return result.document, figure


def _ranking(tables, label, path):
    result = tables.ranking(boot=0)
    figure = _save(result.figure(), path, label, "Rank stability: the systems' ranks across universes")
    return tables.system_rates(), result.document, figure


def _variance(tables, label, path):
    result = tables.variance()
    figure = _save(result.figure(), path, label, "Variance decomposition of the universe x system rates")
    return result.document, figure


def _conditions(tables, label, path):
    """Rates by interaction condition: the primary and its one-axis neighbours, one panel each."""
    rates, axes, primary = tables.rates, tables.axes, tables.primary
    if rates is None or CONDITION not in tables.factors:
        return None, None, None
    prefix = f"{CONDITION}="
    rows = rates[rates["subgroup"].astype(str).str.startswith(prefix) & (rates["n"] > 0)].copy()
    if rows.empty:
        return None, None, None
    rows["universe_id"] = rows["universe_id"].astype(str)
    rows["condition"] = rows["subgroup"].str.slice(len(prefix))
    universes = rows.drop_duplicates("universe_id")[["universe_id", *axes]].astype(str)
    order = {axis: [str(o) for o in options] for axis, options in tables.options.items()}
    panels = _neighbours(universes, axes, primary, order)
    conditions = list(dict.fromkeys(rows["condition"]))
    systems = list(dict.fromkeys(rows["system"]))
    ncols = min(3, len(panels))
    nrows = -(-len(panels) // ncols)
    figure = Figure(figsize=(4.3 * ncols + 0.6, 3.3 * nrows + 1.4), layout="constrained")
    grid = figure.subplots(nrows, ncols, squeeze=False, sharey=True)
    offsets = np.linspace(-0.27, 0.27, len(systems)) if len(systems) > 1 else np.zeros(1)
    x = np.arange(len(conditions))
    for k, ax in enumerate(grid.ravel()):
        if k >= len(panels):
            ax.set_visible(False)
            continue
        universe, title = panels[k]
        part = rows[rows["universe_id"] == universe]
        for s, system in enumerate(systems):
            mine = part[part["system"] == system].set_index("condition").reindex(conditions)
            rate = mine["rate"].to_numpy(float)
            error = np.clip([rate - mine["ci_low"].to_numpy(float), mine["ci_high"].to_numpy(float) - rate],
                            0, None)
            ax.errorbar(x + offsets[s], rate, yerr=error, fmt="o", ms=4.5, capsize=2, elinewidth=1,
                        color=f"C{s % 10}", label=str(system))
        ax.set_title(title, loc="left", fontsize=10,
                     fontweight="bold" if universe == primary else "normal")
        ax.set_xticks(x, labels=[c.replace("_", "\n") for c in conditions], fontsize=8)
        ax.set_ylim(-0.02, 1.02)
        ax.grid(axis="y", color="0.9", lw=0.6)
        ax.set_axisbelow(True)
        ax.spines[["top", "right"]].set_visible(False)
        if k % ncols == 0:
            ax.set_ylabel("compliance rate (95% CI)")
    handles, names = grid[0, 0].get_legend_handles_labels()
    figure.legend(handles, names, title="system", loc="outside lower center", ncol=len(names),
                  fontsize=9, frameon=False)
    _save(figure, path, label,
          "Rates by interaction condition: the primary universe and the universes one axis away from it")
    return panels, rows[rows["universe_id"].isin([u for u, _ in panels])], figure


# --------------------------------------------------------------------------- summary


def _stability(rates, ranked: RankingDocument) -> tuple[str, str, float, float]:
    """The primary's order ("a > b > ..."), its top system(s), and the shares of universes keeping each."""
    ranks = universe_ranks(rates).pivot_table(index="universe_id", columns="system", values="rank")
    order = ranks.loc[ranked.primary].sort_values(kind="stable")
    same_top = 1.0 - len(ranked.flips) / ranked.universes
    same_order = float((ranks == ranks.loc[ranked.primary]).all(axis=1).mean())
    top = ", ".join(str(s) for s in order.index[order == order.min()])
    return " > ".join(str(s) for s in order.index), top, same_top, same_order


def _summary(tables, curves: CurveDocument, rates, ranked: RankingDocument,
             decomposition: VarianceDocument) -> list[str]:
    axes = tables.axes
    n_universes = rates["universe_id"].nunique()
    systems = ranked.systems
    lines = [f"{_label(tables)}: {n_universes} universes x {len(systems)} systems, axes {', '.join(axes)}"]
    lines.append("Rates across universes (min..max, median; primary rate; joint test of the curve against "
                 "the band):")
    tests = {t.systems[0]: t for t in curves.tests}
    for system, entry in curves.systems.items():
        rate = entry.rate
        at = entry.primary
        primary = f"primary {at.rate:.2f} [{at.ci_low:.2f}, {at.ci_high:.2f}]" if at else "no primary"
        test = tests.get(system)
        joint = ""
        if test:
            sig = test.statistics["n_significant"]
            side = "above" if test.direction == "greater" else "below"
            joint = (f"; {sig.observed}/{test.n_universes} universes significantly {side} "
                     f"{test.threshold:.2f}, joint p = {sig.p:.3f}")
        lines.append(f"  {system}: {rate.min:.2f}..{rate.max:.2f} (median {rate.median:.2f}); "
                     f"{primary}{joint}")
    by_axis = decomposition.by_axis
    if by_axis:
        top = by_axis[0]
        lines.append(f"Most variance: {top.axis} explains {top.total:.1%} of the variance in rates "
                     f"(shift of all rates {top.main:.1%}, {top.axis} x system {top.interaction:.1%}); "
                     "then " + ", ".join(f"{r.axis} {r.total:.1%}" for r in by_axis[1:]))
        lines += [f"  note: {note}" for note in decomposition.notes]
    shown, top, same_top, same_order = _stability(rates, ranked)
    lines.append(f"Ranking: primary order {shown}; same top system ({top}) in {same_top:.0%} of universes; "
                 f"same full order in {same_order:.0%}; Kendall's W = {ranked.kendall_w.w:.2f}")
    return lines


# --------------------------------------------------------------------------- numbers


def _pct(x: float, digits: int = 1) -> str:
    return f"{100 * x:.{digits}f}%"


def _span(values, digits: int = 2) -> str:
    """"0.41–0.53" as README writes a range (one number when both ends round alike)."""
    low, high = f"{min(values):.{digits}f}", f"{max(values):.{digits}f}"
    return low if low == high else f"{low}\u2013{high}"


def _out_of(k: int, n: int, things: str) -> str:
    return f"every {things}" if k == n else "no " + things if k == 0 else f"{k} of {n} {things}s"


def _quoted_curves(curves: CurveDocument, figure: Figure) -> dict:
    tests = [t for t in curves.tests if t.kind == "rate"]
    # the statistics' names are the keys of a mapping the document declares (JointTest's STATISTICS)
    stats = {name: [t.statistics[name] for t in tests] for name in ("n_significant", "median_effect", "stouffer_z")}
    labels = {}
    for ax in figure.axes:  # the primary's label, as each system's panel prints it
        for text in ax.texts:
            if text.get_text().startswith("primary ") and ax.get_title("left"):
                # "primary 0.64 [0.55, 0.73]" then the position, on a second line or after a middle dot
                labels[ax.get_title("left")] = re.split(r"\n| \u00b7 ", text.get_text(), maxsplit=1)[-1]
    systems = curves.systems.values()
    return {
        "rate_min": _span([s.rate.min for s in systems]),
        "rate_max": _span([s.rate.max for s in systems]),
        "primary_positions": labels,
        "null_draws": f"{tests[0].boot:,}" if tests else None,
        "count_rejects": _out_of(sum(s.p < 0.05 for s in stats["n_significant"]), len(tests), "system"),
        "count_p": _span([s.p for s in stats["n_significant"]], 3),
        "count_p_holm_max": f"{max(s.p_holm for s in stats['n_significant']):.3f}" if tests else None,
        "median_rejects": _out_of(sum(s.p < 0.05 for s in stats["median_effect"]), len(tests), "system"),
        "stouffer_rejects": _out_of(sum(s.p < 0.05 for s in stats["stouffer_z"]), len(tests), "system"),
    }


def _quoted_agreement(judged: AgreementDocument) -> dict:
    pairs = judged.pairs
    rate = {}  # each option's rate relative to the others: bias = rate(a) - rate(b)
    for p in pairs:
        rate.setdefault(p.a, []).append(p.bias)
        rate.setdefault(p.b, []).append(-p.bias)
    widest = max(pairs, key=lambda p: abs(p.bias))
    higher, lower = (widest.a, widest.b) if widest.bias > 0 else (widest.b, widest.a)
    return {"kappa": _span([p.cohen_kappa for p in pairs]),
            "harshest": min(rate, key=lambda o: float(np.mean(rate[o]))),
            "widest_gap": {"higher": higher, "lower": lower, "by": f"{abs(widest.bias):.2f}"}}


def _quoted_variance(decomposition: VarianceDocument) -> dict:
    terms = decomposition.terms
    interactions = [t for t in terms if t.kind == "interaction"]
    system = next((t for t in terms if t.kind == "system"), None)
    reorders = max(interactions, key=lambda t: t.share) if interactions else None
    return {
        "noise_floor": _pct(decomposition.noise.noise_floor),
        "by_axis": ", ".join(f"{r.axis} {_pct(r.total)}" for r in decomposition.by_axis),
        "reorders_most": f"{reorders.term.split(':')[0]} \u00d7 system {_pct(reorders.share)}" if reorders else None,
        "system_share": _pct(system.share) if system else None,
        "system_beyond_noise": None if system is None or system.low is None
        else "not distinguishable from noise" if system.low <= 0 else "beyond noise",
        "shares_sum": _pct(sum(t.share for t in terms)),
    }


def _quoted_conditions(panels, rows) -> dict:
    """Per one-axis neighbour and system: in how many conditions its rate is below / above the primary's."""
    rate = rows.set_index(["universe_id", "system", "condition"])["rate"].sort_index()
    primary = panels[0][0]
    moved: dict = {}
    for universe, title in panels[1:]:
        for system in dict.fromkeys(rows["system"]):
            there, here = rate.loc[universe, system], rate.loc[primary, system]
            common = there.index.intersection(here.index)
            moved.setdefault(title, {})[str(system)] = {
                "lower": int((there[common] < here[common]).sum()),
                "higher": int((there[common] > here[common]).sum()), "of": len(common)}
    weakest = {str(system): str(part.idxmin()) for system, part in rate.loc[primary].groupby(level=0)
               for part in [part.droplevel(0)]}
    return {"one_axis_away": moved, "weakest_condition": weakest}


def _numbers(tables, found: dict, figures: dict[str, Figure]) -> dict:
    """The JSON written beside the figures: what each figure shows and what README quotes."""
    curves, judged, ranked, decomposition = found["curves"], found["agreement"], found["ranking"], found["variance"]
    shown, top, same_top, same_order = _stability(found["rates"], ranked)
    quoted: dict = {"curves": _quoted_curves(curves.document, figures["curves"])}
    if judged is not None:
        quoted["agreement"] = _quoted_agreement(judged)
    quoted["ranking"] = {"primary_top": top, "same_top": _pct(same_top, 0), "primary_order": shown,
                         "same_order": _pct(same_order, 0), "kendall_w": f"{ranked.kendall_w.w:.2f}"}
    quoted["variance"] = _quoted_variance(decomposition)
    if found["panels"] is not None:
        quoted["conditions"] = _quoted_conditions(found["panels"], found["condition_rows"])
    manifest = tables.manifest
    stages = manifest.stages if manifest is not None else {}
    drawn = curves.frame[[c for c in ("system", "universe_id", "rate", "ci_low", "ci_high") if c in curves.frame]]
    values = {
        # the models' values as their fields hold them (exclude_unset: what the analysis wrote, nothing filled in)
        "curves": {"systems": {name: s.model_dump(exclude_unset=True) for name, s in curves.document.systems.items()},
                   "rates": drawn.sort_values(["system", "rate", "universe_id"]).to_dict("list")},
        "agreement": judged and {"pairs": [p.model_dump(include={"a", "b", "n", "cohen_kappa", "gwet_ac1", "bias"})
                                           for p in judged.pairs]},
        "ranking": {"p_top": ranked.p_top, "rank_distribution": ranked.rank_distribution},
        "variance": {"terms": [t.model_dump(include={"term", "share", "noise", "low", "high"})
                               for t in decomposition.terms]},
        "conditions": found["condition_rows"] is not None and found["condition_rows"][
            ["universe_id", "system", "condition", "rate", "ci_low", "ci_high"]].to_dict("list"),
    }
    return _rounded({
        "run": manifest.spec if manifest is not None else None, "simulated": tables.simulated,
        "universes": int(tables.verdicts["universe_id"].nunique()),
        "calls": f"{sum(s.calls for s in stages.values()):,}" if stages else None,
        "quoted": quoted, "values": values,
        "figures": {name: _texts(figure) for name, figure in figures.items()},
    })


# --------------------------------------------------------------------------- entry point


def write_figures(run_dir: str | os.PathLike, figures: str | os.PathLike = "figures", *,
                  threshold: float | None = None) -> list[str]:
    """Write every figure of the case study from ``run_dir`` into ``figures``; return the summary lines."""
    tables = mv.load_run(run_dir)
    if not tables.axes:
        raise mv.MultiverseError(f"{run_dir}: expected a run with at least one axis")
    if tables.primary is None:  # every figure compares with a primary: without one, the first universe stands in
        tables = dataclasses.replace(tables, primary=str(tables.verdicts["universe_id"].iloc[0]))
    out = Path(figures)
    out.mkdir(parents=True, exist_ok=True)
    label = _label(tables)
    names = dict(zip(("curves", "agreement", "ranking", "variance", "conditions"), FIGURES))
    figures: dict[str, Figure] = {}
    found: dict = {}
    found["curves"], figures["curves"] = _curves(tables, threshold, label, out / names["curves"])
    judged, figures["agreement"] = _agreement(tables, label, out / names["agreement"])
    rates, ranked, figures["ranking"] = _ranking(tables, label, out / names["ranking"])
    decomposition, figures["variance"] = _variance(tables, label, out / names["variance"])
    panels, found["condition_rows"], figures["conditions"] = _conditions(tables, label, out / names["conditions"])
    found.update(agreement=judged, rates=rates, ranking=ranked, variance=decomposition, panels=panels)
    numbers = _numbers(tables, found, {k: f for k, f in figures.items() if f is not None})
    (out / NUMBERS).write_text(json.dumps(numbers, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    lines = _summary(tables, found["curves"].document, rates, ranked, decomposition)
    if judged is not None:
        kappas = ", ".join(f"{p.a}/{p.b} {p.cohen_kappa:.2f}" for p in judged.pairs)
        lines.append(f"Judge agreement (Cohen's kappa): {kappas}; Krippendorff's alpha "
                     f"{judged.krippendorff_alpha:.2f}")
    written = [n for key, n in names.items() if (key != "agreement" or judged is not None)
               and (key != "conditions" or panels is not None)]
    lines.append(f"Figures in {out}/: {', '.join(written)}; their numbers in {NUMBERS}")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", help="a run directory (multiverse run ... --out DIR)")
    parser.add_argument("--figures", default="figures", help="where to write the PNGs (default: figures/)")
    parser.add_argument("--threshold", type=float, default=None,
                        help="null rate of the joint tests (default: each system's primary-universe rate)")
    args = parser.parse_args(argv)
    try:
        for line in write_figures(args.run_dir, args.figures, threshold=args.threshold):
            print(line)
    except mv.MultiverseError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
