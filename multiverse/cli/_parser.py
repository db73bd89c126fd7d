"""The command line's flags: one subcommand per API entry point, each flag checked as it is parsed.

Flag values that are numbers are checked by argparse types (``count``,
``rate``, ``budget``), so a bad value is refused with argparse's one line
before any command runs.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from multiverse.core import MAX_UNITS

from ._values import (
    MAX_BOOT,
    MAX_JOBS,
    budget,
    count,
    finite,
    primary_option,
    rate,
    rate_or_primary,
    scale,
    scorer_scale,
    size,
    store_place,
)

__all__ = ["MAX_BOOT", "MAX_JOBS", "build_parser"]

EPILOG = """\
typical use:
  multiverse validate specs/demo.yaml     check a spec, one line per problem
  multiverse plan specs/demo.yaml         what a run will cost, before it runs
  multiverse run specs/demo.yaml          run every universe, write runs/demo/
  multiverse report runs/demo             one HTML file: the explorer, then every figure
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
    p.add_argument("--count", action="store_true",
                   help="only count the universes (after exclusions and sample), without listing them: works on grids of any size")

    p = command(
        "plan",
        "show the store it reads, and per stage how many model calls a run needs, how many are stored, the estimated "
        "cost, and the wall time the rate limits and --jobs allow (warns when a store nearby holds this spec's work "
        "and its own does not)",
    )
    p.add_argument("spec", type=Path)
    p.add_argument("--store", type=store_place, help=_STORE_HELP)
    p.add_argument("--jobs", type=count(1, MAX_JOBS), default=8,
                   help="the run's --jobs, for the wall-time estimate (default: 8)")
    p.add_argument("--json", action="store_true", help="print one JSON document")

    command("schema", "print the JSON Schema of spec files (for editor completion and validation)")

    p = command(
        "draft",
        "draft the rubric (when the spec has none usable) and the test cases, as editable YAML: into the rubric and "
        "design.cases files the spec names when they are not written yet, else beside the spec",
    )
    p.add_argument("spec", type=Path)
    p.add_argument("--rubric", action="store_true", help="draft only a rubric from the concept (written to the rubric "
                   "file the spec names, else <spec>.rubric.yaml)")
    p.add_argument("--store", type=store_place, help=_STORE_HELP)
    p.add_argument("--force", action="store_true", help="overwrite existing draft files (checked before any model call)")

    p = command("run", "run every universe of a spec (only what is not stored yet) and write the run directory")
    _run_flags(p)
    p.add_argument("spec", type=Path)
    p.add_argument("--out", type=Path, help="run directory (default: runs/<spec name>)")
    p.add_argument("--force", action="store_true",
                   help="write into an --out folder that holds other files, an import or another spec's run "
                        "(inputs and the store are never overwritten)")
    p.add_argument("--backend", choices=("local", "processes", "dask"), default="local",
                   help="where model calls run: this process (default), one worker process per core "
                        "(for many concurrent calls: --jobs 32 and up), or a Dask cluster")
    p.add_argument("--max-units", type=count(1), metavar="N",
                   help=f"refuse a grid of more than N unique work units (case drafts, transcripts, judge calls), "
                        f"counted before anything runs (default: {MAX_UNITS:,})")
    p.add_argument("--scheduler", metavar="ADDRESS",
                   help="Dask scheduler address, e.g. tcp://10.0.0.5:8786 (default with --backend dask: a local cluster)")

    p = command(
        "demo",
        "run the built-in demo end to end on the simulated world (offline, no keys) and write its report",
    )
    p.add_argument("--out", type=Path, default=Path("runs/demo"), help="run directory (default: runs/demo)")
    p.add_argument("--force", action="store_true",
                   help="write into an --out folder that holds other files, an import or another spec's run")
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
        if name in ("curve", "ranking"):
            _rate_flag(p)
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
            p.add_argument("--threshold", type=rate_or_primary, metavar="T|primary",
                           help="joint test of each system's rate against this rate (between 0 and 1), "
                                "or 'primary': against its own rate in the primary universe (the default when the run declares "
                                "a primary, without --diff)")
            p.add_argument("--diff", nargs=2, metavar=("A", "B"), help="the curve of rate(A) - rate(B), with the sign-flip joint test")
            p.add_argument("--boot", type=count(1, MAX_BOOT), default=1000, help=f"resamples for the joint null, 1 to {MAX_BOOT:,} (default: 1000)")
            p.add_argument("--seed", type=count(0), default=0, help="random seed of the resampling, >= 0 (default: 0)")
        if name == "ranking":
            p.add_argument("--boot", type=count(0, MAX_BOOT), default=1000,
                           help=f"bootstrap resamples for rank intervals in the primary universe (with --method bt: "
                                f"in every universe), up to {MAX_BOOT:,} (0 to skip)")
            p.add_argument("--seed", type=count(0), default=0, help="random seed of the bootstrap, >= 0 (default: 0)")
            p.add_argument("--method", choices=("rate", "bt"), default="rate",
                           help="rank by each universe's rates (default) or by Bradley-Terry scores of pairwise verdicts")
            p.add_argument("--anchor", metavar="SYSTEM",
                           help="with --method bt: the system held at score 0 (default: the reference system, else "
                                "the scores of a universe average 0)")
            p.add_argument("--prior", type=finite, default=0.0, metavar="GAMES",
                           help="with --method bt: tied games added to every pair of systems that met, so that a "
                                "system that never loses still has a finite score (default: 0, refused then)")
        if name in ("agreement", "ranking"):
            p.add_argument("--by", metavar="FACTOR", help={
                "agreement": "one agreement per value of this axis, design factor or system, in one table",
                "ranking": "one ranking per value of this axis or design factor, in one table"}[name])
        if name in ("curve", "ranking"):
            p.add_argument("--human", type=Path, metavar="FILE", help={
                "curve": "human labels (see calibrate): draw the judge-raw and the human-anchored curves side by side",
                "ranking": "human labels (see calibrate): also say whether each universe's ranking survives anchoring",
            }[name])

    p = command("check", "decide a file of pre-registered claims on a run: held, failed, undecided or not refuted "
                "(exit 0 when none failed and none is undecided, 1 otherwise)")
    p.add_argument("source", type=Path, metavar="RUN_DIR_OR_TABLE")
    p.add_argument("--claims", type=Path, metavar="FILE", required=True,
                   help="the claims YAML file (each claim decided by its rule: shown, or not_refuted)")
    p.add_argument("--json", action="store_true", help="print one JSON document and nothing else")
    p.add_argument("--junit", type=Path, metavar="FILE", help="write JUnit XML, one test case per claim")
    # Removed: which claims may pass unshown is the claims file's rule, written before the run (refused with a pointer).
    p.add_argument("--allow-undecided", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--alpha", type=rate, metavar="A", help="level of the decisions (default: the file's alpha, else 0.05)")

    p = command("diff", "compare two runs or imports of the same design: per universe and system, "
                "rate(candidate) - rate(baseline) on shared cases, and whether the candidate is worse")
    p.add_argument("baseline", type=Path, metavar="BASE")
    p.add_argument("candidate", type=Path, metavar="CANDIDATE")
    p.add_argument("--json", action="store_true", help="print one JSON document and nothing else")
    p.add_argument("--figure", type=Path, metavar="FILE", help="write the difference curves (.png, .svg or .pdf)")
    p.add_argument("--boot", type=count(1, MAX_BOOT), default=1000,
                   help=f"sign flips for the joint test, 1 to {MAX_BOOT:,} (default: 1000)")
    p.add_argument("--seed", type=count(0), default=0, help="random seed of the sign flips, >= 0 (default: 0)")
    _rate_flag(p)

    p = command("report", "write one self-contained HTML report of a run, an import, or a verdicts table: "
                "the interactive explorer (curve, universes, transcripts, judges' reasons), then every figure")
    p.add_argument("source", type=Path, metavar="RUN_DIR_OR_TABLE")
    p.add_argument("--out", type=Path, help="the HTML file (default: RUN_DIR/report.html)")
    _rate_flag(p)
    nulls = p.add_mutually_exclusive_group()
    nulls.add_argument("--threshold", type=rate, metavar="T",
                       help="test every system's rate against T in every universe (default: against its own rate "
                            "in the primary universe)")
    nulls.add_argument("--no-tests", action="store_true",
                       help="leave out the joint tests: no grey bands, no p-values (faster)")
    p.add_argument("--human", type=Path, metavar="FILE",
                   help="human labels (see calibrate): add the section \"Anchored to people\"")
    p.add_argument("--baseline", type=Path, metavar="BASE",
                   help="an earlier run of the same design: add the section \"Compared with the baseline\" (as diff)")
    p.add_argument("--store", type=store_place, metavar="DIR",
                   help="the store that holds the transcripts, for a source without transcripts.jsonl (never "
                        "the store the folder's manifest names: a folder is untrusted)")
    p.add_argument("--quiet", action="store_true", help="no progress on stderr")

    p = command("label", "draw a uniform random sample of transcripts to label by hand: SHEET.csv and a blind SHEET.html")
    p.add_argument("source", type=Path, metavar="RUN_DIR_OR_TABLE", help="a run or import directory, or a verdicts table")
    p.add_argument("--n", type=count(1), required=True, help="transcripts per system from each rollout configuration")
    p.add_argument("--seed", type=count(0), default=0, help="random seed of the sample, >= 0 (default: 0)")
    p.add_argument("--out", type=Path, required=True, metavar="SHEET.csv",
                   help="the sheet to write; the labelling page goes beside it (SHEET.html)")
    p.add_argument("--force", action="store_true",
                   help="replace an existing sheet (it may hold labels someone typed in: they would be lost)")
    _rate_flag(p)
    p.add_argument("--blind-systems", action="store_true",
                   help="hide the systems' names on the labelling page too (the sheet keeps them)")

    p = command("calibrate", "anchor every universe x system rate to human labels (PPI++), and each judge's accuracy")
    p.add_argument("source", type=Path, metavar="RUN_DIR_OR_TABLE", help="a run or import directory, or a verdicts table")
    p.add_argument("--human", type=Path, required=True, metavar="FILE",
                   help="the labels: CSV or parquet with system, case_id, compliant, or score for a scored run "
                        "(and replicate or transcript_key)")
    p.add_argument("--alpha", type=rate, default=0.05, help="1 - the intervals' level, between 0 and 1 (default: 0.05)")
    p.add_argument("--json", action="store_true", help="print one JSON document and nothing else")
    p.add_argument("--figure", type=Path, metavar="FILE", help="write the figure (.png, .svg or .pdf by extension)")
    p.add_argument("--by", metavar="FACTOR",
                   help="one calibration per value of this axis, design factor or system (e.g. each judge's accuracy "
                        "per system), in one table")

    p = command("power", "detectable differences at the spec's planned cases, or cases needed for a difference")
    p.add_argument("spec", type=Path)
    p.add_argument("--baseline", type=rate, default=0.8, help="expected compliance rate, between 0 and 1 (default: 0.8)")
    p.add_argument("--alpha", type=rate, default=0.05, help="significance level, between 0 and 1 (default: 0.05)")
    p.add_argument("--power", type=rate, default=0.8, help="power, between 0 and 1 (default: 0.8)")
    p.add_argument("--human", type=count(1), metavar="N",
                   help="also: how much narrower human-anchored intervals get with N labels per system")
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
    q = imports.add_parser("table", help="any per-item label table (CSV, parquet or JSON Lines)",
                           description="Import a per-item label table: one row per system x item (x axis options).", formatter_class=_formatter)
    q.add_argument("file", type=Path)
    q.add_argument("--system", required=True, metavar="COL", help="column naming the system")
    q.add_argument("--item", required=True, metavar="COL", help="column naming the item (case)")
    q.add_argument("--label", metavar="COL", help="column with the label: boolean, 0/1, or a category (or --score)")
    q.add_argument("--score", metavar="COL", help="column with a score on --scale, instead of a label")
    q.add_argument("--scale", type=scale, metavar="LOW:HIGH", help="with --score: the ends of the score's scale")
    q.add_argument("--cut", action="append", type=finite, default=[], metavar="K",
                   help="with --score: add the scoring option 'at least K' beside the mean (repeatable)")
    q.add_argument("--reference", metavar="SYSTEM",
                   help="with --score: the reference system of a pairwise table (scores are preferences over it); "
                   "never ranked")
    q.add_argument("--verdict", metavar="COL", help="column with three-way verdicts A, tie or B (A: the transcript "
                   "shown first), read as preferences over --reference on 0:1 (instead of --label or --score)")
    q.add_argument("--order", metavar="COL", help="column holding the order of a pairwise comparison: ab (the row's "
                   "system shown first) or ba; an axis, and every pair must have both")
    q.add_argument("--combine", action="append", default=[], choices=("agree", "mean", "both"),
                   help="with --order: add an option of the order axis combining both games (agree: the verdict both "
                   "give, else a tie; mean: the mean preference; both: labels compliant in both orders) (repeatable)")
    q.add_argument("--axis", action="append", default=[], metavar="COL", help="column holding an axis option (repeatable)")
    q.add_argument("--factor", action="append", default=[], metavar="COL",
                   help="column holding a design factor: rates per level, and a confound check of agreement (repeatable)")
    q.add_argument("--positive", metavar="VALUE", help="the label value that means compliant (for category labels)")
    q.add_argument("--negative", nargs="+", metavar="VALUE",
                   help="with --positive: the label value(s) that mean non-compliant; any other value is refused")
    q.add_argument("--no-grade", action="append", default=[], metavar="VALUE",
                   help="a label (or score) value meaning the grader answered without a grade: judge_failed, "
                        "counted as --unparsed says (repeatable)")
    _table_columns(q)
    q.add_argument("--out", type=Path, required=True, help="the import directory to write")
    _import_flags(q)

    _native_importers(imports)

    p = command("store", "inspect or clean the store")
    stores = p.add_subparsers(dest="store_command", metavar="ACTION", parser_class=_Parser, required=True)
    q = stores.add_parser("stats", help="entries and bytes per stage", formatter_class=_formatter,
                          description="Entries and bytes per stage of the store a spec or run directory uses.")
    q.add_argument("where", type=Path, nargs="?", metavar="SPEC_OR_RUN_DIR",
                   help="find the store of this spec (or of the run directory's manifest)")
    q.add_argument("--store", type=store_place, help="store directory (default: $MULTIVERSE_STORE, else .multiverse/store "
                   "beside SPEC, else ./.multiverse/store)")
    q.add_argument("--json", action="store_true")
    q = stores.add_parser("gc", help="remove entries that the given specs no longer reference", formatter_class=_formatter,
                          description="Remove entries no given spec references. Entries written in the last hour or "
                          "since a live run on the store started are always kept.")
    q.add_argument("specs", type=Path, nargs="+", metavar="SPEC", help="every spec whose work should be kept")
    q.add_argument("--store", type=store_place, help="store directory (default: $MULTIVERSE_STORE, else .multiverse/store "
                   "beside the specs)")
    q.add_argument("--dry-run", action="store_true", help="only say what would be removed")
    q.add_argument("--json", action="store_true")
    q = stores.add_parser("migrate", help="move the entry files of a store from before the database into it",
                          formatter_class=_formatter,
                          description="Move every entry file of a store written before the database (one JSON file "
                          "per entry) into the store's database, and remove each file once its row is committed. "
                          "Such a store is also read as it is; migrating makes it one file. Killed, it is "
                          "finished by running it again.")
    q.add_argument("where", type=Path, nargs="?", metavar="SPEC_OR_RUN_DIR",
                   help="find the store of this spec (or of the run directory's manifest)")
    q.add_argument("--store", type=store_place, help="store directory (default: $MULTIVERSE_STORE, else "
                   ".multiverse/store beside SPEC, else ./.multiverse/store)")
    q.add_argument("--json", action="store_true")

    return parser


def _rate_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument("--rate", choices=("compliance", "violation"),
                   help="read rates as the share of compliant transcripts or of violating ones (1 - compliance), in "
                        "every figure, table and page, and --threshold where there is one (default: the spec's "
                        "report.rate, or an "
                        "import's --rate, else compliance; --json stays in compliance terms)")


def _native_importers(imports: argparse._SubParsersAction[Any]) -> None:
    q = imports.add_parser("inspect", help="Inspect AI logs (.eval, .json or an eval-set folder): each judge, scorer "
                           "and reducer a universe", description="Import Inspect AI logs, read with Inspect's own log "
                           "API (needs the inspect extra). The system is eval.model; every scorer (and key of a dict "
                           "scorer) and every epoch reducer is an option; the judge is the model a scorer's scoring "
                           "events called (a scorer that calls none has no judge).", formatter_class=_formatter)
    q.add_argument("logs", type=Path, nargs="+", metavar="LOG", help="a log, or an eval-set folder of logs")
    q.add_argument("--out", type=Path, required=True, help="the import directory to write")
    q.add_argument("--scorer", action="append", metavar="NAME[:KEY]", help="import only this scorer (KEY: one key of a "
                   "scorer whose values are objects); repeatable; default: every scorer")
    q.add_argument("--scale", action="append", type=scorer_scale, default=[], metavar="[SCORER=]LOW:HIGH",
                   help="the range of a scorer's scores outside 0 to 1 (e.g. rating=1:5); without SCORER, of every "
                   "scorer; repeatable")
    q.add_argument("--system-role", metavar="ROLE", help="take the system from this model role instead of eval.model")
    q.add_argument("--judge-role", default="grader", metavar="ROLE", help="the grader's model role (default: grader)")
    q.add_argument("--partial", type=float, default=0.5, metavar="SCORE", help="the score of a P (default: 0.5)")
    q.add_argument("--factor", action="append", default=[], metavar="KEY",
                   help="sample metadata key kept as a design factor: rates per level, not a universe (repeatable)")
    _import_flags(q)
    q = imports.add_parser("promptfoo", help="promptfoo result files: each grader a universe, assertions criteria",
                           description="Import promptfoo eval results (promptfoo eval -o results.json). Prompts x "
                           "providers are the systems; each assertion is a criterion; the grader comes from the "
                           "assertion's provider, the test's options or defaultTest.", formatter_class=_formatter)
    q.add_argument("results_files", type=Path, nargs="+", metavar="RESULTS_JSON")
    q.add_argument("--out", type=Path, required=True, help="the import directory to write")
    q.add_argument("--factor", action="append", default=[], metavar="VAR",
                   help="a test variable kept as a design factor: rates per level, not a universe (repeatable)")
    _import_flags(q)
    q = imports.add_parser("lm-eval", help="lm-evaluation-harness --log_samples output: each filter and metric a "
                           "universe, tasks a factor", formatter_class=_formatter,
                           description="Import lm-eval output (lm_eval run ... --log_samples --output_path DIR): each "
                           "results_*.json with its samples_<task>_*.jsonl. The model is the system, each sample's "
                           "metric value a 0-1 score; per-task rates are lm-eval's metric and standard error.")
    q.add_argument("sources", type=Path, nargs="+", metavar="RESULTS_JSON_OR_DIR")
    q.add_argument("--out", type=Path, required=True, help="the import directory to write")
    q.add_argument("--factor", action="append", default=[], metavar="FIELD",
                   help="a document field kept as a design factor (task always is one; repeatable)")
    _import_flags(q)


def _table_columns(q: argparse.ArgumentParser) -> None:
    q.add_argument("--replicate", metavar="COL", help="column numbering repeated runs of an item (epochs): "
                   "intervals cluster by item")
    q.add_argument("--transcript", metavar="COL", help="column with the system's answer or its id: judges are paired "
                   "only on the same transcript (without it, on system, item and replicate)")
    q.add_argument("--rationale", metavar="COL", help="column with the judge's reason (criteria table; the explorer "
                   "shows it)")


def _import_flags(q: argparse.ArgumentParser) -> None:
    # extend, not store: `--primary a=x --primary b=y` is the same universe as `--primary a=x b=y`.
    q.add_argument("--primary", nargs="+", action="extend", type=primary_option, metavar="AXIS=OPTION",
                   help="the pre-registered universe, one option per axis: AXIS=OPTION... or the flag repeated "
                        "(default: none is primary)")
    q.add_argument("--ci", default="wilson", metavar="METHOD",
                   help="confidence interval method of the rates: wilson (default) or bootstrap (clustered by case)")
    q.add_argument("--rate", choices=("compliance", "violation"), default="compliance",
                   help="which way the import's figures, tables and pages read a rate, as a spec's report.rate "
                        "(default: compliance; the tables on disk stay in compliance terms)")
    q.add_argument("--unparsed", action="append", choices=("exclude", "against", "tie"), metavar="POLICY",
                   help="how a grader reply with no grade counts, as a spec's scoring.unparsed: exclude (default), "
                        "against (a fail, the lowest score) or tie (pairwise); repeated: an 'unparsed' axis")
    q.add_argument("--force", action="store_true", help="write into an --out folder that holds other files or a run")
    q.add_argument("--max-bytes", type=size, metavar="SIZE", help="bytes the import may read (all inputs, uncompressed) "
                   "and write as transcripts, e.g. 512M (default: 256M; over it an import may need more than 2 GB)")
    q.add_argument("--max-rows", type=count(1), metavar="N", help="rows the import may read (default: 300,000)")
    q.add_argument("--max-transcript-bytes", type=size, metavar="SIZE",
                   help="bytes of one transcript as written, at most 64M (default: 16M)")
    q.add_argument("--merge-look-alikes", action="store_true", help="read names that look alike (Cyrillic а for Latin "
                   "a) as one name instead of refusing them: systems, judges, options, factor levels, cases, "
                   "criteria; every import")


_STORE_HELP = ("store directory, or a postgresql:// URL for workers on many machines (default: $MULTIVERSE_STORE, "
               "else .multiverse/store beside the spec)")


def _run_flags(p: argparse.ArgumentParser, store_help: str = _STORE_HELP) -> None:
    p.add_argument("--store", type=store_place, help=store_help)
    p.add_argument("--jobs", type=count(1, MAX_JOBS), default=8, help=f"concurrent model calls per provider, 1 to {MAX_JOBS} (default: 8)")
    p.add_argument("--budget", type=budget, help="stop scheduling calls before spending more than this many USD")
    p.add_argument("--quiet", action="store_true", help="no progress bars")


def _version() -> str:
    from .. import __version__

    return __version__
