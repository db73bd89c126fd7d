"""The ``multiverse`` command: a thin layer over the Python API.

Each subcommand parses its flags, calls one API function and prints. Heavy
modules (litellm, matplotlib, the analyses) are imported inside the command
that needs them, so ``multiverse --help``, ``validate``, ``expand`` and
``plan`` start fast.

Exit codes: 0 success; 1 a run-time failure; 2 bad input (spec, table, flags),
reported as one line per problem on stderr with no traceback.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from .errors import InputError, MultiverseError, SpecError

__all__ = ["main", "build_parser"]

EPILOG = """\
typical use:
  multiverse validate specs/demo.yaml     check a spec, one line per problem
  multiverse plan specs/demo.yaml         what a run will cost, before it runs
  multiverse run specs/demo.yaml          run every universe, write runs/demo/
  multiverse report runs/demo             one HTML file with every figure
  multiverse demo                         all of the above, offline, simulated
"""


class _Parser(argparse.ArgumentParser):
    """argparse that exits 2 with a one-line message on bad flags."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message}\n")


def _formatter(prog: str) -> argparse.HelpFormatter:
    return argparse.RawDescriptionHelpFormatter(prog, max_help_position=32)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="multiverse",
        description="Run generative-AI audits as a multiverse of measurement choices, and show which "
        "reported rates and rankings survive them.",
        epilog=EPILOG,
        formatter_class=_formatter,
    )
    parser.add_argument("--version", action="version", version=f"multiverse {_version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    def command(name: str, help: str, description: str | None = None) -> argparse.ArgumentParser:
        return sub.add_parser(name, help=help, description=description or help, formatter_class=_formatter)

    p = command("validate", "check a spec and print one line per problem (exit 2 if any)")
    p.add_argument("spec", type=Path, help="the spec YAML file")

    p = command("expand", "list the universes a spec's axes expand into")
    p.add_argument("spec", type=Path)
    p.add_argument("--format", choices=("table", "json", "csv"), default="table", help="output format (default: table)")

    p = command(
        "plan",
        "show per stage how many model calls a run needs, how many are stored, and the estimated cost",
    )
    p.add_argument("spec", type=Path)
    p.add_argument("--store", type=Path, help="store directory (default: $MULTIVERSE_STORE or .multiverse/store beside the spec)")
    p.add_argument("--json", action="store_true", help="print one JSON document")

    command("schema", "print the JSON Schema of spec files (for editor completion and validation)")

    p = command(
        "draft",
        "draft the rubric (when the spec has none usable) and the test cases, as editable YAML beside the spec",
    )
    p.add_argument("spec", type=Path)
    p.add_argument("--rubric", action="store_true", help="also draft a rubric from the concept (written to <spec>.rubric.yaml)")
    p.add_argument("--store", type=Path, help="store directory")
    p.add_argument("--force", action="store_true", help="overwrite existing draft files")

    p = command("run", "run every universe of a spec (only what is not stored yet) and write the run directory")
    _run_flags(p)
    p.add_argument("spec", type=Path)
    p.add_argument("--out", type=Path, help="run directory (default: runs/<spec name>)")
    p.add_argument("--backend", choices=("local", "dask"), default="local",
                   help="where model calls run: this process (default) or a Dask cluster")
    p.add_argument("--scheduler", metavar="ADDRESS",
                   help="Dask scheduler address, e.g. tcp://10.0.0.5:8786 (default with --backend dask: a local cluster)")

    p = command(
        "demo",
        "run the built-in demo end to end on the simulated world (offline, no keys) and write its report",
    )
    p.add_argument("--out", type=Path, default=Path("runs/demo"), help="run directory (default: runs/demo)")
    _run_flags(p)

    analysis_help = {
        "curve": "specification curve per system (or of a difference of two systems) with joint inference",
        "agreement": "agreement between the options of an axis (default: judge) on identical transcripts",
        "ranking": "how stable the ranking of systems is across universes",
        "variance": "share of rate variance explained by each axis, by system and by their interactions",
    }
    for name, text in analysis_help.items():
        p = command(name, text)
        p.add_argument("source", type=Path, metavar="RUN_DIR_OR_TABLE",
                       help="a run or import directory, or a verdicts table (.parquet/.csv)")
        p.add_argument("--json", action="store_true", help="print one JSON document and nothing else")
        p.add_argument("--figure", type=Path, metavar="FILE", help="write the figure (.png, .svg or .pdf by extension)")
        if name == "agreement":
            p.add_argument("--axis", help="the axis whose options are compared (default: judge, else the first judge-stage axis)")
        else:
            p.add_argument("--axis", action="append", help={
                "curve": "only show these axes in the indicator panel (repeatable)",
                "ranking": "only report these axes in the per-axis Kendall's tau summary (repeatable)",
                "variance": "only report these axes (repeatable); the decomposition still uses every axis",
            }[name])
        if name == "curve":
            p.add_argument("--system", action="append", help="only these systems (repeatable)")
            p.add_argument("--threshold", type=float, help="joint test of each system's rate against this rate")
            p.add_argument("--diff", nargs=2, metavar=("A", "B"), help="the curve of rate(A) - rate(B), with the sign-flip joint test")
            p.add_argument("--boot", type=_positive_int, default=1000, help="resamples for the joint null (default: 1000)")
            p.add_argument("--seed", type=int, default=0, help="random seed of the resampling (default: 0)")
        if name == "ranking":
            p.add_argument("--boot", type=int, default=1000, help="bootstrap resamples for rank intervals in the primary universe (0 to skip)")

    p = command("report", "write one self-contained HTML report of a run, an import, or a verdicts table")
    p.add_argument("source", type=Path, metavar="RUN_DIR_OR_TABLE")
    p.add_argument("--out", type=Path, help="the HTML file (default: RUN_DIR/report.html)")

    p = command("power", "detectable differences at the spec's planned cases, or cases needed for a difference")
    p.add_argument("spec", type=Path)
    p.add_argument("--baseline", type=float, default=0.8, help="expected compliance rate (default: 0.8)")
    p.add_argument("--alpha", type=float, default=0.05)
    p.add_argument("--power", type=float, default=0.8)
    p.add_argument("--json", action="store_true")

    p = command("import", "import results produced elsewhere as a multiverse run directory")
    imports = p.add_subparsers(dest="source_kind", metavar="KIND", parser_class=_Parser, required=True)
    q = imports.add_parser("assert", help="ASSERT run directories: each run becomes a universe",
                           description="Import ASSERT run directories. Axes are inferred from the config.yaml fields that "
                           "differ between runs, or given with --axis name=run_dir:option.", formatter_class=_formatter)
    q.add_argument("run_dirs", type=Path, nargs="+", metavar="ASSERT_RUN_DIR")
    q.add_argument("--out", type=Path, required=True, help="the import directory to write")
    q.add_argument("--axis", action="append", metavar="NAME=RUN_DIR:OPTION", help="name a run's option on an axis (repeatable)")
    q.add_argument("--scoring", action="append", metavar="RULE", help="scoring rule(s) to apply; several make a scoring axis")
    q = imports.add_parser("table", help="any per-item label table (CSV or parquet)",
                           description="Import a per-item label table: one row per system x item (x axis options).", formatter_class=_formatter)
    q.add_argument("file", type=Path)
    q.add_argument("--system", required=True, metavar="COL", help="column naming the system")
    q.add_argument("--item", required=True, metavar="COL", help="column naming the item (case)")
    q.add_argument("--label", required=True, metavar="COL", help="column with the label: boolean, 0/1, or a category")
    q.add_argument("--axis", action="append", default=[], metavar="COL", help="column holding an axis option (repeatable)")
    q.add_argument("--positive", metavar="VALUE", help="the label value that means compliant (for category labels)")
    q.add_argument("--out", type=Path, required=True, help="the import directory to write")

    p = command("store", "inspect or clean the store")
    stores = p.add_subparsers(dest="store_command", metavar="ACTION", parser_class=_Parser, required=True)
    q = stores.add_parser("stats", help="entries and bytes per stage", formatter_class=_formatter)
    q.add_argument("--store", type=Path, help="store directory (default: $MULTIVERSE_STORE or ./.multiverse/store)")
    q.add_argument("--json", action="store_true")
    q = stores.add_parser("gc", help="remove entries that the given specs no longer reference", formatter_class=_formatter)
    q.add_argument("specs", type=Path, nargs="+", metavar="SPEC", help="every spec whose work should be kept")
    q.add_argument("--store", type=Path)
    q.add_argument("--dry-run", action="store_true", help="only say what would be removed")
    q.add_argument("--json", action="store_true")

    return parser


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a number >= 1, got {value}")
    return value


def _budget(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an amount in USD, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError("expected a budget >= 0")
    return value


def _run_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--store", type=Path, help="store directory (default: $MULTIVERSE_STORE or .multiverse/store beside the spec)")
    p.add_argument("--jobs", type=_positive_int, default=8, help="concurrent model calls per provider (default: 8)")
    p.add_argument("--budget", type=_budget, help="stop scheduling calls before spending more than this many USD")
    p.add_argument("--quiet", action="store_true", help="no progress bars")


def _version() -> str:
    from . import __version__

    return __version__


# -- commands ---------------------------------------------------------------


def cmd_validate(args) -> int:
    from .grid import expand
    from .spec import load_spec

    spec = load_spec(args.spec)
    universes = expand(spec)
    print(f"{args.spec}: ok: {len(universes)} universes over {len(spec.axes)} axes, {len(spec.systems)} systems")
    return 0


def cmd_expand(args) -> int:
    from .grid import expand
    from .spec import load_spec

    spec = load_spec(args.spec)
    universes = expand(spec)
    axes = list(spec.axes)
    if args.format == "json":
        doc = [{"id": u.id, "label": u.label, "axes": dict(u.options), "primary": u.is_primary} for u in universes]
        print(json.dumps(doc, indent=2))
    elif args.format == "csv":
        import csv

        writer = csv.writer(sys.stdout, lineterminator="\n")
        writer.writerow(["id", "label", *axes, "primary"])
        for u in universes:
            writer.writerow([u.id, u.label, *(u.options[a] for a in axes), u.is_primary])
    else:
        rows = [["id", *axes, ""]] + [[u.id, *(u.options[a] for a in axes), "primary" if u.is_primary else ""] for u in universes]
        _print_table(rows)
        print(f"\n{len(universes)} universes")
    return 0


def cmd_plan(args) -> int:
    from .spec import load_spec

    spec = load_spec(args.spec)
    from .pipeline import plan

    result = plan(spec, store=args.store)
    if args.json:
        _print_json(result)
        return 0
    print(f"{len(result['universes'])} universes, {len(spec.systems)} systems")
    rows = [["axis", "stage it touches", "options"]]
    rows += [[a, s, ", ".join(spec.axes[a])] for a, s in result["axis_stages"].items()]
    _print_table(rows)
    print()
    rows = [["stage", "unique work", "model calls", "stored", "to compute", "est. cost (USD)"]]
    for name, stage in result["stages"].items():
        rows.append([name, stage["units"], stage["calls"], stage["stored"], stage["to_compute"], f"{stage['cost']:.4f}"])
    _print_table(rows)
    if result.get("notes"):
        print()
        for note in result["notes"]:
            print(f"note: {note}")
    return 0


def cmd_schema(args) -> int:
    from .spec import spec_schema

    print(json.dumps(spec_schema(), indent=2))
    return 0


def cmd_draft(args) -> int:
    from .spec import load_spec

    spec = load_spec(args.spec)
    from .pipeline import draft

    written = draft(spec, store=args.store, rubric=args.rubric, force=args.force, progress=None)
    for path in written:
        print(f"wrote {path}")
    return 0


def _run_and_say(spec, args, out):
    from .pipeline import run

    result = run(
        spec, out=out, store=args.store, jobs=args.jobs, budget=args.budget, progress=False if args.quiet else None,
        backend=getattr(args, "backend", "local"), scheduler=getattr(args, "scheduler", None),
    )
    m = result.manifest
    print(f"{len(m['universes'])} universes x {len(spec.systems)} systems in {m['seconds']:.1f} s")
    for stage, counts in m["stages"].items():
        if stage != "score":
            print(f"  {stage:<8} {counts['computed']:>6} calls made, {counts['stored']:>6} units reused, {counts['failed']:>4} failed")
    statuses = ", ".join(f"{v} {k}" for k, v in m["statuses"].items() if v)
    print(f"  verdicts: {statuses}")
    if m["cost"]:
        print(f"  cost: ${m['cost']:.4f}, {m['tokens']} tokens")
    print(f"results: {result.out_dir}/ (verdicts, criteria, rates as .parquet and .csv; manifest.json)")
    return result


def cmd_run(args) -> int:
    from .spec import load_spec

    spec = load_spec(args.spec)
    _run_and_say(spec, args, args.out)
    return 0


def cmd_demo(args) -> int:
    from importlib.resources import as_file, files

    from .spec import load_spec

    with as_file(files("multiverse.examples") / "demo.yaml") as path:
        spec = load_spec(path)
    if args.store is None:
        args.store = args.out / ".store"
    print("multiverse demo: a SIMULATED audit (built-in offline world; no model is called over the network)")
    result = _run_and_say(spec, args, args.out)
    from .report import write_report

    report = write_report(result.out_dir, result.out_dir / "report.html")
    print(f"report:  {report}")
    return 0


def _json_safe(value):
    """JSON with null for undefined statistics (NaN) and plain Python numbers."""
    import math

    import numpy as np

    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _print_json(document) -> None:
    print(json.dumps(_json_safe(document), indent=2, allow_nan=False))


def _save(figure, path: Path) -> None:
    if path.suffix.lower() not in (".png", ".svg", ".pdf"):
        raise InputError(f"--figure {path}: expected a .png, .svg or .pdf file name")
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=150, bbox_inches="tight")


def cmd_curve(args) -> int:
    from .analysis.curve import case_matrix, curve_summary, difference_curve, spec_curve
    from .analysis.inference import joint_difference_test, joint_rate_test
    from .analysis.rates import run_ci_settings
    from .tables import load_run

    t = load_run(args.source)
    _check_axes(t, args.axis)
    matrix = case_matrix(t.verdicts, axes=t.axes)
    ci, n_boot = run_ci_settings(t)  # the interval the spec asked for, per universe
    curve = spec_curve(matrix, axes=t.axes, system=args.system or None, primary=t.primary,
                       ci=ci if ci is not None else "wilson", n_boot=n_boot)
    systems = list(dict.fromkeys(curve["system"]))
    tests = []
    if args.threshold is not None:
        tests += [joint_rate_test(matrix, system=s, threshold=args.threshold, boot=args.boot, seed=args.seed) for s in systems]
    if args.diff:
        a, b = args.diff
        tests.append(joint_difference_test(matrix, a=a, b=b, boot=args.boot, seed=args.seed))
    summary = curve_summary(curve, tests=tests)
    if args.figure:
        from .plots.curve import plot_curve, plot_curves, plot_difference_curve

        shown = args.axis or t.axes
        if args.diff:
            diff = difference_curve(matrix, axes=t.axes, a=args.diff[0], b=args.diff[1], primary=t.primary)
            figure = plot_difference_curve(diff, axes=shown, null_band=tests[-1].band)
        else:
            bands = {test.systems[0]: test.band for test in tests if test.kind == "rate"}
            if len(systems) == 1:
                figure = plot_curve(curve, axes=shown, null_band=bands.get(systems[0]), reference=args.threshold)
            else:
                figure = plot_curves(curve, axes=shown, null_bands=bands, reference=args.threshold)
        _save(figure, args.figure)
    if args.json:
        _print_json(summary)
        return 0
    print(f"{summary['n_universes']} universes")
    for system, s in summary["systems"].items():
        where = s.get("primary") or {}
        primary = f"; primary {where['rate']:.3f} at percentile {where['percentile']:.0f}" if where.get("rate") is not None else ""
        print(f"  {system}: rate {s['rate']['min']:.3f} .. {s['rate']['median']:.3f} .. {s['rate']['max']:.3f} (min .. median .. max){primary}")
    print(f"  intervals: {summary['ci']}" + (f", level {summary['level']:g}" if summary["level"] is not None else ""))
    for test in summary["tests"]:
        st = test["statistics"]
        shown = [f"{label} {st[name]['p']:.3f} (Holm {st[name]['p_holm']:.3f})" for name, label in
                 (("median_effect", "median effect"), ("n_significant", "count significant"), ("stouffer_z", "Stouffer Z"))]
        print(f"  joint test ({test['kind']}, {test['null']}): p = {'; '.join(shown)}")
    if summary["multiplicity"]:
        print(f"  adjusted p: {summary['multiplicity']['family']}")
    if args.figure:
        print(f"figure: {args.figure}")
    return 0


def _check_axes(t, axes: list[str] | None) -> None:
    unknown = [a for a in axes or [] if a not in t.axes]
    if unknown:
        raise InputError(f"--axis {unknown[0]}: expected one of the axes: {', '.join(t.axes) or '(none)'}")


def _judge_axis(t) -> str:
    if "judge" in t.axes:
        return "judge"
    stages = t.manifest.get("axis_stages", {})
    for axis in t.axes:
        if stages.get(axis) == "judge":
            return axis
    raise InputError(f"{t.source}: no judge axis; expected --axis naming one of: {', '.join(t.axes) or '(no axes)'}")


def cmd_agreement(args) -> int:
    from .analysis.agreement import agreement
    from .tables import load_run

    t = load_run(args.source)
    axis = args.axis or _judge_axis(t)
    if axis not in t.axes:
        raise InputError(f"--axis {axis}: expected one of the axes: {', '.join(t.axes) or '(none)'}")
    result = agreement(t.verdicts, axes=t.axes, axis=axis, criteria=t.criteria)
    if args.figure:
        import pandas as pd

        from .plots.agreement import agreement_figure

        _save(agreement_figure(pd.DataFrame(result["pairs"]), options=result["options"], axis_name=axis), args.figure)
    if args.json:
        _print_json(result)
        return 0
    print(f"agreement across {axis} ({', '.join(map(str, result['options']))}) on {result['n_units']} units, paired on {result['paired_on']}")
    rows = [["a", "b", "n", "percent", "kappa", "AC1", "bias"]]
    for p in result["pairs"]:
        # A kappa on a handful of units reads like a finding; the mark says it is not one.
        mark = "!" if p.get("small_sample") or p.get("degenerate") else ""
        rows.append([p["a"], p["b"], f"{p['n']}{mark}", _f(p["percent"]), _f(p["cohen_kappa"]) + mark,
                     _f(p["gwet_ac1"]) + mark, _f(p["bias"])])
    _print_table(rows)
    if any(p.get("small_sample") or p.get("degenerate") for p in result["pairs"]):
        print("! too few paired units (or a one-cell table) to read kappa and AC1: see the notes")
    small = 0 < result["n_units"] < 30
    print(f"Krippendorff's alpha: {_f(result['krippendorff_alpha'])}{'!' if small else ''}")
    for note in result.get("notes", []):
        print(f"note: {note}")
    return 0


def _f(value, digits: int = 3) -> str:
    import math

    return "n/a" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.{digits}f}"


