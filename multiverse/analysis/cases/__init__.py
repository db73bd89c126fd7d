"""The case matrix: counts per system x universe x case, which the curve and the joint tests both read.

Below both :mod:`~multiverse.analysis.curve` and :mod:`~multiverse.analysis.inference`, so neither
imports the other to reach it.
"""

from ._counts import counts_of_matrix, rates_of_matrix
from ._matrix import Z_CAP, CaseMatrix, as_matrix, axes_list, case_matrix, paired_cases, paired_z, plain_number

__all__ = [
    "Z_CAP",
    "CaseMatrix",
    "as_matrix",
    "axes_list",
    "case_matrix",
    "counts_of_matrix",
    "paired_cases",
    "paired_z",
    "plain_number",
    "rates_of_matrix",
]
