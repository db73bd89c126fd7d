"""The commands that analyse a run, an import or a verdicts table: curve, agreement, ranking, variance, report.

With ``--human FILE``, ``curve`` and ``ranking`` add the human-anchored view
(``Results.anchored_curve``, ``Results.anchored_ranking``) under the key
``anchored`` of their JSON and after their text; the curve's figure is then
the judge-raw and the anchored curves side by side.

Each loads the source with ``multiverse.load_run``, asks the
:class:`~multiverse.results._results.Results` for the analysis, and prints it: the
document as JSON with ``--json``, else a short text summary read from its
typed model (``Analysis.document``); ``--figure`` writes the analysis's figure.
"""

from __future__ import annotations

from argparse import Namespace
from typing import TYPE_CHECKING, Any

from multiverse.core import orient, orient_interval, rank_one, rate_name

from ._anchoring import print_anchored_curve, print_anchored_ranking, universe_labels
from ._output import interval, number, print_json, print_table, save_figure, say, say_rates_note
from ._score_agreement import print_order_consistency, print_score_agreement, print_verdict_agreement

if TYPE_CHECKING:
    # The facade imports its names lazily, so its load_run reads as untyped: annotated here, the typed
    # documents below are checked attribute by attribute.
    from ..results import RankingDocument, Results

__all__ = ["cmd_agreement", "cmd_curve", "cmd_ranking", "cmd_report", "cmd_variance"]


def _figure(analysis: Any, args: Namespace, **options: Any) -> None:
    if args.figure:
        save_figure(analysis.figure(**options), args.figure)


def cmd_curve(args: Namespace) -> int:
    from .. import load_run

    results: Results = load_run(args.source).read_as(args.rate)
    read = results.rate_direction
    results.check_axes(args.axis)
    if args.human:
        results.calibrate(args.human)  # checks the labels before the joint tests' resampling
    threshold = _threshold(args, results, read)
    analysis = results.curve(systems=args.system, threshold=threshold, diff=tuple(args.diff) if args.diff else None,
                             boot=args.boot, seed=args.seed)
    anchored = results.anchored_curve(args.human, systems=args.system) if args.human else None
    _figure(anchored or analysis, args, axes=args.axis)
    if args.json:
        print_json({**analysis.to_dict(), "anchored": anchored.to_dict()} if anchored else analysis.to_dict())
        return 0
    summary = analysis.document
    say(f"{summary.n_universes} universes")
    for system, s in summary.systems.items():
        say(_system_line(system, s, read))
    say(f"  intervals: {summary.ci}" + (f", level {summary.level:g}" if summary.level is not None else ""))
    if args.threshold is None and threshold == "primary":
        say("  joint test against each system's rate in the primary universe (the default; --threshold T sets another)")
    elif threshold is None and not args.diff:
        say("  no joint test: no primary universe is declared (--threshold T tests against a rate)")
    for test in summary.tests:
        st = test.statistics
        shown = [f"{label} {st[name].p:.3f} (Holm {st[name].p_holm:.3f})" for name, label in
                 (("median_effect", "median effect"), ("n_significant", "count significant"), ("stouffer_z", "Stouffer Z"))]
        null = test.null if read == "compliance" else _null_as_read(test, read)
        say(f"  joint test ({test.kind}, {null}): p = {'; '.join(shown)}")
        say(f"    null: {test.resampling}")
    if summary.multiplicity:
        say(f"  adjusted p: {summary.multiplicity.family}")
    if anchored:
        print_anchored_curve(anchored.document)
    for note in summary.notes + (anchored.notes if anchored else []):
        say(f"note: {note}")
    if args.figure:
        say(f"figure: {args.figure}")
    return 0


