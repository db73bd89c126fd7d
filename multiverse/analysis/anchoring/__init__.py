"""Human anchoring: reading labels, calibrating the judge against them (PPI++), the anchored views of
the curve and the ranking, and label budgets.
"""

from ._calibrate import Calibration, calibrate, calibration_document, ppi_mean, rollout_configurations
from ._label_budget import anchored_width, human_power
from ._labels import labels_by_key, read_labels, transcript_keys
from ._views import anchored_curve, paired_curves, ranking_change

__all__ = [
    "Calibration",
    "anchored_curve",
    "anchored_width",
    "calibrate",
    "calibration_document",
    "human_power",
    "labels_by_key",
    "paired_curves",
    "ppi_mean",
    "ranking_change",
    "read_labels",
    "rollout_configurations",
    "transcript_keys",
]
