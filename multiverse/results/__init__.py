"""The one results object: a run's tables, who is who, and every analysis of them, cached.

:class:`Results` is data plus cached analyses; :func:`load_run` builds it
from a run folder, an import folder or a bare verdicts table. Reading files
is the tables room's job and drawing the plots room's: this room holds what
they give and hands each analysis the inputs it shares with the others.
An analysis's document is its typed model, ``Analysis.document``: one model
per analysis (``CurveDocument``, ...); ``Analysis.to_dict()`` is what ``--json`` prints.
"""

from ._analyses import primary_null
from ._analysis import Analysis, CalibrationAnalysis, CurveAnalysis, rows_frame
from ._anchoring_documents import AnchoredCurveDocument, AnchoredRankingDocument, CalibrationDocument, LabelCount
from ._documents import (
    AgreementDocument,
    CurveDocument,
    Document,
    HumanPower,
    JointTestEntry,
    Multiplicity,
    OrderConsistency,
    PowerDocument,
    ScoreAgreement,
    TestStatistic,
    VarianceDocument,
    VerdictAgreement,
)
from ._load import load_run
from ._ranking_documents import BradleyTerryDocument, Flip, RankingDocument
from ._results import Results

__all__ = [
    "AgreementDocument", "Analysis", "AnchoredCurveDocument", "AnchoredRankingDocument", "BradleyTerryDocument",
    "CalibrationAnalysis", "CalibrationDocument", "CurveAnalysis", "CurveDocument", "Document", "Flip", "HumanPower",
    "JointTestEntry", "LabelCount", "Multiplicity", "OrderConsistency", "PowerDocument", "RankingDocument", "Results",
    "ScoreAgreement", "TestStatistic", "VarianceDocument", "VerdictAgreement", "load_run", "primary_null", "rows_frame",
]
