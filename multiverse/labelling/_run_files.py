"""What a labelling sheet shows from a run folder: the rubric's criteria and the transcripts.

Read from the folder's own files (``spec.yaml``, ``transcripts.jsonl``) as
plain data, so the sheet needs neither the store nor the spec's classes. An
import folder has neither file: both readers then return nothing and the
sheet shows what the table has.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..errors import InputError

__all__ = ["criterion_record", "run_criteria", "run_transcripts"]


def run_criteria(run_dir: str | os.PathLike) -> list[dict[str, Any]]:
    """The rubric's criteria from ``spec.yaml``: id, name, permissible, definition, evidence {standard: text}."""
    import yaml

    path = Path(run_dir) / "spec.yaml"
    if not path.is_file():
        return []
    try:
        document = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: not valid YAML ({str(exc).splitlines()[0]})") from None
    rubric = document.get("rubric") if isinstance(document, dict) else None
    criteria = rubric.get("criteria") if isinstance(rubric, dict) else None
    return [criterion_record(c) for c in (criteria if isinstance(criteria, list) else []) if isinstance(c, Mapping)]


def criterion_record(c: Mapping[str, Any]) -> dict[str, Any]:
    """A criterion as the page shows it: id, name, permissible, definition, evidence {standard: text}."""
    evidence = c.get("evidence")
    texts = evidence if isinstance(evidence, Mapping) else {}
    return {"id": str(c.get("id", "")), "name": str(c.get("name") or c.get("id") or ""),
            "permissible": bool(c.get("permissible", False)), "definition": str(c.get("definition") or ""),
            "evidence": {str(k): str(v) for k, v in texts.items()}}


def run_transcripts(run_dir: str | os.PathLike) -> dict[str, dict[str, Any]] | None:
    """Every transcript of ``transcripts.jsonl`` by key, or None when the folder has none (an import)."""
    path = Path(run_dir) / "transcripts.jsonl"
    if not path.is_file():
        return None
    out: dict[str, dict[str, Any]] = {}
    with open(path, encoding="utf-8") as fh:
        for number, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except ValueError as exc:
                raise InputError(f"{path}: line {number}: not valid JSON ({exc})") from None
            if isinstance(record, dict) and isinstance(record.get("key"), str):
                out[record["key"]] = record
    return out