def _threshold(args: Namespace, results: Results, read: str) -> float | str | None:
    """What the CLI curve's joint test is against: ``--threshold``, read in the rates' direction, or by default
    each system's own rate in the primary universe, as the report and the API example test it (said in the output).
    --diff has its own test, the joint test of that curve, so it gets no default."""
    default = "primary" if results.primary is not None and not args.diff else None
    threshold = args.threshold if args.threshold is not None else default
    # --threshold is a rate as the rates are read; the analysis tests compliance (the flip is its own inverse).
    return orient(threshold, read) if isinstance(threshold, float) else threshold


def _system_line(system: str, s: Any, read: str) -> str:
    """One system's curve summary as read (core.orient): the lowest rate read is the flipped highest, and the
    primary universe's positions count from it."""
    from multiverse.analysis import position_words

    name = rate_name(read) if read != "compliance" else "rate"
    where = s.primary
    low, high = orient_interval(s.rate.min, s.rate.max, read)
    primary = ""
    if where is not None and where.rate is not None:
        first, last = where.position_low, where.position_high
        percentile = where.percentile
        if read != "compliance":  # counted from the other end, as core.orient_rates counts positions
            first, last, percentile = s.n_universes + 1 - last, s.n_universes + 1 - first, 100 - percentile
        primary = (f"; primary {orient(where.rate, read):.3f}, {position_words(first, last, s.n_universes)}, "
                   f"percentile {percentile:.0f}")
    return f"  {system}: {name} {low:.3f} .. {orient(s.rate.median, read):.3f} .. {high:.3f} (min .. median .. max){primary}"


def _null_as_read(test: Any, read: str) -> str:
    """A joint test's null in the words and numbers of the rates as read (``core.orient``)."""
    name = rate_name(read).replace(" ", "_")
    if test.kind == "rate" and test.threshold is not None:
        return f"{name}({test.systems[0]}) = {orient(test.threshold, read):g} in every universe"
    return f"{name}({test.systems[0]}) = {name}({test.systems[1]}) in every universe"


def cmd_agreement(args: Namespace) -> int:
    from .. import load_run

    results: Results = load_run(args.source)
    axis = args.axis or results.judge_axis()
    if args.by:
        if args.figure:
            from multiverse.errors import InputError

            raise InputError("--figure: expected agreement without --by", param="by")
        grouped = results.agreement(axis, by=args.by)
        if args.json:
            print_json(grouped.to_dict())
            return 0
        _print_grouped_agreement(grouped.document, axis)
        return 0
    analysis = results.agreement(axis)
    _figure(analysis, args)
    if args.json:
        print_json(analysis.to_dict())
        return 0
    result = analysis.document
    if result.scores is not None:
        print_score_agreement(result.scores)
        if result.verdicts is not None:
            print_verdict_agreement(result.verdicts)
        if result.orders is not None:
            print_order_consistency(result.orders)
        if not result.options:  # scores only, no compliance labels: the labels' part would be empty
            return _print_notes(result.notes)
    say(f"agreement across {axis} ({', '.join(map(str, result.options))}) on {result.n_units} units, paired on {result.paired_on}")
    rows: list[list[Any]] = [["a", "b", "n", "percent", "kappa", "AC1", "bias"]]
    for p in result.pairs:
        # A kappa on a handful of units reads like a finding; the mark says it is not one.
        mark = "!" if p.small_sample or p.degenerate else ""
        rows.append([p.a, p.b, f"{p.n}{mark}", number(p.percent), number(p.cohen_kappa) + mark,
                     number(p.gwet_ac1) + mark, number(p.bias)])
    print_table(rows)
    if any(p.small_sample or p.degenerate for p in result.pairs):
        say("! too few paired units (or a one-cell table) to read kappa and AC1: see the notes")
    small = 0 < result.n_units < 30
    say(f"Krippendorff's alpha: {number(result.krippendorff_alpha)}{'!' if small else ''}")
    for confound in result.confounded:
        # Shown apart from the notes: a confounded kappa is not agreement between the options at all.
        say(f"! confounded with {confound.column}: the options differ in it in {confound.share:.0%} of "
            f"paired units ({confound.n_units}), so kappa and AC1 mix the two (see the notes)")
    return _print_notes(result.notes)


