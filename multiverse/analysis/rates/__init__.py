"""Rates and their intervals: scoring judgments into verdicts, and the rates table per universe x system."""

from ._rates import ci_settings, compute_rates, system_rates
from ._scoring import count_unparsed, counted_unparsed, score_judgments, score_verdicts

__all__ = [
    "ci_settings",
    "compute_rates",
    "count_unparsed",
    "counted_unparsed",
    "score_judgments",
    "score_verdicts",
    "system_rates",
]
