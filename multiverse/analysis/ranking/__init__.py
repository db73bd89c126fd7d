"""Ranking stability: ranks per universe (of rates, or of Bradley-Terry scores from pairwise verdicts), their
distribution and bootstrap intervals, concordance, separability, and where cut points flip a verdict.
"""

from ._bradley_terry import OPPONENT, bradley_terry, fit_bradley_terry, pairwise_games
from ._concordance import kendall_tau_b, kendall_w
from ._cuts import cut_flips, cut_table
from ._ranking import order_universes, rank_distribution, rank_stability, ranking, universe_ranks
from ._uncertainty import bootstrap_ranks, separability

__all__ = [
    "OPPONENT",
    "bootstrap_ranks",
    "bradley_terry",
    "cut_flips",
    "cut_table",
    "fit_bradley_terry",
    "kendall_tau_b",
    "kendall_w",
    "order_universes",
    "pairwise_games",
    "rank_distribution",
    "rank_stability",
    "ranking",
    "separability",
    "universe_ranks",
]
