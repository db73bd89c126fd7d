"""Joint inference over a curve: the joint tests (each kind of universe under its own null) and the
pre-registered claims' one-sided tests.
"""

from ._claims import difference_claim_tests, partial_conjunction, rank_claim_tests, rate_claim_tests, universes_needed
from ._joint import STATISTICS, JointTest, joint_difference_test, joint_rate_test
from ._joint_curve import joint_curve_test
from ._mean_null import joint_mean_test

__all__ = [
    "STATISTICS",
    "JointTest",
    "difference_claim_tests",
    "joint_curve_test",
    "joint_difference_test",
    "joint_mean_test",
    "joint_rate_test",
    "partial_conjunction",
    "rank_claim_tests",
    "rate_claim_tests",
    "universes_needed",
]
