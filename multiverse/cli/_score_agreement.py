"""The agreement command's text for options that gave scores: the scores table, alpha and the ICC, each cut."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._output import number, print_table, say

if TYPE_CHECKING:
    from ..results import OrderConsistency, ScoreAgreement, VerdictAgreement

__all__ = ["print_order_consistency", "print_score_agreement", "print_verdict_agreement"]

SMALL = 30  # as the analysis marks pairs: fewer paired units than this are too few to read


def _signed(value: float | None) -> str:
    return "n/a" if value is None else f"{value:+.2f}"


def print_score_agreement(scores: ScoreAgreement) -> None:
    """Agreement on raw scores, then on the labels at each cut, so the two read side by side."""
    scale = scores.scale
    how = "declared" if scale.declared else "read from the scores"
    say(f"agreement on scores ({scale.type} {scale.min:g}..{scale.max:g}, {how}) on {scores.n_units} units, "
        f"paired on {scores.paired_on}")
    ordinal = scale.type == "ordinal"
    header = ["a", "b", "n", *(["kappa lin", "kappa quad", "exact", "within 1"] if ordinal else []),
              "ICC(2,1)", "ICC(3,1)", f"mean a-b [{scores.level:.0%} CI, by case]"]
    rows: list[list[Any]] = [header]
    for p in scores.pairs:
        mark = "!" if p.small_sample else ""
        d = p.mean_difference
        rows.append([p.a, p.b, f"{p.n}{mark}",
                     *([number(p.kappa_linear), number(p.kappa_quadratic), number(p.exact), number(p.within_one)]
                       if ordinal else []),
                     number(p.icc2_1), number(p.icc3_1),
                     f"{_signed(d.mean)} [{_signed(d.ci_low)}, {_signed(d.ci_high)}]"])
    print_table(rows)
    small = "!" if 0 < scores.n_units < SMALL else ""
    alpha = (f"ordinal {number(scores.krippendorff_alpha_ordinal)}{small}, " if ordinal else "") + \
        f"interval {number(scores.krippendorff_alpha_interval)}{small}"
    say(f"Krippendorff's alpha: {alpha}")
    say(f"ICC(2,1) absolute agreement {number(scores.icc.icc2_1)}, ICC(3,1) consistency {number(scores.icc.icc3_1)} "
        f"(two-way, single judge; {scores.icc.n} units every option scored)")
    for cut in scores.cuts:
        say(f"on the labels score >= {cut.cut:g}: Krippendorff's alpha {number(cut.krippendorff_alpha)}")
        rows = [["a", "b", "n", "percent", "kappa", "AC1", "bias"]]
        for c in cut.pairs:
            mark = "!" if c.small_sample or c.degenerate else ""
            rows.append([c.a, c.b, f"{c.n}{mark}", number(c.percent), number(c.cohen_kappa) + mark,
                         number(c.gwet_ac1) + mark, number(c.bias)])
        print_table(rows)
    for note in scores.notes:
        say(f"note: {note}")


def print_verdict_agreement(verdicts: VerdictAgreement) -> None:
    """Pairwise scores read as win / tie / loss: percent agreement and 3-class kappa per pair, nominal alpha."""
    say(f"agreement on verdicts (win, tie, loss) on {verdicts.n_units} units")
    rows: list[list[Any]] = [["a", "b", "n", "percent", "kappa"]]
    for p in verdicts.pairs:
        mark = "!" if p.small_sample else ""
        rows.append([p.a, p.b, f"{p.n}{mark}", number(p.percent), number(p.cohen_kappa) + mark])
    print_table(rows)
    say(f"Krippendorff's alpha (nominal): {number(verdicts.krippendorff_alpha)}")
    for note in verdicts.notes:
        say(f"note: {note}")


def print_order_consistency(orders: list[OrderConsistency]) -> None:
    """Each judge asked both ways, on its own row: pooling judges hides one judge's inconsistency."""
    say("each judge across the two orders (ab: the system shown first; position bias: the share of decisive "
        "verdicts won by the first transcript, 0.5 none)")
    rows: list[list[Any]] = [["judge", "pairs", "consistency", "position bias", "first both", "second both", "kappa"]]
    for o in orders:
        mark = "!" if o.small_sample else ""
        group = ", ".join(f"{k}={v}" for k, v in o.group.items()) or "all"
        rows.append([group, f"{o.n}{mark}", number(o.consistency), number(o.position_bias), number(o.favours_first),
                     number(o.favours_second), number(o.cohen_kappa) + mark])
    print_table(rows)
