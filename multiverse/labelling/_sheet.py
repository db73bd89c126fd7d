"""Writing the labelling sheet: ``SHEET.csv`` for the labels and ``SHEET.html`` to label in.

The page is one self-contained file: the sample, the transcripts and the
rubric travel inside it as JSON (with ``<``, ``>`` and ``&`` escaped, so no
string can close the block), and its script renders them as text. A strict
Content-Security-Policy allows that one script and that one style by hash and
nothing else: no network, no other script, no images. It never receives a
judge's verdict, so labellers stay blind to them.
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import pandas as pd

from multiverse.core import (
    CORE_COLUMNS,
    LINE_END,
    atomic_write,
    atomic_write_text,
    check_rate_direction,
    digest,
    escaped,
    json_escaped,
    json_ready,
)
from multiverse.tables import csv_safe

from ..errors import InputError
from ._identity import IDENTITY_COLUMNS
from ._page import SCRIPT, STYLE, TEMPLATE
from ._run_files import criterion_record
from ._sample import LABEL_COLUMNS, sheet_columns

if TYPE_CHECKING:
    from multiverse.tables import ScaleRecord

__all__ = ["write_sheet"]

# The simulated world's hidden ground truth (``[[sim:reply ... viol=...]]``): it would tell the labeller the answer.
_SIM_MARKER = re.compile(r"[ \t]*\[\[sim:[a-z_]+(?:[ \t][^\[\]]*)?\]\]")
# A longer turn is cut, so one runaway answer does not make the page unusable.
_MAX_TURN_CHARS = 20000
# An ordinal scale with at most this many points is offered as buttons; a longer one (or a continuous one) as a number.
_MAX_CHOICES = 11


def write_sheet(sample: pd.DataFrame, criteria: Sequence[Mapping[str, Any]], transcripts: Mapping[str, Any] | None,
                out_csv: str | os.PathLike[str], *, verdicts: pd.DataFrame | None = None,
                axes: Sequence[str] = (), scale: ScaleRecord | None = None,
                blind_systems: bool = False, rates_read: str = "compliance") -> tuple[Path, Path]:
    """Write ``out_csv`` and the labelling page beside it (same name, ``.html``); return both paths.

    ``sample`` is ``draw_sample``'s table; ``criteria`` the rubric's criteria
    (``run_criteria``); ``transcripts`` key -> record (``run_transcripts``),
    or None for an import, whose page shows instead what ``verdicts`` holds
    for each transcript apart from ``axes`` and the judges' columns. For a
    scored run, ``scale`` is the judge's: the sheet's column is ``score`` and
    the page asks for a score on that scale (``draw_sample(label="score")``).
    ``blind_systems`` leaves every system name off the page (and out of its
    data, so not even its source shows one); the exported CSV then has blank
    ``system`` cells, which ``calibrate`` fills from each row's
    ``transcript_key``. ``SHEET.csv`` keeps the names either way. ``rates_read`` (``compliance`` or
    ``violation``, the run's ``report.rate``) words the pass/fail question: "does it violate the rubric?" with
    "violates" first when rates read as violations; the value a choice writes stays the ``compliant`` column's
    (violates = 0), so the filled sheet anchors the same compliance rates either way.
    """
    out_csv = Path(out_csv)
    if out_csv.suffix.lower() != ".csv":
        raise InputError(f"{out_csv}: expected a .csv file name for the sheet", param="out")
    label = "score" if scale is not None and scale.scored else "compliant"
    fixed = sheet_columns(label)
    missing = [c for c in fixed if c not in sample.columns]  # the identity too: a sheet without it is not checked
    if missing:
        raise InputError(f"sample: missing column(s) {', '.join(missing)}; expected draw_sample's table"
                         + (f" drawn with label={label!r}" if label != "compliant" else ""), param="sample")
    if scale is not None and scale.type == "pairwise":
        raise InputError("scale: a pairwise judge's scores compare two transcripts; a labelling sheet shows one at a "
                         "time, so it cannot ask for them; expected an ordinal or continuous scale", param="scale")
    if blind_systems and not sample["transcript_key"].astype(str).str.strip().ne("").all():
        raise InputError("blind_systems: this table has no transcript_key for its rows, so a row without its system "
                         "could not be matched back; expected a run folder, or a table with a transcript_key column",
                         param="blind_systems")
    factors = [c for c in sample.columns if c not in fixed and c not in LABEL_COLUMNS]
    columns = fixed[:4] + factors + fixed[4:]  # the sample's identity last, out of the labeller's way
    sheet = sample[columns]
    html_path = out_csv.with_suffix(".html")
    atomic_write(out_csv, lambda tmp: csv_safe(sheet).to_csv(tmp, index=False, lineterminator=LINE_END))
    page = _page(sheet, factors, criteria, transcripts, verdicts, axes, out_csv.stem,
                 _label_spec(scale, check_rate_direction(rates_read)), blind_systems)
    atomic_write_text(html_path, page)
    return out_csv, html_path


def _label_spec(scale: ScaleRecord | None, rates_read: str = "compliance") -> dict[str, Any]:
    """What the page asks for: compliant or not (asked as violating or not when rates read as violations), or
    a score on the judge's scale (buttons, or a number; a scale says its own best end, so it reads one way)."""
    if scale is None or not scale.scored:
        if rates_read == "violation":  # the same column and values: only the words follow the reading
            return {"column": "compliant", "question": "Does this transcript violate the rubric?",
                    "task": "mark whether the assistant violated the rubric below",
                    "choices": [["0", "violates"], ["1", "does not violate"]]}
        return {"column": "compliant", "question": "Is this transcript compliant with the rubric?",
                "task": "mark whether the assistant complied with the rubric below",
                "choices": [["1", "compliant"], ["0", "not compliant"]]}
    low, high = json_ready(scale.min, other=str), json_ready(scale.max, other=str)
    words = f"{low:g} (worst) to {high:g} (best)"
    spec: dict[str, Any] = {"column": "score", "min": low, "max": high, "whole": scale.type == "ordinal",
                            "question": f"Score this transcript on the judge's scale, from {words}.",
                            "expected": f"{'a whole number' if scale.type == 'ordinal' else 'a number'} from {low:g} "
                                        f"to {high:g}"}
    if scale.type == "ordinal" and high - low + 1 <= _MAX_CHOICES:
        anchors = {str(k): str(v) for k, v in scale.anchors.items()}
        points = [int(low) + i for i in range(int(high - low) + 1)]
        spec["choices"] = [[str(p), f"{p}" + (f" ({anchors[str(p)]})" if str(p) in anchors else "")] for p in points]
    return spec


def _page(sheet: pd.DataFrame, factors: list[str], criteria: Sequence[Mapping[str, Any]],
          transcripts: Mapping[str, Any] | None, verdicts: pd.DataFrame | None, axes: Sequence[str], stem: str,
          label: dict[str, Any], blind: bool) -> str:
    extra = _table_fields(sheet, verdicts, axes) if transcripts is None else {}
    rows = []
    for cells in sheet.astype(object).where(sheet.notna(), None).to_dict("records"):
        cells = {k: json_ready(v, other=str) for k, v in cells.items()}
        key = str(cells.get("transcript_key") or "")
        row: dict[str, Any] = {"cells": cells}
        if transcripts is not None:
            row["turns"] = _turns(transcripts.get(key))
        else:
            row["fields"] = extra.get((str(cells["system"]), str(cells["case_id"]), str(cells["replicate"])), {})
        if blind:
            cells["system"] = ""  # never in the page's data: blind means its source cannot tell either
        rows.append(row)
    identity = {c: json_ready(sheet[c].iloc[0], other=str) if len(sheet) else None for c in IDENTITY_COLUMNS}
    data = {
        # Progress is kept per sample: two runs whose transcripts share keys never share labels in the browser.
        "id": digest([identity, [r["cells"].get("transcript_key") or [r["cells"]["system"], r["cells"]["case_id"]]
                                 for r in rows]]),
        "columns": list(sheet.columns),
        "factors": factors,
        "criteria": [criterion_record(c) for c in criteria],
        "label": label,
        "blind": blind,
        "rows": rows,
        "export_name": f"{stem}-filled.csv",
    }
    payload = json_escaped(json.dumps(data, ensure_ascii=False, allow_nan=False)
                           .replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026"))
    csp = (f"default-src 'none'; script-src '{_hash(SCRIPT)}'; style-src '{_hash(STYLE)}'; "
           "img-src 'none'; connect-src 'none'; base-uri 'none'; form-action 'none'")
    sample = html.escape(escaped(f"run {identity['sample_run']}, seed {identity['sample_seed']}, {identity['sample_n']} per "
                                 f"system and rollout configuration, keys {identity['sample_keys']}"))
    task = (label["task"] if label["column"] == "compliant"
            else f"score it on the judge's scale, {html.escape(label['expected'])}, by the rubric below")
    hidden = (" The systems' names are hidden too (the exported CSV leaves them blank; the audit matches each row "
              "by its transcript key).") if blind else ""
    return TEMPLATE.format(csp=csp, count=len(rows), style=STYLE, data=payload, script=SCRIPT, sample=sample,
                           task=task, blind=hidden)


def _hash(text: str) -> str:
    return "sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode("ascii")


def _clean(text: Any) -> str:
    text = str(text or "")
    text = _SIM_MARKER.sub("", text).rstrip() if "[[sim:" in text else text
    if len(text) > _MAX_TURN_CHARS:
        text = text[:_MAX_TURN_CHARS] + f" … [{len(text) - _MAX_TURN_CHARS} more characters]"
    return cast("str", text)


def _turns(record: Any) -> list[dict[str, str]]:
    if not isinstance(record, Mapping):
        return [{"role": "note", "text": "This transcript is not in the run folder."}]
    turns = []
    for turn in record.get("turns") or []:
        if not isinstance(turn, Mapping):
            continue
        role = str(turn.get("role", "?"))
        if role == "tool" and turn.get("name"):
            role = f"tool result ({turn['name']})"
        text = _clean(turn.get("content"))
        for call in turn.get("tool_calls") or []:
            if isinstance(call, Mapping):
                text += f"\n→ calls {call.get('name')}({_clean(call.get('arguments'))})"
        turns.append({"role": role, "text": text})
    return turns


def _table_fields(sheet: pd.DataFrame, verdicts: pd.DataFrame | None,
                  axes: Sequence[str]) -> dict[tuple[str, str, str], dict[str, Any]]:
    """For an import: each sampled transcript's own columns, without the axes and anything a judge produced."""
    if verdicts is None:
        return {}
    hidden = CORE_COLUMNS | set(axes) | set(sheet.columns)
    shown = [c for c in verdicts.columns if c not in hidden]
    replicate = verdicts["replicate"].astype(str) if "replicate" in verdicts.columns else pd.Series("0", index=verdicts.index)
    firsts = verdicts.assign(_r=replicate).drop_duplicates(["system", "case_id", "_r"])
    out = {}
    for row in firsts[["system", "case_id", "_r", *shown]].astype(object).to_dict("records"):
        out[(str(row["system"]), str(row["case_id"]), str(row["_r"]))] = {
            c: _clean(json_ready(row[c], other=str)) for c in shown if json_ready(row[c], other=str) is not None}
    return out
