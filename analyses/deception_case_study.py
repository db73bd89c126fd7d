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

The script reads the run with ``multiverse.load_run`` and takes every
analysis and figure from the returned ``Results``; the one figure drawn
here, rates by condition across universes, is specific to this case study. A run
on ``sim/`` models is labelled SIMULATED on every figure.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

import multiverse as mv
from multiverse.analysis import universe_ranks

__all__ = ["FIGURES", "main", "write_figures"]

#: The figure files the script writes, in order.
FIGURES = (
    "deception_curves.png",
    "deception_agreement.png",
    "deception_ranking.png",
    "deception_variance.png",
    "deception_conditions.png",
)

CONDITION = "interaction_condition"
_DPI = 130


# --------------------------------------------------------------------------- labelling


def _label(tables: mv.Results) -> str:
    """The provenance line every figure carries."""
    name = tables.manifest.get("spec") or (tables.source.name if tables.source else "run")
    if tables.manifest.get("simulated"):
        return f"SIMULATED world ({name}): illustrative numbers, not measurements of real models"
    return f"run: {name}"


def _save(figure: Figure, path: Path, label: str, title: str) -> None:
    figure.suptitle(f"{title}\n{label}", x=0.01, ha="left", fontsize=11)
    figure.savefig(path, dpi=_DPI)


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
    curves.figure(title=f"{title}\n{label}").savefig(path, dpi=_DPI)
    return curves.document


def _agreement(tables, label, path):
    try:
        axis = tables.judge_axis()
    except mv.InputError:  # no judge axis: nothing to compare
        return None
    result = tables.agreement(axis)
    # Bias next to kappa and AC1: two judges can agree often and still move every rate.
    figure = result.figure(measures=("cohen_kappa", "gwet_ac1", "bias"))
    _save(figure, path, label,
          f"Agreement between the options of {axis!r} on the same {result['paired_on']}s "
          f"({result['n_units']} units)")
    return result.document


def _ranking(tables, label, path):
    result = tables.ranking(boot=0)
    _save(result.figure(), path, label, "Rank stability: the systems' ranks across universes")
    return tables.system_rates(), result.document


def _variance(tables, label, path):
    result = tables.variance()
    _save(result.figure(), path, label, "Variance decomposition of the universe x system rates")
    return result.document


def _conditions(tables, label, path):
    """Rates by interaction condition: the primary and its one-axis neighbours, one panel each."""
    rates, axes, primary = tables.rates, tables.axes, tables.primary
    if rates is None or CONDITION not in tables.factors:
        return None
    prefix = f"{CONDITION}="
    rows = rates[rates["subgroup"].astype(str).str.startswith(prefix) & (rates["n"] > 0)].copy()
    if rows.empty:
        return None
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
    return panels


# --------------------------------------------------------------------------- summary


def _summary(tables, curves, rates, ranked, decomposition) -> list[str]:
    axes = tables.axes
    n_universes = rates["universe_id"].nunique()
    systems = ranked["systems"]
    lines = [f"{_label(tables)}: {n_universes} universes x {len(systems)} systems, axes {', '.join(axes)}"]
    lines.append("Rates across universes (min..max, median; primary rate; joint test of the curve against "
                 "the band):")
    tests = {t["systems"][0]: t for t in curves["tests"]}
    for system, entry in curves["systems"].items():
        rate = entry["rate"]
        at = entry["primary"]
        primary = f"primary {at['rate']:.2f} [{at['ci_low']:.2f}, {at['ci_high']:.2f}]" if at else "no primary"
        test = tests.get(system)
        joint = ""
        if test:
            sig = test["statistics"]["n_significant"]
            side = "above" if test["direction"] == "greater" else "below"
            joint = (f"; {sig['observed']}/{test['n_universes']} universes significantly {side} "
                     f"{test['threshold']:.2f}, joint p = {sig['p']:.3f}")
        lines.append(f"  {system}: {rate['min']:.2f}..{rate['max']:.2f} (median {rate['median']:.2f}); "
                     f"{primary}{joint}")
    by_axis = decomposition["by_axis"]
    if by_axis:
        top = by_axis[0]
        lines.append(f"Most variance: {top['axis']} explains {top['total']:.1%} of the variance in rates "
                     f"(shift of all rates {top['main']:.1%}, {top['axis']} x system {top['interaction']:.1%}); "
                     "then " + ", ".join(f"{r['axis']} {r['total']:.1%}" for r in by_axis[1:]))
        lines += [f"  note: {note}" for note in decomposition["notes"]]
    ranks = universe_ranks(rates).pivot_table(index="universe_id", columns="system", values="rank")
    primary = ranked["primary"]
    order = ranks.loc[primary].sort_values(kind="stable")
    shown = " > ".join(f"{s}" for s in order.index)
    same_top = 1.0 - len(ranked["flips"]) / ranked["universes"]
    same_order = float((ranks == ranks.loc[primary]).all(axis=1).mean())
    top = ", ".join(str(s) for s in order.index[order == order.min()])
    lines.append(f"Ranking: primary order {shown}; same top system ({top}) in {same_top:.0%} of universes; "
                 f"same full order in {same_order:.0%}; Kendall's W = {ranked['kendall_w']['w']:.2f}")
    return lines


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
    curves = _curves(tables, threshold, label, out / names["curves"])
    judged = _agreement(tables, label, out / names["agreement"])
    rates, ranked = _ranking(tables, label, out / names["ranking"])
    decomposition = _variance(tables, label, out / names["variance"])
    panels = _conditions(tables, label, out / names["conditions"])
    lines = _summary(tables, curves, rates, ranked, decomposition)
    if judged is not None:
        kappas = ", ".join(f"{p['a']}/{p['b']} {p['cohen_kappa']:.2f}" for p in judged["pairs"])
        lines.append(f"Judge agreement (Cohen's kappa): {kappas}; Krippendorff's alpha "
                     f"{judged['krippendorff_alpha']:.2f}")
    written = [n for key, n in names.items() if (key != "agreement" or judged is not None)
               and (key != "conditions" or panels is not None)]
    lines.append(f"Figures in {out}/: {', '.join(written)}")
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
