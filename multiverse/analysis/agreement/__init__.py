"""Judge agreement: pairs of judges on the same transcripts, on labels and on scores."""

from ._agreement import agreement, pair_matrix
from ._binary import cohen_kappa, gwet_ac1
from ._scored import score_agreement
from ._scores import exact_agreement, icc, krippendorff_alpha, mean_difference, weighted_kappa

__all__ = [
    "agreement",
    "cohen_kappa",
    "exact_agreement",
    "gwet_ac1",
    "icc",
    "krippendorff_alpha",
    "mean_difference",
    "pair_matrix",
    "score_agreement",
    "weighted_kappa",
]
