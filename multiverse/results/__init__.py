"""The one results object: a run's tables, who is who, and every analysis of them, cached.

:class:`Results` is data plus cached analyses; :func:`load_run` builds it
from a run folder, an import folder or a bare verdicts table. Reading files
is the tables room's job and drawing the plots room's: this room holds what
they give and hands each analysis the inputs it shares with the others.
"""

from ._load import load_run
from ._results import Analysis, CalibrationAnalysis, CurveAnalysis, Results, json_safe

__all__ = ["Analysis", "CalibrationAnalysis", "CurveAnalysis", "Results", "json_safe", "load_run"]
