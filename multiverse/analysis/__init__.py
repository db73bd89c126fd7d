"""The analyses: pure functions of the verdicts (and criteria) tables; none draws or calls a model.

- specification curves: :func:`case_matrix`, :func:`spec_curve`, :func:`difference_curve`,
  :func:`indicator_matrix`, :func:`curve_summary`;
- joint tests over a curve: :func:`joint_curve_test` (each kind of universe under its own null:
  :func:`joint_rate_test` for shares, :func:`joint_mean_test` for means), :func:`joint_difference_test` (:class:`JointTest`);
- rates: :func:`compute_rates` (the rates table), :func:`included_verdicts`, :func:`system_rates`;
- judge agreement: :func:`agreement`, :func:`cohen_kappa`, :func:`gwet_ac1`, :func:`pair_matrix`;
  on scores: :func:`score_agreement`, :func:`weighted_kappa`, :func:`krippendorff_alpha`, :func:`icc`,
  :func:`exact_agreement`, :func:`mean_difference`; pairwise verdicts (win / tie / loss): :func:`three_way`,
  :func:`verdict_agreement`, and each judge's consistency across the two orders: :func:`order_consistency`;
- ranking stability: :func:`ranking`, :func:`universe_ranks`, :func:`rank_distribution`,
  :func:`order_universes`, :func:`bootstrap_ranks`, :func:`kendall_tau_b`, :func:`kendall_w`,
  :func:`rank_stability`; Bradley-Terry scores from pairwise verdicts: :func:`bradley_terry`,
  :func:`fit_bradley_terry`, :func:`pairwise_games` (opponents in the column :data:`OPPONENT`);
- variance decomposition: :func:`variance`, :func:`variance_decomposition`, :func:`variance_by_axis`,
  :func:`variance_summary`, :func:`aliasing`;
- design power: :func:`design_power`, :func:`detectable_difference`, :func:`cases_needed`,
  (at a spec's planned cases: ``multiverse.power``);
- multiplicity: :func:`adjust_tests`, :func:`holm`;
- pre-registered claims: :func:`rate_claim_tests`, :func:`difference_claim_tests`, :func:`rank_claim_tests`
  (one-sided tests per universe), :func:`partial_conjunction`, :func:`universes_needed`;
- human anchoring: :func:`read_labels`, :func:`labels_by_key`, :func:`calibrate` (:class:`Calibration`),
  :func:`calibration_document`, :func:`ppi_mean`, :func:`anchored_curve`, :func:`paired_curves`, :func:`ranking_change`;
  label budgets: :func:`anchored_width`, :func:`human_power`.

For the other rooms (which import analysis through this facade only): the estimators' column
:data:`CONTRIBUTION` and kinds :data:`MEAN_ESTIMATORS`, :func:`with_contributions`, :func:`scoring_choices`,
:func:`ci_settings`, :func:`score_verdicts`, :func:`score_judgments`, :func:`count_unparsed`,
:func:`counts_of_rates`, :func:`counts_of_matrix`, :func:`rates_of_matrix`, :func:`dropped_notes`,
:func:`tied_positions`, :func:`cut_table`, :func:`cut_flips`, :func:`transcript_keys`,
:func:`rollout_configurations`.

``multiverse.Results`` chains them for one run (``results.curve()`` and so
on).
"""

import sys
from types import ModuleType
from typing import TYPE_CHECKING

from multiverse.core import lazy_names as _lazy_names

# Names are imported on first use (a run needs only the rates, and the other sub-rooms and scipy's
# modules under them cost a fifth of a second of every run's start-up). The sub-rooms, bottom up (each
# imports only those before it, through their facades): _kernel; cases; rates; inference (cases); curve
# (cases, inference); agreement; ranking (rates); variance (rates); anchoring. Other rooms import
# analysis through this facade only (tests/test_house.py).
if TYPE_CHECKING:  # the names' real types for type checkers
    from ._kernel import (
        CONTRIBUTION,
        MEAN_ESTIMATORS,
        adjust_tests,
        counts_of_rates,
        dropped_notes,
        holm,
        included_verdicts,
        scoring_choices,
        with_contributions,
    )
    from ._power import cases_needed, design_power, detectable_difference
    from .agreement import (
        agreement,
        cohen_kappa,
        exact_agreement,
        gwet_ac1,
        icc,
        krippendorff_alpha,
        mean_difference,
        order_consistency,
        pair_matrix,
        score_agreement,
        three_way,
        verdict_agreement,
        weighted_kappa,
    )
    from .anchoring import (
        Calibration,
        anchored_curve,
        anchored_width,
        calibrate,
        calibration_document,
        human_power,
        labels_by_key,
        paired_curves,
        ppi_mean,
        ranking_change,
        read_labels,
        rollout_configurations,
        transcript_keys,
    )
    from .cases import CaseMatrix, case_matrix, counts_of_matrix, rates_of_matrix
    from .curve import curve_summary, difference_curve, indicator_matrix, position_words, spec_curve, tied_positions
    from .inference import (
        JointTest,
        difference_claim_tests,
        joint_curve_test,
        joint_difference_test,
        joint_mean_test,
        joint_rate_test,
        partial_conjunction,
        rank_claim_tests,
        rate_claim_tests,
        universes_needed,
    )
    from .ranking import (
        OPPONENT,
        bootstrap_ranks,
        bradley_terry,
        cut_flips,
        cut_table,
        fit_bradley_terry,
        kendall_tau_b,
        kendall_w,
        order_universes,
        pairwise_games,
        rank_distribution,
        rank_stability,
        ranking,
        separability,
        universe_ranks,
    )
    from .rates import (
        ci_settings,
        compute_rates,
        count_unparsed,
        counted_unparsed,
        score_judgments,
        score_verdicts,
        system_rates,
    )
    from .variance import aliasing, variance, variance_by_axis, variance_decomposition, variance_summary