def _print_grouped_agreement(grouped: Any, axis: str) -> int:
    """One table of every group's pairs of options (labels; and scores, where the options gave them), the group
    its first column."""
    say(f"agreement across {axis} per {grouped.by}")
    rows: list[list[Any]] = [[grouped.by, "a", "b", "n", "percent", "kappa", "AC1", "bias", "alpha"]]
    scored: list[list[Any]] = [[grouped.by, "a", "b", "n", "kappa (linear)", "kappa (quadratic)", "exact", "ICC(2,1)",
                           "mean a - b", "alpha (interval)"]]
    for group in grouped.groups:
        result = group.document
        for p in result.pairs:
            mark = "!" if p.small_sample or p.degenerate else ""
            rows.append([group.group, p.a, p.b, f"{p.n}{mark}", number(p.percent), number(p.cohen_kappa) + mark,
                         number(p.gwet_ac1) + mark, number(p.bias), number(result.krippendorff_alpha)])
        for q in result.scores.pairs if result.scores is not None else []:
            scored.append([group.group, q.a, q.b, f"{q.n}{'!' if q.small_sample else ''}", number(q.kappa_linear),
                           number(q.kappa_quadratic), number(q.exact), number(q.icc2_1),
                           number(q.mean_difference.mean), number(result.scores.krippendorff_alpha_interval)])
    if len(scored) > 1:
        say("on the scores:")
        print_table(scored)
    if len(rows) > 1:
        print_table(rows)
    for group in grouped.groups:  # a pairwise scale's verdicts, each group on its own
        if group.document.verdicts is not None:
            say(f"{grouped.by}={group.group}:")
            print_verdict_agreement(group.document.verdicts)
    # Each order entry names its own group (the judge, and the --by value inside it): one table of them all.
    orders = [o for group in grouped.groups for o in group.document.orders or []]
    if orders:
        print_order_consistency(orders)
    return _print_notes(grouped.notes)


def _print_notes(notes: list[str]) -> int:
    for note in notes:
        say(f"note: {note}")
    return 0


def cmd_ranking(args: Namespace) -> int:
    from .. import load_run

    results: Results = load_run(args.source).read_as(args.rate)
    if args.method == "bt" or args.by:
        return _print_other_ranking(results, args)
    anchored = results.anchored_ranking(args.human) if args.human else None
    analysis = results.ranking(axes=args.axis, boot=args.boot, seed=args.seed)
    _figure(analysis, args)
    if args.json:
        print_json({**analysis.to_dict(), "anchored": anchored.to_dict()} if anchored else analysis.to_dict())
        return 0
    _print_ranking(analysis.document, results.rate_direction)
    if anchored:
        print_anchored_ranking(anchored.document)
        for note in anchored.notes:
            say(f"note: {note}")
    return 0


def _print_other_ranking(results: Results, args: Namespace) -> int:
    """A ranking by Bradley-Terry scores or per group (``--method bt``, ``--by``): one table, the group a column."""
    from multiverse.errors import InputError

    if args.human or args.figure:
        raise InputError(f"{'--human' if args.human else '--figure'}: expected a ranking of rates over all rows "
                         "(not with --method bt or --by)", param="human")
    if args.method != "bt" and (args.anchor or args.prior):
        raise InputError("--anchor and --prior: expected --method bt", param="method")
    analysis = results.ranking(axes=args.axis, boot=args.boot, method=args.method, anchor=args.anchor,
                               prior=args.prior, seed=args.seed, by=args.by)
    if args.json:
        print_json(analysis.to_dict())
        return 0
    document = analysis.document
    # (group value or None, its document, the first cells of its rows)
    parts = [(g.group, g.document, [g.group]) for g in document.groups] if args.by else [(None, document, [])]
    first = [args.by] if args.by else []
    if args.method == "bt":
        _print_bt_scores(parts, first, universe_labels(results))
    say(f"P(rank 1) over the universes{' of each group' if args.by else ''} and coverage:")
    rows: list[list[Any]] = [[*first, "system", "P(top)", "coverage"]]
    for _, result, cells in parts:
        stability = result.stability if args.method == "bt" else result
        for system, p in sorted(stability.p_top.items(), key=lambda kv: -kv[1]):
            rows.append([*cells, system, number(p, 2), number(stability.coverage[system], 2)])
    print_table(rows)
    for group, result, _ in parts:
        tau = (result.stability if args.method == "bt" else result).kendall_tau
        where = f"{args.by}={group}: " if group is not None else ""
        say(f"{where}Kendall's tau-b between universes: mean {number(tau.mean)} over {tau.n_pairs} pairs")
    return _print_notes(document.notes)


