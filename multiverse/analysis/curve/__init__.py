"""Specification curves: the rate of every universe in order, the curve of differences, the
indicator matrix under it, and its summary with the joint tests.
"""

from ._curve import curve_summary, difference_curve, indicator_matrix, position_words, spec_curve, tied_positions

__all__ = [
    "curve_summary",
    "difference_curve",
    "indicator_matrix",
    "position_words",
    "spec_curve",
    "tied_positions",
]
