"""The analyses: pure functions of the verdicts (and criteria) tables; none draws or calls a model.

- specification curves: :func:`case_matrix`, :func:`spec_curve`, :func:`difference_curve`,
  :func:`indicator_matrix`, :func:`curve_summary`;
- joint tests over a curve: :func:`joint_curve_test` (each kind of universe under its own null:
  :func:`joint_rate_test` for shares, :func:`joint_mean_test` for means), :func:`joint_difference_test` (:class:`JointTest`);
- rates: :func:`compute_rates` (the rates table), :func:`included_verdicts`, :func:`system_rates`;
- judge agreement: :func:`agreement`, :func:`cohen_kappa`, :func:`gwet_ac1`, :func:`pair_matrix`;
  on scores: :func:`score_agreement`, :func:`weighted_kappa`, :func:`krippendorff_alpha`, :func:`icc`,
  :func:`exact_agreement`, :func:`mean_difference`;
- ranking stability: :func:`ranking`, :func:`universe_ranks`, :func:`rank_distribution`,
  :func:`order_universes`, :func:`bootstrap_ranks`, :func:`kendall_tau_b`, :func:`kendall_w`;
- variance decomposition: :func:`variance`, :func:`variance_decomposition`, :func:`variance_by_axis`,
  :func:`variance_summary`, :func:`aliasing`;
- design power: :func:`design_power`, :func:`detectable_difference`, :func:`cases_needed`,
  (at a spec's planned cases: ``multiverse.power``);
- multiplicity: :func:`adjust_tests`, :func:`holm`;
- pre-registered claims: :func:`rate_claim_tests`, :func:`difference_claim_tests`, :func:`rank_claim_tests`
  (one-sided tests per universe), :func:`partial_conjunction`, :func:`universes_needed`;
- human anchoring: :func:`read_labels`, :func:`calibrate` (:class:`Calibration`), :func:`calibration_document`,
  :func:`ppi_mean`, :func:`anchored_curve`, :func:`paired_curves`, :func:`ranking_change`;
  label budgets: :func:`anchored_width`, :func:`human_power`.

``multiverse.Results`` chains them for one run (``results.curve()`` and so
on).
"""

# Imported here, not on first use: ``agreement``, ``ranking`` and ``variance`` are also the names
# of their modules, and only an import in this file makes the function win over the module.
from .agreement import agreement, cohen_kappa, gwet_ac1, pair_matrix
from .agreement_scored import score_agreement
from .agreement_scores import exact_agreement, icc, krippendorff_alpha, mean_difference, weighted_kappa
from .anchored_views import anchored_curve, paired_curves, ranking_change
from .anchoring import (
    Calibration,
    calibrate,
    calibration_document,
    ppi_mean,
    read_labels,
)
from .claim_tests import (
    difference_claim_tests,
    partial_conjunction,
    rank_claim_tests,
    rate_claim_tests,
    universes_needed,
)
from .concordance import kendall_tau_b, kendall_w
from .curve import (
    CaseMatrix,
    case_matrix,
    curve_summary,
    difference_curve,
    indicator_matrix,
    position_words,
    spec_curve,
)
from .inference import JointTest, joint_difference_test, joint_rate_test
from .joint_curve import joint_curve_test
from .label_budget import anchored_width, human_power
from .mean_null import joint_mean_test
from .multiplicity import adjust_tests, holm
from .power import (
    cases_needed,
    design_power,
    detectable_difference,
)
from .rank_uncertainty import bootstrap_ranks, separability
from .ranking import order_universes, rank_distribution, ranking, universe_ranks
from .rates import compute_rates, included_verdicts, system_rates
from .scoring import counted_unparsed
from .variance import (
    aliasing,
    variance,
    variance_by_axis,
    variance_decomposition,
    variance_summary,
)

__all__ = [
    "Calibration",
    "CaseMatrix",
    "JointTest",
    "adjust_tests",
    "agreement",
    "aliasing",
    "anchored_curve",
    "anchored_width",
    "bootstrap_ranks",
    "calibrate",
    "calibration_document",
    "case_matrix",
    "cases_needed",
    "cohen_kappa",
    "compute_rates",
    "counted_unparsed",
    "curve_summary",
    "design_power",
    "detectable_difference",
    "difference_claim_tests",
    "difference_curve",
    "exact_agreement",
    "gwet_ac1",
    "holm",
    "human_power",
    "icc",
    "included_verdicts",
    "indicator_matrix",
    "joint_curve_test",
    "joint_difference_test",
    "joint_mean_test",
    "joint_rate_test",
    "kendall_tau_b",
    "kendall_w",
    "krippendorff_alpha",
    "mean_difference",
    "order_universes",
    "pair_matrix",
    "paired_curves",
    "partial_conjunction",
    "position_words",
    "ppi_mean",
    "rank_claim_tests",
    "rank_distribution",
    "ranking",
    "ranking_change",
    "rate_claim_tests",
    "read_labels",
    "score_agreement",
    "separability",
    "spec_curve",
    "system_rates",
    "universe_ranks",
    "universes_needed",
    "variance",
    "variance_by_axis",
    "variance_decomposition",
    "variance_summary",
    "weighted_kappa",
]
