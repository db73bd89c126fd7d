"""The report's section "Compared with the baseline": the run against an earlier one (``report --baseline``).

Shown only when the report is given a baseline run. It is ``multiverse diff
BASELINE RUN`` on the page: per system the range of rate(this run) -
rate(baseline) over the universes, how many universes' intervals lie below
and above 0, the joint test that this run is worse, the difference curves
and the note of what only one run has.
"""

from __future__ import annotations

from multiverse.core import rate_name

from ._markup import _e, _figure, _fmt, _notes, _table
from ._run import _Run

__all__ = ["ANCHOR", "TITLE", "_comparison"]

ANCHOR, TITLE = "comparison", "Compared with the baseline"


def _comparison(run: _Run) -> str:
    diff = run.comparison
    if diff is None:
        return ""
    out = (f"<p>This run against the baseline {_e(diff.baseline)}: universes matched by their options, cases by "
           f"case id. Each point is one universe's {rate_name(diff.rate_direction)}(this run) - "
           f"{rate_name(diff.rate_direction)}(baseline) on the cases both runs rated, "
           "with a 95% interval clustered by case. The joint test asks whether this run is worse across the "
           "universes (the curve's case sign flip, one-sided), Holm-adjusted across systems and statistics.</p>")
    rows = [[s["system"], s["universes"], _fmt(s["min"]), _fmt(s["median"]), _fmt(s["max"]), s["below_0"],
             s["above_0"], _fmt(s["p_worse"]) + (" worse" if s["worse"] else "")]
            for _, s in diff.summary(as_read=True).iterrows()]
    out += _table(["system", "universes", "min", "median", "max", "interval below 0", "interval above 0",
                   "p worse (Holm)"], rows)
    if len(diff.frame):
        out += _figure(diff.figure(), "difference curves against the baseline",
                       "One panel per system; universes sorted by their difference, lowest first, each with its "
                       "95% interval clustered by case. Points on the dotted line did not move; a red panel is a "
                       "system the joint test finds worse in this run.", simulated=diff.simulated)
    return out + _notes(diff.notes)