def cmd_ranking(args) -> int:
    from .analysis.ranking import ranking, system_rates
    from .tables import load_run

    t = load_run(args.source)
    _check_axes(t, args.axis)
    result = ranking(t.verdicts, axes=t.axes, primary=t.primary, bootstrap=args.boot)
    if args.axis:
        result["kendall_tau"]["by_axis"] = [r for r in result["kendall_tau"]["by_axis"] if r["axis"] in args.axis]
    if args.figure:
        from .plots.ranking import ranking_figure

        _save(ranking_figure(system_rates(t.verdicts, axes=t.axes), axes=t.axes, primary=t.primary), args.figure)
    if args.json:
        _print_json(result)
        return 0
    _print_ranking(result)
    return 0


def _interval(pair) -> str:
    return f"[{_f(pair[0], 2)}, {_f(pair[1], 2)}]" if pair else ""


def _print_ranking(result: dict) -> None:
    unc = result.get("uncertainty") or {}
    print(f"{result['universes']} universes; primary {result['primary']} (top: {', '.join(map(str, result['primary_top']))})")
    level = f"{unc['level']:.0%} case-bootstrap interval, {unc['resamples']} resamples" if unc else "no bootstrap"
    print(f"P(rank 1) over all universes [{level}] and coverage (share of universes rating the system):")
    for system, p in sorted(result["p_top"].items(), key=lambda kv: -kv[1]):
        print(f"  {system}: {p:.2f} {_interval(unc.get('p_top', {}).get(system))}  coverage {result['coverage'][system]:.2f}")
    for row in unc.get("adjacent", []):
        said = (f"{row['a']} ranks above {row['b']}" if row["separable"] and row["low"] > 0.5 else
                f"{row['b']} ranks above {row['a']}" if row["separable"] else
                f"{row['a']} and {row['b']} are not separable")
        print(f"  {said}: P({row['a']} above {row['b']}) = {_f(row['p_above'], 2)} {_interval([row['low'], row['high']])}")
    pairwise = result["pairwise"]
    pairs = pairwise["pairs"]
    if pairs:
        print(f"Paired tests in the primary universe, {pairwise['adjustment']}-adjusted over {pairwise['family']}:")
        shown = pairs
        if len(pairs) > 45:  # 10+ systems: the neighbours in the primary's order; the rest are in --json
            neighbours = {frozenset((r["a"], r["b"])) for r in unc.get("adjacent", [])}
            shown = [q for q in pairs if frozenset((q["a"], q["b"])) in neighbours]
            held = sum(1 for q in pairs if q["p_holm"] is not None and q["p_holm"] < 0.05)
            print(f"  {held} of {len(pairs)} pairs differ at Holm-adjusted p < 0.05; neighbours in the primary's "
                  "order below, every pair in --json")
        for q in shown:
            print(f"  {q['a']} - {q['b']}: {_f(q['difference'])} on {q['n_cases']} cases, p = {_f(q['p'], 4)}, Holm p = {_f(q['p_holm'], 4)}")
    tau, w = result["kendall_tau"], result["kendall_w"]
    print(f"Kendall's tau-b between universes: mean {_f(tau['mean'])} over {tau['n_pairs']} pairs; "
          f"Kendall's W {_f(w['w'])} ({w['universes']} universes x {w['systems']} systems, p = {_f(w['p_value'], 4)})")
    for row in tau.get("by_axis", []):
        print(f"  changing {row['axis']}: mean tau {_f(row['mean'])} (min {_f(row['min'])}, {row['n_pairs']} pairs)")
    print(f"{len(result['flips'])} universe(s) have a different top system than the primary "
          "(each with the smallest change from the primary that gives that top):")
    for flip in result["flips"]:
        changes = ", ".join(f"{a}={o}" for a, o in flip["changes"].items())
        via = "" if flip["via_universe"] == flip["universe_id"] else f", as in {flip['via_universe']}"
        print(f"  {flip['universe_id']}: top {', '.join(map(str, flip['top']))} when {changes} "
              f"({flip['n_axes_differ']} of the axes differ{via})")
    for note in result.get("notes", []):
        print(f"note: {note}")


