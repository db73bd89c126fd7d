"""Judge agreement: pairs of judges on the same transcripts, on labels and on scores."""

from ._agreement import agreement, pair_matrix
from ._binary import cohen_kappa, gwet_ac1
from ._orders import VERDICTS, order_consistency, three_way, verdict_agreement
from ._scored import score_agreement
from ._scores import exact_agreement, icc, krippendorff_alpha, mean_difference, weighted_kappa

__all__ = [
    "VERDICTS",
    "agreement",
    "cohen_kappa",
    "exact_agreement",
    "gwet_ac1",
    "icc",
    "krippendorff_alpha",
    "mean_difference",
    "order_consistency",
    "pair_matrix",
    "score_agreement",
    "three_way",
    "verdict_agreement",
    "weighted_kappa",
]
