"""The release gate's commands: ``check`` (claims decided on a run, the exit code the gate) and ``diff``."""

from __future__ import annotations

from argparse import Namespace
from typing import TYPE_CHECKING, Any

from ..core import rate_name
from ._output import number, print_json, print_table, save_figure, say

if TYPE_CHECKING:
    from ..gate import CheckResult, Diff

__all__ = ["cmd_check", "cmd_diff"]


def _estimate(low: float | None, high: float | None, kind: str) -> str:
    if low is None:
        return "n/a"
    # A rank is a place (1 = the highest rate), not a rate.
    shown = (lambda v: f"rank {v:.0f}") if kind == "rank" else number
    return shown(low) if high is None or abs(high - low) < 5e-4 else f"{shown(low)} .. {shown(high)}"


def _detects(o: Any) -> str:
    """The smallest effect its rule's side detects at 80% power (rate points from the bound), or why none."""
    found = o.detectable
    if found is None:
        return "-"
    value = found.to_fail if o.rule == "not_refuted" else found.to_hold
    return "none" if value is None else number(value)


def _p(o: Any) -> str:
    """The p-value of the side that decides: held's, or failed's when the claim failed or can only fail."""
    side_fail = o.status == "failed" or (o.rule == "not_refuted" and o.status != "held")
    return f"{o.p_fail:.3g} (fail)" if side_fail else f"{o.p:.3g}"


def cmd_check(args: Namespace) -> int:
    import sys

    from .. import check
    from ..gate import write_junit
    from ..tables import check_output_file

    if args.allow_undecided:
        say("error: --allow-undecided was removed: which claims pass unless the data refute them is the claims "
            "file's choice, made before the run; write rule: not_refuted on those claims (or at the top of the "
            "file)", file=sys.stderr)
        return 2
    if args.junit is not None:
        check_output_file(args.junit, inputs=[args.claims, args.source])  # before anything is read or computed
    result: CheckResult = check(args.source, args.claims, alpha=args.alpha)
    if args.junit is not None:
        write_junit(result, args.junit)
    passed = result.passed()
    for warning in result.warnings:
        say(f"warning: {warning}", file=sys.stderr)
    if args.json:
        print_json({**result.to_dict(), "passed": passed})
        return 0 if passed else 1
    rows = [["claim", "rule", "status", "p", "estimate", "universes", "worst universe", "detects (80%)"]]
    for o in result.outcomes:
        worst = o.worst or {}
        shown = "" if o.n_universes == 1 else f"{worst.get('label', '')} ({number(worst.get('estimate'))})"
        rows.append([o.claim.id, o.rule.replace("_", " "), o.status.replace("_", " ").upper(),
                     _p(o),
                     _estimate(o.estimate_low, o.estimate_high, o.claim.kind), f"{o.n_needed} of {o.n_universes}",
                     shown, _detects(o)])
    print_table(rows)
    counts = result.counts
    say(f"{counts['held']} held, {counts['failed']} failed, {counts['undecided']} undecided, "
        f"{counts['not_refuted']} not refuted (alpha {result.alpha:g}, Holm across the {len(result.outcomes)} claims)")
    for o in result.outcomes:
        say(f"  {o.claim.id}: {o.claim.statement}")
        for note in o.notes:
            say(f"    note: {note}")
    for note in result.notes:
        say(f"note: {note}")
    if args.junit is not None:
        say(f"junit: {args.junit}")
    say("gate: " + ("passed" if passed else "not passed"))
    return 0 if passed else 1


def cmd_diff(args: Namespace) -> int:
    from .. import diff

    result: Diff = diff(args.baseline, args.candidate, boot=args.boot, seed=args.seed, rate=args.rate)
    if args.figure:
        save_figure(result.figure(), args.figure)
    if args.json:
        print_json(result.to_dict())
        return 0
    name = rate_name(result.rate_direction)
    say(f"candidate {result.candidate} against baseline {result.baseline}: {name}(candidate) - {name}(baseline), "
        "paired on shared cases")
    rows = [["system", "universes", "min", "median", "max", "CI below 0", "CI above 0", "p worse (Holm)"]]
    for _, s in result.summary(as_read=True).iterrows():
        rows.append([s["system"], str(s["universes"]), number(s["min"]), number(s["median"]), number(s["max"]),
                     str(s["below_0"]), str(s["above_0"]), f"{s['p_worse']:.3g}" + ("  WORSE" if s["worse"] else "")])
    print_table(rows)
    if result.multiplicity:
        say(f"  adjusted p: {result.multiplicity.family}")
    for note in result.notes:
        say(f"note: {note}")
    if args.figure:
        say(f"figure: {args.figure}")
    return 0