def cmd_variance(args) -> int:
    from .analysis.variance import variance
    from .tables import load_run

    t = load_run(args.source)
    _check_axes(t, args.axis)
    result = variance(t.verdicts, axes=t.axes)
    if args.axis:
        result["by_axis"] = [r for r in result["by_axis"] if r["axis"] in args.axis]
        result["terms"] = [r for r in result["terms"] if r.get("axis") in (*args.axis, None, "")]
        hidden = [a for a in t.axes if a not in args.axis]
        result["summary"] = [line for line in result["summary"] if not line.startswith(tuple(f"{a}:" for a in hidden))]
    if args.figure:
        import pandas as pd

        from .plots.variance import plot_variance

        _save(plot_variance(pd.DataFrame(result["terms"])).figure, args.figure)
    if args.json:
        _print_json(result)
        return 0
    noise = result.get("noise")
    aliased = {a for group in result.get("aliasing", {}).get("aliased", []) for a in group}
    rows = [["axis", "main effect", "x system", "total"] + (["beyond noise", f"{noise['level']:.0%} interval"] if noise else [])]
    for r in result["by_axis"]:
        mark = "!" if r["axis"] in aliased else ""  # an aliased axis's 0% is not "no effect"
        row = [r["axis"] + mark, _f(r["main"]), _f(r["interaction"]), _f(r["total"])]
        if noise:
            row += [_f(r.get("beyond_noise")), _interval([r.get("low"), r.get("high")])]
        rows.append(row)
    residual = next((t for t in result["terms"] if t["term"] == "Residual"), None)
    if residual is not None:
        few = "!" if residual["df"] < 10 else ""
        rows.append([f"Residual ({residual['df']:.0f} df){few}", "", "", _f(residual["share"])]
                    + ([_f(residual.get("beyond_noise")), _interval([residual.get("low"), residual.get("high")])] if noise else []))
    _print_table(rows)
    if aliased:
        print("! aliased with another axis: the grid cannot separate their effects (see the notes)")
    if noise:
        print(f"noise floor: {noise['noise_floor']:.1%} of the variance in rates is what resampling the cases alone "
              f"produces ({noise['method']}, {noise['resamples']} resamples); 'beyond noise' subtracts each term's part")
    for group in result.get("aliased_groups", []):
        print(f"aliased {' + '.join(group['axes'])}: together {_f(group['total'])} "
              f"(main {_f(group['main'])}, x system {_f(group['interaction'])})")
    for line in result["summary"]:
        print(line)
    for note in result.get("notes", []):
        print(f"note: {note}")
    return 0