# the sub-room (or the room's own module) -> the public names it defines
_ROOMS = {
    "_kernel": (
        "CONTRIBUTION", "MEAN_ESTIMATORS", "adjust_tests", "counts_of_rates", "dropped_notes", "holm",
        "included_verdicts", "scoring_choices", "with_contributions",
    ),
    "_power": ("cases_needed", "design_power", "detectable_difference"),
    "agreement": (
        "agreement", "cohen_kappa", "exact_agreement", "gwet_ac1", "icc", "krippendorff_alpha", "mean_difference",
        "order_consistency", "pair_matrix", "score_agreement", "three_way", "verdict_agreement", "weighted_kappa",
    ),
    "anchoring": (
        "Calibration", "anchored_curve", "anchored_width", "calibrate", "calibration_document", "human_power",
        "labels_by_key", "paired_curves", "ppi_mean", "ranking_change", "read_labels", "rollout_configurations",
        "transcript_keys",
    ),
    "cases": ("CaseMatrix", "case_matrix", "counts_of_matrix", "rates_of_matrix"),
    "curve": (
        "curve_summary", "difference_curve", "indicator_matrix", "position_words", "spec_curve", "tied_positions",
    ),
    "inference": (
        "JointTest", "difference_claim_tests", "joint_curve_test", "joint_difference_test", "joint_mean_test",
        "joint_rate_test", "partial_conjunction", "rank_claim_tests", "rate_claim_tests", "universes_needed",
    ),
    "ranking": (
        "OPPONENT", "bootstrap_ranks", "bradley_terry", "cut_flips", "cut_table", "fit_bradley_terry",
        "kendall_tau_b", "kendall_w", "order_universes", "pairwise_games", "rank_distribution", "rank_stability",
        "ranking", "separability", "universe_ranks",
    ),
    "rates": (
        "ci_settings", "compute_rates", "count_unparsed", "counted_unparsed", "score_judgments", "score_verdicts",
        "system_rates",
    ),
    "variance": ("aliasing", "variance", "variance_by_axis", "variance_decomposition", "variance_summary"),
}
_HOME = {name: f"{__name__}.{room}" for room, names in _ROOMS.items() for name in names}

__all__ = [
    "CONTRIBUTION",
    "MEAN_ESTIMATORS",
    "OPPONENT",
    "Calibration",
    "CaseMatrix",
    "JointTest",
    "adjust_tests",
    "agreement",
    "aliasing",
    "anchored_curve",
    "anchored_width",
    "bootstrap_ranks",
    "bradley_terry",
    "calibrate",
    "calibration_document",
    "case_matrix",
    "cases_needed",
    "ci_settings",
    "cohen_kappa",
    "compute_rates",
    "count_unparsed",
    "counted_unparsed",
    "counts_of_matrix",
    "counts_of_rates",
    "curve_summary",
    "cut_flips",
    "cut_table",
    "design_power",
    "detectable_difference",
    "difference_claim_tests",
    "difference_curve",
    "dropped_notes",
    "exact_agreement",
    "fit_bradley_terry",
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
    "labels_by_key",
    "mean_difference",
    "order_consistency",
    "order_universes",
    "pair_matrix",
    "paired_curves",
    "pairwise_games",
    "partial_conjunction",
    "position_words",
    "ppi_mean",
    "rank_claim_tests",
    "rank_distribution",
    "rank_stability",
    "ranking",
    "ranking_change",
    "rate_claim_tests",
    "rates_of_matrix",
    "read_labels",
    "rollout_configurations",
    "score_agreement",
    "score_judgments",
    "score_verdicts",
    "scoring_choices",
    "separability",
    "spec_curve",
    "system_rates",
    "three_way",
    "tied_positions",
    "transcript_keys",
    "universe_ranks",
    "universes_needed",
    "variance",
    "variance_by_axis",
    "variance_decomposition",
    "variance_summary",
    "verdict_agreement",
    "weighted_kappa",
    "with_contributions",
]


__getattr__, __dir__ = _lazy_names(__name__, _HOME)


class _Facade(ModuleType):
    """This package's module type: ``agreement``, ``ranking`` and ``variance`` name both a function and the
    sub-room that defines it. Importing a sub-room sets the package's attribute of its name to the module;
    here the function keeps the name (``__getattr__`` finds it in its home), as the eager imports did."""

    def __setattr__(self, name: str, value: object) -> None:
        if name in _HOME and isinstance(value, ModuleType):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Facade
