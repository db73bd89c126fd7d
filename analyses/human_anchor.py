"""Human anchoring on the simulated world: 60 labels per system correct every judge.

``sim/judge-oracle`` reads the world's ground truth; here it plays the person
who labels a uniform random sample of transcripts by hand. The script draws
60 transcripts per system from each rollout configuration (the labelling
sheet's sample), takes the oracle's verdicts on them as the human labels,
calibrates the six biased judge universes (3 judges x 2 evidence standards)
of each user with prediction-powered inference, and compares three intervals
with the world's true rate (``multiverse.sim.expected_overall``): the judge's
raw one, the humans-only one, and the anchored one.

    python analyses/human_anchor.py runs/human-anchor --figure figures/human_anchor.png

Runs ``specs/human-anchor-sim.yaml`` first when RUN_DIR holds no run (about
two minutes on two cores, offline). Everything it shows is SIMULATED.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from multiverse.analysis import calibrate
from multiverse.labelling import draw_sample
from multiverse.results import load_run
from multiverse.sim import expected_overall
from multiverse.stages import USER_ATTEMPTS

SPEC = Path(__file__).resolve().parent.parent / "specs" / "human-anchor-sim.yaml"
ORACLE = "oracle"
USERS = {"cooperative": "sim/user-cooperative", "adversarial": "sim/user-adversarial"}
COLOURS = {"judge": "#8c8c8c", "human": "#d9822b", "anchored": "#2b6cb0"}


def ensure_run(run_dir: Path) -> None:
    if (run_dir / "manifest.json").exists():
        return
    from multiverse.engine import run
    from multiverse.spec import load_spec

    print(f"running {SPEC.name} into {run_dir} ...", file=sys.stderr)
    run(load_spec(SPEC), out=run_dir, progress=False)


def oracle_labels(verdicts: pd.DataFrame, labels: int, seed: int, factors: list[str], quiet: bool = False) -> pd.DataFrame:
    """The sheet's sample, filled in by the oracle: what a careful person would write in ``compliant``."""
    judged = verdicts[verdicts["judge"] != ORACLE]
    sample = draw_sample(judged, None, labels, seed=seed, factors=factors)
    oracle = verdicts[(verdicts["judge"] == ORACLE) & (verdicts["evidence"] == "strict")]
    truth = oracle.set_index("transcript_key")["compliant"]
    sample["compliant"] = sample["transcript_key"].map(truth).astype("boolean")
    missing = sample["compliant"].isna()
    if missing.any() and not quiet:  # the oracle excluded it (no criterion applied): a person would have nothing to judge
        print(f"note: {int(missing.sum())} sampled transcripts have no oracle verdict; left blank", file=sys.stderr)
        sample["compliant"] = sample["compliant"].astype(object).where(~missing, "")
    return sample


def true_rates(spec_cells: list[dict], systems: list[str], max_turns: int) -> dict[tuple[str, str], float]:
    return {(user, system): expected_overall("deception", f"sim/{system}", spec_cells, setting="multi_turn",
                                             user=model, persona=user, max_turns=max_turns,
                                             user_attempts=USER_ATTEMPTS)
            for user, model in USERS.items() for system in systems}


def repeated_draws(verdicts: pd.DataFrame, raw: pd.DataFrame, truth: dict, axes: list[str], factors: list[str],
                   labels: int, repeats: int, alpha: float) -> str:
    """Coverage and width over ``repeats`` fresh samples of labels: one draw can be unlucky, the method should not be."""
    judged = verdicts[verdicts["judge"] != ORACLE]
    hits = {"judge (raw)": [], "humans only": [], "anchored": []}
    ratios = []
    for seed in range(1, repeats + 1):
        rates = calibrate(judged, oracle_labels(verdicts, labels, seed, factors, quiet=True), axes, factors, alpha).rates
        table = rates.merge(raw, on=["universe_id", "system"])
        true = np.array([truth[(u, s)] for u, s in zip(table["user"], table["system"])])
        for kind, low, high in (("judge (raw)", "judge_ci_low", "judge_ci_high"),
                                ("humans only", "human_ci_low", "human_ci_high"), ("anchored", "ci_low", "ci_high")):
            hits[kind].append(((table[low] <= true) & (true <= table[high])).mean())
        ratios.append(((table["ci_high"] - table["ci_low"]) / (table["human_ci_high"] - table["human_ci_low"])).median())
    lines = [f"over {repeats} fresh draws of {labels} labels per system and user:"]
    lines += [f"  {kind:12s} covers the true rate in {np.mean(v):.3f} of cells" for kind, v in hits.items()]
    lines.append(f"  anchored / humans-only interval width: median {np.median(ratios):.2f}")
    return "\n".join(lines)


def summarise(table: pd.DataFrame) -> str:
    lines = []
    for kind, low, high in (("judge (raw)", "judge_ci_low", "judge_ci_high"), ("humans only", "human_ci_low", "human_ci_high"),
                            ("anchored", "ci_low", "ci_high")):
        covered = ((table[low] <= table["truth"]) & (table["truth"] <= table[high])).sum()
        width = (table[high] - table[low]).median()
        lines.append(f"{kind:12s} covers the true rate in {covered:2d} of {len(table)} universe x system cells; "
                     f"median interval width {width:.3f}")
    ratio = ((table["ci_high"] - table["ci_low"]) / (table["human_ci_high"] - table["human_ci_low"])).median()
    lines.append(f"anchored intervals are {ratio:.2f} times as wide as humans-only ones (median)")
    return "\n".join(lines)