def cmd_report(args) -> int:
    from .report import write_report

    path = write_report(args.source, args.out)
    print(f"report: {path}")
    return 0


def cmd_power(args) -> int:
    from .analysis.power import design_power
    from .spec import load_spec
    from .stages.draft import case_counts

    spec = load_spec(args.spec)
    counts = [n for _, n in case_counts(spec)] if spec.cases is None else [len(spec.cases)]
    cases = sum(counts) * spec.rollout.replicates
    per_cell = min(counts) if spec.cases is None and counts else None
    result = design_power(cases=cases, cases_per_cell=per_cell, baseline_rate=args.baseline, alpha=args.alpha, power=args.power)
    if args.json:
        _print_json(result)
        return 0
    print(f"{cases} cases per system per universe; baseline rate {args.baseline}, alpha {args.alpha}, power {args.power}")
    for c in result["comparisons"]:
        print(f"  {c['scope']} ({c['n_per_group']} per group): detectable difference {c['detectable_difference']:.3f}")
    for c in result["cases_needed"]:
        print(f"  to detect {c['difference']:.2f}: {c['n_per_group']} cases per group")
    print(f"assumption: {result['assumption']}")
    return 0


def cmd_import(args) -> int:
    from .importers import import_assert, import_table

    if args.source_kind == "assert":
        result = import_assert(args.run_dirs, args.out, axes=args.axis or None, scoring=args.scoring or "all_applicable")
    else:
        result = import_table(args.file, system=args.system, item=args.item, label=args.label, axes=args.axis,
                              positive=args.positive, out_dir=args.out)
    for warning in result.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    v = result.verdicts
    print(f"imported {len(v)} verdicts: {v['universe_id'].nunique()} universes x {v['system'].nunique()} systems "
          f"(axes: {', '.join(result.axes) or 'none'}) into {result.out_dir}")
    return 0


