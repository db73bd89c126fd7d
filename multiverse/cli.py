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
        print(json.dumps(result, indent=2))
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


def _run_and_say(spec, args, out) -> "object":
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
    try:
        from .report import write_report
    except ImportError:  # the report module arrives with the analyses
        return 0
    report = write_report(result.out_dir, result.out_dir / "report.html")
    print(f"report:  {report}")
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