def _print_bt_scores(parts: list[Any], first: list[str], labels: dict[str, str]) -> None:
    """Each universe's Bradley-Terry scores with their intervals and ranks, one row per system; a universe by its
    label (options; ``*`` the primary), as the other tables name it."""
    head = parts[0][1]
    say(f"Bradley-Terry scores ({head.scale}; anchor {head.anchor or 'none: each universe averages 0'}), "
        f"{head.level:.0%} case-bootstrap intervals, {head.resamples} resamples:")
    rows: list[list[Any]] = [[*first, "universe", "system", "score", "interval", "rank", "rank interval", "P(top)"]]
    for _, result, cells in parts:
        for r in result.scores:
            rows.append([*cells, labels.get(r.universe_id, r.universe_id), r.system, number(r.score), interval([r.low, r.high]), r.rank,
                         interval([r.rank_low, r.rank_high]), number(r.p_top, 2)])
    print_table(rows)


def _as_read(difference: float | None, read: str) -> float | None:
    """A difference of two compliance rates as ``read`` reads it (``core.orient``); None stays None."""
    return None if difference is None else float(orient(difference, read, difference=True))


def _print_ranking(result: RankingDocument, read: str = "compliance") -> None:
    """The ranking in words; ``read``: which way its rates read (ranks stay 1 = the best system, worded by
    ``core.rank_one``; a pair's difference flips by ``core.orient``)."""
    unc = result.uncertainty
    adjacent, intervals = (unc.adjacent, unc.p_top) if unc else ([], {})
    if result.primary is None:
        say(f"{result.universes} universes; no primary universe is declared")
    else:
        say(f"{result.universes} universes; primary {result.primary} (top: {', '.join(map(str, result.primary_top))})")
    level = f"{unc.level:.0%} case-bootstrap interval, {unc.resamples} resamples" if unc else "no bootstrap"
    say(f"P(rank 1 = {rank_one(read)}) over all universes [{level}] and coverage (share of universes rating the "
        "system):")
    for system, p in sorted(result.p_top.items(), key=lambda kv: -kv[1]):
        say(f"  {system}: {p:.2f} {interval(intervals.get(system))}  coverage {result.coverage[system]:.2f}")
    from multiverse.analysis import separability

    for sentence in separability([row.model_dump() for row in adjacent]):
        say(f"  {sentence}")
    pairwise = result.pairwise
    pairs = pairwise.pairs
    if pairs:
        say(f"Paired tests in the primary universe ({rate_name(read)} of the first minus the second), "
            f"{pairwise.adjustment}-adjusted over {pairwise.family}:")
        shown = pairs
        if len(pairs) > 45:  # 10+ systems: the neighbours in the primary's order; the rest are in --json
            neighbours = {frozenset((r.a, r.b)) for r in adjacent}
            shown = [q for q in pairs if frozenset((q.a, q.b)) in neighbours]
            held = sum(1 for q in pairs if q.p_holm is not None and q.p_holm < 0.05)
            say(f"  {held} of {len(pairs)} pairs differ at Holm-adjusted p < 0.05; neighbours in the primary's "
                  "order below, every pair in --json")
        for q in shown:
            say(f"  {q.a} - {q.b}: {number(_as_read(q.difference, read))} on {q.n_cases} cases, p = {number(q.p, 4)}, Holm p = {number(q.p_holm, 4)}")
    tau, w = result.kendall_tau, result.kendall_w
    say(f"Kendall's tau-b between universes: mean {number(tau.mean)} over {tau.n_pairs} pairs; "
          f"Kendall's W {number(w.w)} ({w.universes} universes x {w.systems} systems, p = {number(w.p_value, 4)})")
    for row in tau.by_axis:
        say(f"  changing {row.axis}: mean tau {number(row.mean)} (min {number(row.min)}, {row.n_pairs} pairs)")
    if result.primary is None:
        say("no primary universe is declared: top flips are not reported")
    else:
        say(f"{len(result.flips)} universe(s) have a different top system than the primary "
              "(each with the smallest change from the primary that gives that top):")
    for flip in result.flips:
        changes = ", ".join(f"{a}={o}" for a, o in flip.changes.items())
        via = "" if flip.via_universe == flip.universe_id else f", as in {flip.via_universe}"
        say(f"  {flip.universe_id}: top {', '.join(map(str, flip.top))} when {changes} "
              f"({flip.n_axes_differ} of the axes differ{via})")
    if result.cuts:
        say("As the cut moves (universes that differ only in how scores are counted):")
        for sentence in result.cut_flips or ["the top system is the same at the mean and at every cut"]:
            say(f"  {sentence}")
    for note in result.notes:
        say(f"note: {note}")


