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

__all__ = ["build_parser", "main"]

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
    p.add_argument("--store", type=Path, help=_STORE_HELP)
    p.add_argument("--json", action="store_true", help="print one JSON document")

    command("schema", "print the JSON Schema of spec files (for editor completion and validation)")

    p = command(
        "draft",
        "draft the rubric (when the spec has none usable) and the test cases, as editable YAML beside the spec",
    )
    p.add_argument("spec", type=Path)
    p.add_argument("--rubric", action="store_true", help="draft only a rubric from the concept (written to <spec>.rubric.yaml)")
    p.add_argument("--store", type=Path, help=_STORE_HELP)
    p.add_argument("--force", action="store_true", help="overwrite existing draft files")

    p = command("run", "run every universe of a spec (only what is not stored yet) and write the run directory")
    _run_flags(p)
    p.add_argument("spec", type=Path)
    p.add_argument("--out", type=Path, help="run directory (default: runs/<spec name>)")
    p.add_argument("--force", action="store_true",
                   help="write into an --out folder that holds other files or an import (inputs and the store are never overwritten)")
    p.add_argument("--backend", choices=("local", "dask"), default="local",
                   help="where model calls run: this process (default) or a Dask cluster")
    p.add_argument("--scheduler", metavar="ADDRESS",
                   help="Dask scheduler address, e.g. tcp://10.0.0.5:8786 (default with --backend dask: a local cluster)")

    p = command(
        "demo",
        "run the built-in demo end to end on the simulated world (offline, no keys) and write its report",
    )
    p.add_argument("--out", type=Path, default=Path("runs/demo"), help="run directory (default: runs/demo)")
    p.add_argument("--force", action="store_true", help="write into an --out folder that holds other files or an import")
    _run_flags(p, store_help="store directory (default: $MULTIVERSE_STORE, else ./.multiverse/store: "
                             "the demo's spec is built in, so its store is in the current directory)")

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
            p.add_argument("--threshold", type=_rate, help="joint test of each system's rate against this rate (between 0 and 1)")
            p.add_argument("--diff", nargs=2, metavar=("A", "B"), help="the curve of rate(A) - rate(B), with the sign-flip joint test")
            p.add_argument("--boot", type=_count(1, MAX_BOOT), default=1000, help=f"resamples for the joint null, 1 to {MAX_BOOT:,} (default: 1000)")
            p.add_argument("--seed", type=_count(0), default=0, help="random seed of the resampling, >= 0 (default: 0)")
        if name == "ranking":
            p.add_argument("--boot", type=_count(0, MAX_BOOT), default=1000,
                           help=f"bootstrap resamples for rank intervals in the primary universe, up to {MAX_BOOT:,} (0 to skip)")

    p = command("report", "write one self-contained HTML report of a run, an import, or a verdicts table")
    p.add_argument("source", type=Path, metavar="RUN_DIR_OR_TABLE")
    p.add_argument("--out", type=Path, help="the HTML file (default: RUN_DIR/report.html)")
    nulls = p.add_mutually_exclusive_group()
    nulls.add_argument("--threshold", type=_rate, metavar="T",
                       help="test every system's rate against T in every universe (default: against its own rate "
                            "in the primary universe)")
    nulls.add_argument("--no-tests", action="store_true",
                       help="leave out the joint tests: no grey bands, no p-values (faster)")
    p.add_argument("--quiet", action="store_true", help="no progress on stderr")

    p = command("power", "detectable differences at the spec's planned cases, or cases needed for a difference")
    p.add_argument("spec", type=Path)
    p.add_argument("--baseline", type=_rate, default=0.8, help="expected compliance rate, between 0 and 1 (default: 0.8)")
    p.add_argument("--alpha", type=_rate, default=0.05, help="significance level, between 0 and 1 (default: 0.05)")
    p.add_argument("--power", type=_rate, default=0.8, help="power, between 0 and 1 (default: 0.8)")
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
    _import_flags(q)
    q = imports.add_parser("table", help="any per-item label table (CSV or parquet)",
                           description="Import a per-item label table: one row per system x item (x axis options).", formatter_class=_formatter)
    q.add_argument("file", type=Path)
    q.add_argument("--system", required=True, metavar="COL", help="column naming the system")
    q.add_argument("--item", required=True, metavar="COL", help="column naming the item (case)")
    q.add_argument("--label", required=True, metavar="COL", help="column with the label: boolean, 0/1, or a category")
    q.add_argument("--axis", action="append", default=[], metavar="COL", help="column holding an axis option (repeatable)")
    q.add_argument("--positive", metavar="VALUE", help="the label value that means compliant (for category labels)")
    q.add_argument("--negative", nargs="+", metavar="VALUE",
                   help="with --positive: the label value(s) that mean non-compliant; any other value is refused")
    q.add_argument("--out", type=Path, required=True, help="the import directory to write")
    _import_flags(q)

    p = command("store", "inspect or clean the store")
    stores = p.add_subparsers(dest="store_command", metavar="ACTION", parser_class=_Parser, required=True)
    q = stores.add_parser("stats", help="entries and bytes per stage", formatter_class=_formatter,
                          description="Entries and bytes per stage of the store a spec or run directory uses.")
    q.add_argument("where", type=Path, nargs="?", metavar="SPEC_OR_RUN_DIR",
                   help="find the store of this spec (or of the run directory's manifest)")
    q.add_argument("--store", type=Path, help="store directory (default: $MULTIVERSE_STORE, else .multiverse/store "
                   "beside SPEC, else ./.multiverse/store)")
    q.add_argument("--json", action="store_true")
    q = stores.add_parser("gc", help="remove entries that the given specs no longer reference", formatter_class=_formatter,
                          description="Remove entries no given spec references. Entries written in the last hour or "
                          "since a live run on the store started are always kept.")
    q.add_argument("specs", type=Path, nargs="+", metavar="SPEC", help="every spec whose work should be kept")
    q.add_argument("--store", type=Path, help="store directory (default: $MULTIVERSE_STORE, else .multiverse/store "
                   "beside the specs)")
    q.add_argument("--dry-run", action="store_true", help="only say what would be removed")
    q.add_argument("--json", action="store_true")

    return parser