def cmd_store(args) -> int:
    from .store import Store, default_store_path

    store = Store(args.store or default_store_path(None))
    if args.store_command == "stats":
        result = store.stats()
    else:
        from .pipeline import referenced_keys
        from .spec import load_spec

        keep: dict[str, set[str]] = {}
        for path in args.specs:
            for stage, keys in referenced_keys(load_spec(path)).items():
                keep.setdefault(stage, set()).update(keys)
        result = store.gc(keep, dry_run=args.dry_run)
    if args.json:
        _print_json(result)
        return 0
    if args.store_command == "stats":
        print(f"{store.root}: {result['entries']} entries, {result['bytes'] / 1e6:.1f} MB")
        for stage, s in result["stages"].items():
            print(f"  {stage}: {s['entries']} entries, {s['bytes'] / 1e6:.1f} MB")
    else:
        verb = "would remove" if args.dry_run else "removed"
        print(f"{verb} {result['removed']} entries ({result['bytes'] / 1e6:.1f} MB) and {result['temp_files']} temp files")
    return 0


def _print_table(rows: list[list]) -> None:
    rows = [[str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for j, row in enumerate(rows):
        print("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip())
        if j == 0:
            print("  ".join("-" * w for w in widths))


COMMANDS = {
    "validate": cmd_validate,
    "expand": cmd_expand,
    "plan": cmd_plan,
    "schema": cmd_schema,
    "draft": cmd_draft,
    "run": cmd_run,
    "demo": cmd_demo,
    "curve": cmd_curve,
    "agreement": cmd_agreement,
    "ranking": cmd_ranking,
    "variance": cmd_variance,
    "report": cmd_report,
    "power": cmd_power,
    "import": cmd_import,
    "store": cmd_store,
}


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not args.command:
        parser.print_help()
        return 0
    try:
        return COMMANDS[args.command](args) or 0
    except SpecError as exc:
        for line in getattr(exc, "problems", None) or [str(exc)]:
            print(f"error: {line}", file=sys.stderr)
        return 2
    except InputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except MultiverseError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted; finished work is kept in the store, re-run to resume", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # `multiverse expand ... | head` closes stdout early: not an error.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