def cmd_variance(args: Namespace) -> int:
    from .. import load_run

    results: Results = load_run(args.source)
    analysis = results.variance(axes=args.axis)
    _figure(analysis, args)
    if args.json:
        print_json(analysis.to_dict())
        return 0
    result = analysis.document
    noise = result.noise
    aliased = {a for group in result.aliasing.aliased for a in group}
    rows = [["axis", "main effect", "x system", "total"] + (["beyond noise", f"{noise.level:.0%} interval"] if noise else [])]
    for r in result.by_axis:
        mark = "!" if r.axis in aliased else ""  # an aliased axis's 0% is not "no effect"
        row = [r.axis + mark, number(r.main), number(r.interaction), number(r.total)]
        if noise:
            row += [number(r.beyond_noise), interval([r.low, r.high])]
        rows.append(row)
    residual = next((t for t in result.terms if t.term == "Residual"), None)
    if residual is not None:
        few = "!" if residual.df < 10 else ""
        rows.append([f"Residual ({residual.df:.0f} df){few}", "", "", number(residual.share)]
                    + ([number(residual.beyond_noise), interval([residual.low, residual.high])] if noise else []))
    print_table(rows)
    if aliased:
        say("! aliased with another axis: the grid cannot separate their effects (see the notes)")
    if noise:
        say(f"noise floor: {noise.noise_floor:.1%} of the variance in rates is what resampling the cases alone "
              f"produces ({noise.method}, {noise.resamples} resamples); 'beyond noise' subtracts each term's part")
    for group in result.aliased_groups:
        say(f"aliased {' + '.join(group.axes)}: together {number(group.total)} "
              f"(main {number(group.main)}, x system {number(group.interaction)})")
    for line in result.summary:
        say(line)
    for note in result.notes:
        say(f"note: {note}")
    return 0


def cmd_report(args: Namespace) -> int:
    from .. import load_run, report

    results: Results = load_run(args.source)
    say_rates_note(results)
    path = report(results, args.out, store=args.store, threshold=args.threshold, tests=not args.no_tests,
                  progress=False if args.quiet else None, human=args.human, baseline=args.baseline, rate=args.rate)
    say(f"report: {path}")
    return 0

