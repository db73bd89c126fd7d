"""The commands that read a spec: validate, expand, plan, schema, draft, run, demo and power.

Each parses nothing itself (``_parser`` did), calls the public API
(``multiverse.load_spec``, ``expand``, ``plan``, ``draft``, ``run``) and
prints what it returned.
"""

from __future__ import annotations

import json
import sys
from argparse import Namespace
from typing import TYPE_CHECKING, Any

from multiverse.core import FAILED_STATUSES

from ._output import print_json, print_table, say

if TYPE_CHECKING:
    from multiverse.results import HumanPower
    from multiverse.tables import StageCounts

__all__ = ["cmd_demo", "cmd_draft", "cmd_expand", "cmd_plan", "cmd_power", "cmd_run", "cmd_schema", "cmd_validate"]


def cmd_validate(args: Namespace) -> int:
    from .. import validate

    checked = validate(args.spec)
    note = "" if checked.primary is not None else "; no primary universe declared"
    say(f"{args.spec}: ok: {len(checked.universes)} universes over {len(checked.spec.axes)} axes, "
        f"{len(checked.spec.systems)} systems{note}")
    for warning in checked.warnings:
        say(f"warning: {warning}", file=sys.stderr)
    return 0


def cmd_expand(args: Namespace) -> int:
    from .. import expand, load_spec

    if args.count:
        return _print_count(args)
    spec = load_spec(args.spec)
    universes = expand(spec)
    axes = list(spec.axes)
    if args.format == "json":
        doc = [{"id": u.id, "label": u.label, "axes": dict(u.options), "primary": u.is_primary} for u in universes]
        print(json.dumps(doc, indent=2))
    elif args.format == "csv":
        import csv

        from multiverse.core import safe_cell

        writer = csv.writer(sys.stdout, lineterminator="\n")
        writer.writerow([safe_cell(c) for c in ["id", "label", *axes, "primary"]])
        for u in universes:
            writer.writerow([safe_cell(c) for c in [u.id, u.label, *(u.options[a] for a in axes), u.is_primary]])
    else:
        rows = [["id", *axes, "primary"]] + [[u.id, *(u.options[a] for a in axes), "yes" if u.is_primary else ""]
                                             for u in universes]
        print_table(rows)
        say()
        say(f"{len(universes)} universes")
    return 0


def _print_count(args: Namespace) -> int:
    """How many universes the spec's grid makes: counted, never listed, so it works on any size."""
    from .. import count_universes

    count = count_universes(args.spec)
    doc = count.to_dict()
    if args.format == "json":
        print(json.dumps(doc, indent=2))
        return 0
    if args.format == "csv":
        say(",".join(doc))
        say(",".join("" if v is None else str(v).lower() if isinstance(v, bool) else str(v) for v in doc.values()))
        return 0
    say(count.sentence())
    return 0


def cmd_plan(args: Namespace) -> int:
    from .. import load_spec, plan

    spec = load_spec(args.spec)

    result = plan(spec, store=args.store, jobs=args.jobs)
    if args.json:
        print_json(result.as_dict())
        return 0
    say(f"{len(result.universes)} universes, {len(spec.systems)} systems")
    say(f"store: {result.store}" if result.store else "store: not read (the grid is counted, not listed)")
    rows = [["axis", "stage it touches", "options"]]
    rows += [[a, s, ", ".join(spec.axes[a])] for a, s in result.axis_stages.items()]
    print_table(rows)
    say()
    rows = [["stage", "unique work", "stored", "failed", "blocked", "to compute", "calls to make", "est. cost (USD)"]]
    for name, stage in result.stages.items():
        # None: a grid counted, not listed, whose store was not read (see the notes).
        counts = (stage.units, stage.stored, stage.failed, stage.blocked, stage.to_compute, stage.calls_to_make)
        rows.append([name, *("?" if n is None else str(n) for n in counts), f"{stage.cost:.4f}"])
    print_table(rows)
    say("unique work = stored + failed + blocked + to compute (work units; failed ones are stored results, "
          "blocked ones wait on a failed unit and are never run)")
    for name, stage in result.stages.items():
        for what, reasons in (("failed", stage.failures), ("blocked", stage.blocked_by)):
            if reasons:
                say(f"  {name} {what}: {', '.join(f'{k} {v}' for k, v in reasons.items())}")
    if result.notes:
        say()
        for note in result.notes:
            say(f"note: {note}")
    return 0


def cmd_schema(args: Namespace) -> int:
    from ..spec import spec_schema  # the facade of the spec room

    print(json.dumps(spec_schema(), indent=2))
    return 0


def cmd_draft(args: Namespace) -> int:
    from .. import draft

    # The path, not a loaded spec: the rubric or cases file the spec names may be what the draft writes.
    written = draft(args.spec, store=args.store, rubric=args.rubric, force=args.force, progress=None)
    for path in written:
        say(f"wrote {path}")
    return 0


