"""The analyses' shared ground: block-wise integer codes of table columns, the counted rows, the
estimators' contributions, intervals, multiplicity and case resampling.

``blocks`` is the module of block-wise codes itself, not a copy of its names: its callers read
``blocks.PIECE_ROWS`` when they run, so a test that shrinks the pieces reaches every one of them.

Every other sub-room of ``multiverse.analysis`` may import this one, and it imports none of them.
"""

from . import _codes as blocks
from ._case_resampling import DENSE_LIMIT, CaseCounts, case_counts, counts_of_rates, ratio
from ._codes import (
    PIECE_ROWS,
    appearance_order,
    change_rows,
    codes,
    codes_and_first_rows,
    combine,
    count,
    dense_codes,
    first_appearances,
    first_rows,
    index_type,
    numbered_codes,
    radix_codes,
    sort_order,
    sorted_codes,
    target_blocks,
)
from ._cores import Parts, in_order
from ._dropped import dropped_notes
from ._estimates import (
    CONTRIBUTION,
    FEW_OFF_EDGE,
    MEAN_ESTIMATORS,
    NO_SPREAD,
    case_mean_interval,
    contributions,
    edge_cases,
    mean_interval,
    scoring_choices,
    with_contributions,
)
from ._included import included_rows, included_verdicts, require_verdict_columns, resampled_rows
from ._intervals import anova_terms, cluster_bootstrap, design_effect, rate_intervals, share_icc, target_icc, wilson
from ._multiplicity import adjust_tests, holm

__all__ = [
    "CONTRIBUTION",
    "DENSE_LIMIT",
    "FEW_OFF_EDGE",
    "MEAN_ESTIMATORS",
    "NO_SPREAD",
    "PIECE_ROWS",
    "CaseCounts",
    "Parts",
    "adjust_tests",
    "anova_terms",
    "appearance_order",
    "blocks",
    "case_counts",
    "case_mean_interval",
    "change_rows",
    "cluster_bootstrap",
    "codes",
    "codes_and_first_rows",
    "combine",
    "contributions",
    "count",
    "counts_of_rates",
    "dense_codes",
    "design_effect",
    "dropped_notes",
    "edge_cases",
    "first_appearances",
    "first_rows",
    "holm",
    "in_order",
    "included_rows",
    "included_verdicts",
    "index_type",
    "mean_interval",
    "numbered_codes",
    "radix_codes",
    "rate_intervals",
    "ratio",
    "require_verdict_columns",
    "resampled_rows",
    "scoring_choices",
    "share_icc",
    "sort_order",
    "sorted_codes",
    "target_blocks",
    "target_icc",
    "wilson",
    "with_contributions",
]
