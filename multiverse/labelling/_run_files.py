"""What a labelling sheet shows from a run folder: the rubric's criteria and the transcripts.

Read from the folder's own files (``spec.yaml``, ``transcripts.jsonl``) as
plain data, so the sheet needs neither the store nor the spec's classes. An
import folder has neither file: both readers then return nothing and the
sheet shows what the table has.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

# The folder's one reader: inside the folder, regular files, capped, each document checked.
from multiverse.tables import SpecDocument, read_spec, read_transcripts

__all__ = ["criterion_record", "run_criteria", "run_transcripts", "spec_criteria"]


def run_criteria(run_dir: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The rubric's criteria from ``spec.yaml``: id, name, permissible, definition, evidence {standard: text}."""
    spec = read_spec(run_dir)
    return spec_criteria(spec.document if spec is not None else None)


def spec_criteria(spec: SpecDocument | None) -> list[dict[str, Any]]:
    """The criteria of a run's resolved spec (``Results.resolved_spec``) as the sheet shows them; none without one."""
    criteria = spec.rubric.criteria if spec is not None and spec.rubric is not None else []
    # read from the model's fields (criterion_record is for the mappings a caller passes)
    return [{"id": c.id, "name": c.name or c.id, "permissible": c.permissible, "definition": c.definition or "",
             "evidence": {str(k): str(v) for k, v in (c.evidence or {}).items()}} for c in criteria]


def criterion_record(c: Mapping[str, Any]) -> dict[str, Any]:
    """A criterion as the page shows it: id, name, permissible, definition, evidence {standard: text}."""
    evidence = c.get("evidence")
    texts = evidence if isinstance(evidence, Mapping) else {}
    return {"id": str(c.get("id", "")), "name": str(c.get("name") or c.get("id") or ""),
            "permissible": bool(c.get("permissible", False)), "definition": str(c.get("definition") or ""),
            "evidence": {str(k): str(v) for k, v in texts.items()}}


def run_transcripts(run_dir: str | os.PathLike[str]) -> dict[str, dict[str, Any]] | None:
    """Every transcript of ``transcripts.jsonl`` by key, or None when the folder has none (an import)."""
    return read_transcripts(run_dir)