MAX_BOOT = 100_000
MAX_JOBS = 1024


def _count(minimum: int, maximum: int | None = None):
    """An argparse type: a whole number in [minimum, maximum]; argparse names the flag in the error."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
        if value < minimum or (maximum is not None and value > maximum):
            top = f" and <= {maximum:,}" if maximum is not None else ""
            raise argparse.ArgumentTypeError(f"expected a whole number >= {minimum}{top}, got {value}")
        return value

    return parse


def _finite(text: str) -> float:
    import math

    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"expected a finite number, got {text!r}")
    return value


def _rate(text: str) -> float:
    value = _finite(text)
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"expected a number strictly between 0 and 1, got {text!r}")
    return value


def _budget(text: str) -> float:
    try:
        value = _finite(text)
    except argparse.ArgumentTypeError:
        # nan would compare false against every spend and silently switch the cap off.
        raise argparse.ArgumentTypeError(f"expected a finite amount in USD, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a budget >= 0, got {text!r}")
    return value


def _primary_option(text: str) -> tuple[str, str]:
    axis, sep, option = text.partition("=")
    if not sep or not axis.strip() or not option.strip():
        raise argparse.ArgumentTypeError(f"expected AXIS=OPTION, got {text!r}")
    return axis.strip(), option.strip()


def _import_flags(q: argparse.ArgumentParser) -> None:
    q.add_argument("--primary", nargs="+", type=_primary_option, metavar="AXIS=OPTION",
                   help="the pre-registered universe, one option per axis (default: none is primary)")
    q.add_argument("--ci", default="wilson", metavar="METHOD",
                   help="confidence interval method of the rates: wilson (default) or bootstrap (clustered by case)")
    q.add_argument("--force", action="store_true", help="write into an --out folder that holds other files or a run")


_STORE_HELP = "store directory (default: $MULTIVERSE_STORE, else .multiverse/store beside the spec)"


def _run_flags(p: argparse.ArgumentParser, store_help: str = _STORE_HELP) -> None:
    p.add_argument("--store", type=Path, help=store_help)
    p.add_argument("--jobs", type=_count(1, MAX_JOBS), default=8, help=f"concurrent model calls per provider, 1 to {MAX_JOBS} (default: 8)")
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
    note = "" if any(u.is_primary for u in universes) else "; no primary universe declared"
    print(f"{args.spec}: ok: {len(universes)} universes over {len(spec.axes)} axes, {len(spec.systems)} systems{note}")
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

        from .csvsafe import safe_cell

        writer = csv.writer(sys.stdout, lineterminator="\n")
        writer.writerow([safe_cell(c) for c in ["id", "label", *axes, "primary"]])
        for u in universes:
            writer.writerow([safe_cell(c) for c in [u.id, u.label, *(u.options[a] for a in axes), u.is_primary]])
    else:
        rows = [["id", *axes, "primary"]] + [[u.id, *(u.options[a] for a in axes), "yes" if u.is_primary else ""]
                                             for u in universes]
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
    rows = [["stage", "unique work", "stored", "failed", "blocked", "to compute", "calls to make", "est. cost (USD)"]]
    for name, stage in result["stages"].items():
        rows.append([name, stage["units"], stage["stored"], stage["failed"], stage["blocked"], stage["to_compute"],
                     stage["calls_to_make"], f"{stage['cost']:.4f}"])
    _print_table(rows)
    print("unique work = stored + failed + blocked + to compute (work units; failed ones are stored results, "
          "blocked ones wait on a failed unit and are never run)")
    for name, stage in result["stages"].items():
        for what, reasons in (("failed", stage.get("failures")), ("blocked", stage.get("blocked_by"))):
            if reasons:
                print(f"  {name} {what}: {', '.join(f'{k} {v}' for k, v in reasons.items())}")
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
    print("  work units per stage (units = computed + stored + failed + blocked):")
    for stage, counts in m["stages"].items():
        if stage != "score":
            print(f"  {stage:<8} {_outcome_line(counts)}; {counts['calls']} model calls made")
    statuses = ", ".join(f"{v} {k}" for k, v in m["statuses"].items() if v)
    print(f"  verdicts: {sum(m['statuses'].values())} ({statuses})")
    if m["cost"]:
        print(f"  cost: ${m['cost']:.4f}, {m['tokens']} tokens")
    print(f"results: {result.out_dir}/ (verdicts, criteria, rates as .parquet and .csv; transcripts.jsonl; manifest.json)")
    return result


def _outcome_line(counts: dict) -> str:
    """``12 units: 8 computed, 2 stored, 1 failed (not_found 1), 1 blocked (rollout_failed 1)``."""

    def by_reason(reasons: dict) -> str:
        # Most frequent first (the manifest orders them); the rest counted, all listed in the manifest.
        shown = [f"{k} {v}" for k, v in list(reasons.items())[:3]]
        if len(reasons) > 3:
            shown.append(f"{len(reasons) - 3} other reasons {sum(list(reasons.values())[3:])}")
        return f" ({', '.join(shown)})" if reasons else ""

    return (f"{counts['units']} units: {counts['computed']} computed, {counts['stored']} stored, "
            f"{counts['failed']} failed{by_reason(counts.get('failures', {}))}, "
            f"{counts['blocked']} blocked{by_reason(counts.get('blocked_by', {}))}")


def _check_run_places(spec, args, out: Path) -> None:
    """The run folder, checked before the first model call (the store is checked by the store itself)."""
    from .places import RUN_FILES, check_output_dir
    from .store import default_store_path

    # The rubric's file name is gone once it is inlined: every file beside the spec that a run
    # would write over counts as an input.
    beside = [spec.base_dir / name for name in RUN_FILES if (spec.base_dir / name).is_file()]
    inputs = [p for p in (spec.path, spec.base_dir / spec.design.cases if spec.design.cases else None, *beside) if p]
    store = default_store_path(spec.path, args.store)
    check_output_dir(out, kind="run", inputs=inputs, store=store, force=args.force)


def cmd_run(args) -> int:
    from .pipeline import default_run_dir
    from .spec import load_spec

    spec = load_spec(args.spec)
    out = args.out or default_run_dir(spec)
    _check_run_places(spec, args, out)
    _run_and_say(spec, args, out)
    return 0


def cmd_demo(args) -> int:
    from importlib.resources import as_file, files

    from .spec import load_spec
    from .store import default_store_path

    with as_file(files("multiverse.examples") / "demo.yaml") as path:
        spec = load_spec(path)
    # The spec lives inside the package: "beside the spec" would be site-packages, so the
    # demo's store follows the rule for a spec without a file of its own.
    args.store = default_store_path(None, args.store)
    _check_run_places(spec, args, args.out)
    from .places import check_output_file

    check_output_file(args.out / "report.html")
    print("multiverse demo: a SIMULATED audit (built-in offline world; no model is called over the network)")
    result = _run_and_say(spec, args, args.out)
    from .report import write_report

    report = write_report(result.out_dir, result.out_dir / "report.html", progress=False if args.quiet else None)
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
    from .atomicfile import atomic_write
    from .places import check_output_file

    try:
        check_output_file(path)
    except InputError as exc:
        raise InputError(f"--figure {exc}") from None
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, lambda tmp: figure.savefig(tmp, format=path.suffix.lower()[1:], dpi=150, bbox_inches="tight"))


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
    from .analysis.dropped import dropped_notes

    summary["notes"] = dropped_notes(t.verdicts) + summary.get("notes", [])
    if args.figure:
        from .plots.curve import plot_curve, plot_curves, plot_difference_curve

        from .option_order import declared_options

        shown = [a for a in t.axes if a in set(args.axis)] if args.axis else t.axes
        options = declared_options(t)
        if args.diff:
            diff = difference_curve(matrix, axes=t.axes, a=args.diff[0], b=args.diff[1], primary=t.primary)
            figure = plot_difference_curve(diff, axes=shown, null_band=tests[-1].band, options=options)
        else:
            bands = {test.systems[0]: test.band for test in tests if test.kind == "rate"}
            if len(systems) == 1:
                figure = plot_curve(curve, axes=shown, null_band=bands.get(systems[0]), reference=args.threshold,
                                    options=options)
            else:
                figure = plot_curves(curve, axes=shown, null_bands=bands, reference=args.threshold, options=options)
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
    for note in summary["notes"]:
        print(f"note: {note}")
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
    if result["primary"] is None:
        print(f"{result['universes']} universes; no primary universe is declared")
    else:
        print(f"{result['universes']} universes; primary {result['primary']} "
              f"(top: {', '.join(map(str, result['primary_top']))})")
    level = f"{unc['level']:.0%} case-bootstrap interval, {unc['resamples']} resamples" if unc else "no bootstrap"
    print(f"P(rank 1) over all universes [{level}] and coverage (share of universes rating the system):")
    for system, p in sorted(result["p_top"].items(), key=lambda kv: -kv[1]):
        print(f"  {system}: {p:.2f} {_interval(unc.get('p_top', {}).get(system))}  coverage {result['coverage'][system]:.2f}")
    from .analysis.rank_uncertainty import separability

    for sentence in separability(unc.get("adjacent", [])):
        print(f"  {sentence}")
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
    if result["primary"] is None:
        print("no primary universe is declared: top flips are not reported")
    else:
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
    from .places import TABLE_FILES, check_output_file
    from .report import write_report

    source = Path(args.source)
    inputs = [source] + ([source / name for name in (*TABLE_FILES, "manifest.json")] if source.is_dir() else [])
    check_output_file(args.out or (source if source.is_dir() else source.parent) / "report.html", inputs=inputs)
    path = write_report(args.source, args.out, threshold=args.threshold, tests=not args.no_tests,
                        progress=False if args.quiet else None)
    print(f"report: {path}")
    return 0


def cmd_power(args) -> int:
    from .analysis.power import design_power
    from .design import case_counts
    from .spec import load_spec

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
        if c["detectable_difference"] is None:
            print(f"  {c['scope']} ({c['n_per_group']} per group): {c['note']}")
        else:
            print(f"  {c['scope']} ({c['n_per_group']} per group): detectable difference {c['detectable_difference']:.3f}")
    for c in result["cases_needed"]:
        print(f"  to detect {c['difference']:.2f}: {c['n_per_group']} cases per group")
    print(f"assumption: {result['assumption']}")
    return 0


def cmd_import(args) -> int:
    from .importers import import_assert, import_table

    common = {"primary": dict(args.primary) if args.primary else None, "ci": args.ci, "force": args.force}
    if args.primary and len(dict(args.primary)) < len(args.primary):
        raise InputError(f"--primary: an axis is given twice ({' '.join(f'{a}={o}' for a, o in args.primary)})")
    try:
        if args.source_kind == "assert":
            result = import_assert(args.run_dirs, args.out, axes=args.axis or None, scoring=args.scoring or "all_applicable",
                                   **common)
        else:
            result = import_table(args.file, system=args.system, item=args.item, label=args.label, axes=args.axis,
                                  positive=args.positive, negative=args.negative, out_dir=args.out, **common)
    except InputError as exc:
        translated = InputError(_flag_names(str(exc)))
        translated.forceable = getattr(exc, "forceable", False)
        raise translated from None
    for warning in result.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    v = result.verdicts
    missing = int((v["reason"] == "missing label").sum()) if "reason" in v.columns else 0
    excluded = f" ({missing} with a missing label, excluded)" if missing else ""
    primary = result.manifest.get("primary")
    print(f"imported {len(v)} verdicts{excluded}: {v['universe_id'].nunique()} universes x {v['system'].nunique()} systems "
          f"(axes: {', '.join(result.axes) or 'none'}) into {result.out_dir}; "
          f"primary: {primary if primary else 'none declared'}")
    return 0


# Library messages name roles ("the label column", "primary: "); the command line names the flags.
_FLAGS = {
    "the system column": "--system", "the item column": "--item", "the label column": "--label",
    "an axis column": "an --axis column", "the positive value": "--positive", "the negative values": "--negative",
}
_FLAG_PREFIXES = {"primary: ": "--primary: ", "ci: ": "--ci: ", "axis ": "--axis ", "axes: ": "--axis: "}


def _flag_names(message: str) -> str:
    for role, flag in _FLAGS.items():
        message = message.replace(role, flag)
    for role, flag in _FLAG_PREFIXES.items():
        if message.startswith(role):
            message = flag + message[len(role):]
    return message


def _store_of(args) -> Path:
    """The store ``store stats|gc`` acts on, by the same rule as ``run``."""
    from .store import default_store_path

    if args.store is not None:
        return default_store_path(None, args.store)
    places = args.specs if args.store_command == "gc" else [args.where] if args.where is not None else []
    found = set()
    for place in places:
        manifest = place / "manifest.json"
        if place.is_dir() and manifest.is_file():
            try:
                found.add(Path(json.loads(manifest.read_text(encoding="utf-8"))["store"]))
            except (OSError, ValueError, KeyError, TypeError):
                raise InputError(f"{manifest}: store: expected the path of the run's store") from None
        elif not place.is_file():
            raise InputError(f"{place}: expected a spec file or a run directory with a manifest.json")
        else:
            found.add(default_store_path(place))
    if len(found) > 1:
        raise InputError(f"these specs keep their stores in different places ({', '.join(sorted(map(str, found)))}); "
                         "expected one store: pass --store")
    return found.pop() if found else default_store_path(None)


def cmd_store(args) -> int:
    from .store import Store, check_store_path

    store = Store(check_store_path(_store_of(args), write=args.store_command == "gc"))
    if args.store_command == "stats":
        result = store.stats()
    else:
        from .spec import load_spec
        from .work import referenced_keys

        keep: dict[str, set[str]] = {}
        for path in args.specs:
            for stage, keys in referenced_keys(load_spec(path)).items():
                keep.setdefault(stage, set()).update(keys)
        result = store.gc(keep, dry_run=args.dry_run)
    if args.json:
        _print_json(result)
        return 0
    if args.store_command == "stats" and not store.root.exists():
        print(f"{store.root}: no store here yet (a run keeps its store beside its spec: "
              "multiverse store stats SPEC, or RUN_DIR)")
    elif args.store_command == "stats":
        print(f"{store.root}: {result['entries']} entries, {result['bytes'] / 1e6:.1f} MB")
        for stage, s in result["stages"].items():
            print(f"  {stage}: {s['entries']} entries, {s['bytes'] / 1e6:.1f} MB")
        if result["corrupt_files"]:
            print(f"  quarantined: {result['corrupt_files']} bad entries (in {store.root / 'quarantine'})")
    else:
        verb = "would remove" if args.dry_run else "removed"
        print(f"{verb} {result['removed']} entries ({result['bytes'] / 1e6:.1f} MB), {result['temp_files']} temp files "
              f"and {result['corrupt_files']} quarantined files; kept {result['kept_recent']} recent entries "
              f"({result['live_runs']} live runs)")
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


def _one_line_warning(message, category, filename, lineno, line=None) -> str:
    # A warning (say, a bad store entry moved to quarantine) is one line for the user,
    # not a source location and a quoted line of multiverse's code.
    return f"warning: {message}\n"


def main(argv: list[str] | None = None) -> int:
    import warnings

    warnings.formatwarning = _one_line_warning
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
        message = str(exc)
        if getattr(exc, "forceable", False):
            message += "; pass --force to write there anyway"
        print(f"error: {_one_line(message)}", file=sys.stderr)
        return 2
    except MultiverseError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt as exc:
        # RunInterrupted (first signal, after the grace) says what was abandoned; a bare
        # KeyboardInterrupt is the second signal, which stops at once.
        how = str(exc) or "stopped at once"
        print(f"interrupted: {how}; finished units are kept in the store, rerun to resume", file=sys.stderr)
        if argv is None:
            # The process's own command: leave now. Calls in flight are abandoned (their
            # claims are released), and the interpreter would otherwise wait for
            # litellm's logging threads to drain before exiting.
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(130)
        return 130
    except BrokenPipeError:
        # `multiverse expand ... | head` closes stdout early: not an error.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except (OSError, RecursionError, MemoryError) as exc:
        # The file system or the machine refused (a full disk, a folder that vanished): one line, never a traceback.
        where = f"{exc.filename}: " if getattr(exc, "filename", None) else ""
        detail = getattr(exc, "strerror", None) or type(exc).__name__
        print(f"error: {where}{_one_line(str(detail))}", file=sys.stderr)
        return 1


def _one_line(text: str) -> str:
    return " ".join(text.split())


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