def _run_and_say(spec: Any, args: Namespace, out: Any) -> Any:
    from .. import run

    result = run(
        spec, out=out, store=args.store, jobs=args.jobs, budget=args.budget, progress=False if args.quiet else None,
        backend=getattr(args, "backend", "local"), scheduler=getattr(args, "scheduler", None), force=args.force,
        **({"max_units": args.max_units} if getattr(args, "max_units", None) is not None else {}),
    )
    m = result.manifest
    assert m is not None  # a run always has its manifest
    say(f"{len(m.universes)} universes x {len(spec.systems)} systems in {m.seconds:.1f} s")
    say("  work units per stage (units = computed + stored + failed + blocked):")
    for stage, counts in m.stages.items():
        if stage != "score":
            say(f"  {stage:<8} {_outcome_line(counts)}; {counts.calls} model calls made")
    statuses = ", ".join(f"{v} {k}" for k, v in m.statuses.items() if v)
    say(f"  verdicts: {sum(m.statuses.values())} ({statuses})")
    from multiverse.analysis import counted_unparsed

    counted = counted_unparsed(result.verdicts)
    if counted:
        # Their status is ok (every analysis counts them alike), but the judge named no verdict in them.
        say("  of the ok verdicts, unparsed replies counted by scoring.unparsed: "
            + ", ".join(f"{n} {'against the system' if policy == 'against' else 'as ties'}" for policy, n in counted.items()))
    failed = sum(m.statuses.get(s, 0) for s in FAILED_STATUSES)
    if failed and m.simulated:
        say(f"  note: the simulated world fails on purpose (its users and judges have declared failure rates), "
              f"so some of these {failed} failures are injected, not faults of the run")
    if m.cost:
        say(f"  cost: ${m.cost:.4f}, {m.tokens} tokens")
    say(f"store:   {m.store}")
    say(f"results: {result.out_dir}/ (verdicts, criteria, rates as .parquet and .csv; transcripts.jsonl; manifest.json)")
    return result


def _outcome_line(counts: StageCounts) -> str:
    """``12 units: 8 computed, 2 stored, 1 failed (not_found 1), 1 blocked (rollout_failed 1)``."""

    def by_reason(reasons: dict[str, Any]) -> str:
        # Most frequent first (the manifest orders them); the rest counted, all listed in the manifest.
        shown = [f"{k} {v}" for k, v in list(reasons.items())[:3]]
        if len(reasons) > 3:
            shown.append(f"{len(reasons) - 3} other reasons {sum(list(reasons.values())[3:])}")
        return f" ({', '.join(shown)})" if reasons else ""

    return (f"{counts.units} units: {counts.computed} computed, {counts.stored} stored, "
            f"{counts.failed} failed{by_reason(counts.failures)}, "
            f"{counts.blocked} blocked{by_reason(counts.blocked_by)}")


def cmd_run(args: Namespace) -> int:
    from .. import load_spec

    # run checks its folder (--out, else runs/<spec name>) before anything else.
    _run_and_say(load_spec(args.spec), args, args.out)
    return 0


def cmd_demo(args: Namespace) -> int:
    from importlib.resources import as_file, files

    from multiverse.store import default_store_path

    from .. import load_spec
    from .. import report as mv_report

    with as_file(files("multiverse.examples") / "demo.yaml") as path:
        spec = load_spec(path)
    # The spec lives inside the package: "beside the spec" would be site-packages, so the
    # demo's store follows the rule for a spec without a file of its own.
    args.store = default_store_path(None, args.store)
    # The run checks its folder too, but the demo's report file and first line come before it.
    from multiverse.engine import check_run_places

    check_run_places(spec, args.out, args.store, force=args.force)
    from multiverse.tables import check_output_file

    check_output_file(args.out / "report.html")
    say("multiverse demo: a SIMULATED audit (built-in offline world; no model is called over the network)")
    result = _run_and_say(spec, args, args.out)
    report = mv_report(result, result.out_dir / "report.html", progress=False if args.quiet else None)
    say(f"report:  {report}")
    return 0


def cmd_power(args: Namespace) -> int:
    from .. import load_spec, power

    result = power(load_spec(args.spec), baseline_rate=args.baseline, alpha=args.alpha, power=args.power,
                        human=args.human)
    if args.json:
        print_json(result.to_dict())
        return 0
    document = result.document
    cases = document.comparisons[0].n_per_group
    say(f"{cases} cases per system per universe; baseline rate {args.baseline}, alpha {args.alpha}, power {args.power}")
    for c in document.comparisons:
        if c.detectable_difference is None:
            say(f"  {c.scope} ({c.n_per_group} per group): {c.note}")
        else:
            ways = "; ".join(f"{way} {d:.3f} (to {args.baseline - d if way == 'lower' else args.baseline + d:.3f})"
                             if d is not None else f"{way}: none before the rate leaves [0, 1]"
                             for way, d in c.detectable.items())
            say(f"  {c.scope} ({c.n_per_group} per group): detectable difference {ways}")
    for need in document.cases_needed:
        say(f"  to detect {need.difference:.2f} {need.direction}: {need.n_per_group} cases per group")
    say(f"assumption: {document.assumption}")
    if document.human is not None:
        _print_human_power(document.human)
    return 0


def _print_human_power(human: HumanPower) -> None:
    say(f"with {human.labels} human labels per system (of {human.transcripts} transcripts), "
          f"{1 - human.alpha:.0%} interval widths at a human rate of {human.baseline_rate}:")
    rows = [["judge (sensitivity, specificity)", "correlation", "humans only", "anchored", "as good as labels alone"]]
    for j in human.judges:
        effective = "all" if j.effective_labels is None else f"{j.effective_labels:.0f}"
        rows.append([f"{j.sensitivity:.2f}, {j.specificity:.2f}", f"{j.correlation:.2f}",
                     f"{j.human_width:.3f}", f"{j.anchored_width:.3f}", effective])
    print_table(rows)
    say(f"assumption: {human.assumption}")
