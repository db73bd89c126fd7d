"""The one results object: a run's tables, who is who, and every analysis of them, cached.

:class:`Results` is data plus cached analyses; :func:`load_run` builds it
from a run folder, an import folder or a bare verdicts table. Reading files
is the tables room's job and drawing the plots room's: this room holds what
they give and hands each analysis the inputs it shares with the others.
An analysis's document is its typed model, ``Analysis.document``: one model
per analysis (``CurveDocument``, ...); ``Analysis.to_dict()`` is what ``--json`` prints.
"""

from typing import TYPE_CHECKING

from multiverse.core import lazy_names as _lazy_names

if TYPE_CHECKING:  # the names' real types for type checkers; at run time each is imported on first use
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

# Names are imported on first use: a run builds its Results without the documents' models, which pydantic
# builds on import (a tenth of a second of every run's start-up).
_HOMES = {
    "_analyses": ("primary_null",),
    "_analysis": ("Analysis", "CalibrationAnalysis", "CurveAnalysis", "rows_frame"),
    "_anchoring_documents": ("AnchoredCurveDocument", "AnchoredRankingDocument", "CalibrationDocument", "LabelCount"),
    "_documents": ("AgreementDocument", "CurveDocument", "Document", "HumanPower", "JointTestEntry", "Multiplicity",
                   "OrderConsistency", "PowerDocument", "ScoreAgreement", "TestStatistic", "VarianceDocument",
                   "VerdictAgreement"),
    "_load": ("load_run",),
    "_ranking_documents": ("BradleyTerryDocument", "Flip", "RankingDocument"),
    "_results": ("Results",),
}
_HOME = {name: f"{__name__}.{module}" for module, names in _HOMES.items() for name in names}

__all__ = [
    "AgreementDocument", "Analysis", "AnchoredCurveDocument", "AnchoredRankingDocument", "BradleyTerryDocument",
    "CalibrationAnalysis", "CalibrationDocument", "CurveAnalysis", "CurveDocument", "Document", "Flip", "HumanPower",
    "JointTestEntry", "LabelCount", "Multiplicity", "OrderConsistency", "PowerDocument", "RankingDocument", "Results",
    "ScoreAgreement", "TestStatistic", "VarianceDocument", "VerdictAgreement", "load_run", "primary_null",
    "rows_frame",
]


__getattr__, __dir__ = _lazy_names(__name__, _HOME)