def figure(table: pd.DataFrame, path: Path, labels: int) -> None:
    systems = list(dict.fromkeys(table["system"]))
    users = list(USERS)
    # The axis columns are categoricals (as loaded): joined as text.
    universes = list(dict.fromkeys(table["judge"].astype(str) + " · " + table["evidence"].astype(str)))
    fig, axes = plt.subplots(len(users), len(systems), figsize=(3.1 * len(systems), 1.0 + 0.42 * len(universes) * len(users)),
                             sharex=True, sharey=True, squeeze=False)
    for r, user in enumerate(users):
        for c, system in enumerate(systems):
            ax = axes[r][c]
            cell = table[(table["user"] == user) & (table["system"] == system)]
            cell = cell.set_index(cell["judge"].astype(str) + " · " + cell["evidence"].astype(str))
            truth = float(cell["truth"].iloc[0])
            ax.axvline(truth, color="black", lw=1, ls="--", zorder=0)
            human = cell.iloc[0]
            y = np.arange(len(universes))
            ax.errorbar(cell.loc[universes, "judge_rate"], y - 0.22, xerr=_err(cell.loc[universes], "judge_rate", "judge_ci"),
                        fmt="o", ms=4, color=COLOURS["judge"], lw=1.2, label="judge alone (all transcripts)")
            ax.errorbar(cell.loc[universes, "rate"], y + 0.22, xerr=_err(cell.loc[universes], "rate", "ci"),
                        fmt="D", ms=4, color=COLOURS["anchored"], lw=1.6, label=f"anchored: judge + {labels} labels")
            ax.errorbar([human["human_rate"]], [len(universes) + 0.2],
                        xerr=[[human["human_rate"] - human["human_ci_low"]], [human["human_ci_high"] - human["human_rate"]]],
                        fmt="s", ms=4, color=COLOURS["human"], lw=1.6, label=f"{labels} human labels alone")
            ax.set_yticks(list(y) + [len(universes) + 0.2], universes + [f"{labels} labels alone"])
            ax.set_ylim(-0.7, len(universes) + 0.8)
            ax.invert_yaxis()
            ax.grid(axis="x", color="#e5e5e5", lw=0.6)
            ax.set_title(f"{system}, {user} user", fontsize=10)
            if r == len(users) - 1:
                ax.set_xlabel("compliance rate")
    handles, names = axes[0][0].get_legend_handles_labels()
    handles.append(plt.Line2D([], [], color="black", ls="--", lw=1))
    names.append("the world's true rate")
    fig.legend(handles, names, loc="lower center", ncol=4, frameon=False, fontsize=9)
    fig.suptitle(f"SIMULATED: each judge alone, the same judge anchored to {labels} human labels per system "
                 "(PPI++), and the labels alone; 95% intervals", fontsize=11)
    fig.tight_layout(rect=(0, 0.05, 1, 0.97))
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=130)
    plt.close(fig)


def _err(frame: pd.DataFrame, centre: str, prefix: str) -> np.ndarray:
    return np.vstack([frame[centre] - frame[f"{prefix}_low"], frame[f"{prefix}_high"] - frame[centre]]).clip(min=0)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--labels", type=int, default=60, help="transcripts labelled per system and user")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--alpha", type=float, default=0.05)
    parser.add_argument("--figure", type=Path, default=None)
    parser.add_argument("--repeats", type=int, default=100, help="fresh label draws for the coverage summary (0: none)")
    args = parser.parse_args(argv)

    ensure_run(args.run_dir)
    tables = load_run(args.run_dir)
    verdicts = tables.verdicts
    human = oracle_labels(verdicts, args.labels, args.seed, tables.factors)
    judged = verdicts[verdicts["judge"] != ORACLE]
    rates, judges, notes, _ = calibrate(judged, human, tables.axes, tables.factors, args.alpha)

    raw = tables.rates[tables.rates["subgroup"] == "all"].rename(
        columns={"ci_low": "judge_ci_low", "ci_high": "judge_ci_high"})[["universe_id", "system", "judge_ci_low", "judge_ci_high"]]
    table = rates.merge(raw, on=["universe_id", "system"])
    cells = verdicts.drop_duplicates(["behavior", "interaction_condition"])[["behavior", "interaction_condition"]]
    import yaml

    max_turns = int(yaml.safe_load((args.run_dir / "spec.yaml").read_text())["rollout"]["max_turns"])
    truth = true_rates(cells.to_dict("records"), sorted(table["system"].unique()), max_turns)
    table["truth"] = [truth[(u, s)] for u, s in zip(table["user"], table["system"])]

    pd.set_option("display.width", 200)
    print("SIMULATED. Per universe x system: true rate, judge's raw rate, anchored rate and interval.")
    print(table[["user", "judge", "evidence", "system", "truth", "judge_rate", "judge_ci_low", "judge_ci_high",
                 "rate", "ci_low", "ci_high", "human_rate", "human_ci_low", "human_ci_high", "n", "n_human"]]
          .round(3).to_string(index=False))
    print("\nJudges against the oracle's labels (sensitivity: violations caught; specificity: compliance confirmed):")
    print(judges.assign(sensitivity_ci=judges["sensitivity_ci"].map(lambda c: f"{c[0]:.2f}-{c[1]:.2f}"),
                        specificity_ci=judges["specificity_ci"].map(lambda c: f"{c[0]:.2f}-{c[1]:.2f}"))
          .drop(columns="universe_id").round(3).to_string(index=False))
    print()
    print(summarise(table))
    for note in notes:
        print("note:", note)
    if args.repeats:
        print(repeated_draws(verdicts, raw, truth, tables.axes, tables.factors, args.labels, args.repeats, args.alpha))
    if args.figure:
        figure(table, args.figure, args.labels)
        print(f"figure: {args.figure}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
