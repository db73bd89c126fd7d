"""Ranking stability: ranks per universe, their distribution and bootstrap intervals, concordance,
separability, and where cut points flip a verdict.
"""

from ._concordance import kendall_tau_b, kendall_w
from ._cuts import cut_flips, cut_table
from ._ranking import order_universes, rank_distribution, ranking, universe_ranks
from ._uncertainty import bootstrap_ranks, separability

__all__ = [
    "bootstrap_ranks",
    "cut_flips",
    "cut_table",
    "kendall_tau_b",
    "kendall_w",
    "order_universes",
    "rank_distribution",
    "ranking",
    "separability",
    "universe_ranks",
]
