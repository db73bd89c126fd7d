"""The explorer's data document: a run's tables as compact, JSON-able columns.

What the page needs at once (universes, their options, the rates per universe
x system with CIs and n, the cases) is plain columns of small integers and
numbers, with every repeated string stored once in a list and referred to by
index. What it needs only when a reader opens a universe (the verdict rows,
transcripts and criterion-level rationales) sits in lazy blocks (see
``_packing``): at 1,000 universes x 5 systems x 120 cases that keeps the page
small and quick to open. Turns and rationales are numbers into the
document's long texts, each stored once, in chunks (``_packing.Strings``);
the rationales of one transcript's judgments sit side by side, so opening a
case inflates a chunk or two.

Text is carried as it is (the page escapes it on the way out), except the
simulated world's hidden ground-truth markers, which no reader should see.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import pandas as pd

from multiverse.core import (
    COUNTED_STATUS,
    OK,
    STATUSES,
    counted_word,
    orient_rates,
    rate_name,
    shared_text,
    universe_label,
)
from multiverse.tables import split_factors, universe_ids

from ..errors import InputError
from ..sim import strip_markers
from ._packing import Strings, pack

if TYPE_CHECKING:
    from multiverse.results import Results

__all__ = ["FORMAT", "VERDICTS", "document_from_results", "document_from_run", "explorer_document", "read_transcripts"]

FORMAT = "multiverse-explorer/1"
#: The verdict of a row, as the page names it: a label for counted rows, else the row's status.
VERDICTS: tuple[str, ...] = ("compliant", "non-compliant", "unlabelled", *(s for s in STATUSES if s != COUNTED_STATUS))
# A longer turn or rationale is cut, so one runaway answer does not swamp the page or the file.
MAX_TEXT_CHARS = 4000


def explorer_document(
    verdicts: pd.DataFrame,
    criteria: pd.DataFrame | None = None,
    rates: pd.DataFrame | None = None,
    transcripts: Mapping[str, Mapping[str, Any]] | Iterable[Mapping[str, Any]] | None = None,
    *,
    axes: Sequence[str],
    factors: Sequence[str] = (),
    primary: str | None = None,
    ci_method: str | pd.DataFrame = "wilson",
    level: float = 0.95,
    options: Mapping[str, Sequence[Any]] | None = None,
    labels: Mapping[str, str | None] | None = None,
    title: str = "audit",
    simulated: bool = False,
    rates_read: str = "compliance",
) -> dict[str, Any]:
    """The data document the explorer page draws (``render_explorer``), from a run's tables.

    ``verdicts``, ``criteria`` and ``rates`` are the run folder's tables
    (``tables.load_run``); ``transcripts`` maps a transcript key to its record
    (``transcripts.jsonl``: ``turns``, ``status``, ``reason``), or is an
    iterable of records with a ``key``. ``rates`` supplies each universe x
    system's rate and CI (its ``subgroup == "all"`` rows); without it they are
    computed with ``analysis.curve.spec_curve`` at ``ci_method`` and ``level``
    (``ci_method`` may be a per-universe table, as ``spec_curve`` takes).
    ``options`` gives each axis's options in declared order, ``labels`` a
    label per universe id. ``primary`` is the primary universe's id, or None.
    ``rates_read`` (``compliance`` or ``violation``): which way the page reads
    the rates; they, their intervals and counts flip by ``core.orient``.
    """
    verdicts, axes, factors = _checked(verdicts, axes, factors)
    universe_order, primary = _universe_order(verdicts, primary)
    systems = _unique(verdicts["system"])
    cases = _unique(verdicts["case_id"])
    first = verdicts.drop_duplicates("universe_id").set_index("universe_id").loc[universe_order]
    axis_entries, axis_codes = _axis_options(first, axes, options or {})
    curve = _rates(verdicts, rates, axes, ci_method, level)
    curve = _ranked(curve[curve["universe_id"].isin(universe_order) & curve["system"].isin(systems)])
    # Ranks stay the ranking analysis's (1 = the best system either way); the rates flip (core.orient).
    curve = orient_rates(curve, rates_read, position="")
    strings = Strings()
    rows, texts = _case_rows(verdicts, criteria, transcripts, universe_order, systems, cases, strings)
    chunks, starts = strings.packed()
    return {
        "format": FORMAT,
        "title": str(title),
        "simulated": bool(simulated),
        "ci": _ci_label(ci_method, level),
        "rate_name": rate_name(rates_read),
        "counted": counted_word(rates_read),
        "axes": axis_entries,
        "systems": systems,
        "primary": universe_order.index(primary) if primary is not None else None,
        "universes": {"id": universe_order, "label": _universe_labels(first, axes, universe_order, labels or {}),
                      "options": axis_codes},
        "cases": {"id": cases, "factors": _factor_levels(verdicts, factors, cases)},
        "rates": _rate_columns(curve, universe_order, systems),
        "verdicts": rows.pop("_names"),
        "blocks": {"rows": pack(rows), "texts": pack(texts), "strings": chunks},
        "string_chunks": starts,
    }


def _checked(verdicts: pd.DataFrame, axes: Sequence[str], factors: Sequence[str]
             ) -> tuple[pd.DataFrame, list[str], list[str]]:
    """The verdicts with text ids and a ``universe_id``, their axes, and their design factors (axes that vary
    inside a universe among them)."""
    missing = [c for c in ("system", "case_id", "compliant") if c not in verdicts.columns]
    if missing:
        raise InputError(f"verdicts: {', '.join(missing)}: expected column(s) to be present", param="verdicts")
    found, extra = split_factors(verdicts, [a for a in axes if a in verdicts.columns])
    found_factors = [f for f in (*factors, *extra) if f in verdicts.columns]
    if "universe_id" not in verdicts.columns:
        verdicts = verdicts.assign(universe_id=universe_ids(verdicts, found).to_numpy())
    verdicts = verdicts.assign(universe_id=verdicts["universe_id"].astype(str), system=verdicts["system"].astype(str),
                               case_id=verdicts["case_id"].astype(str))
    return verdicts, found, found_factors


def _universe_order(verdicts: pd.DataFrame, primary: str | None) -> tuple[list[str], str | None]:
    """The universe ids in order of first appearance, the primary first; and the primary, when the verdicts hold it."""
    order = _unique(verdicts["universe_id"])
    if primary is None or str(primary) not in order:
        return order, None
    primary = str(primary)
    return [primary] + [u for u in order if u != primary], primary


def _axis_options(first: pd.DataFrame, axes: list[str], options: Mapping[str, Sequence[Any]]
                  ) -> tuple[list[dict[str, Any]], list[list[int]]]:
    """Each axis's options (declared ones in declared order, then the rest as found) and each universe's codes."""
    entries, codes = [], []
    for axis in axes:
        seen = [str(v) for v in dict.fromkeys(first[axis].astype(str))]
        declared = [str(o) for o in options.get(axis, [])]
        names = [o for o in declared if o in seen] + [o for o in seen if o not in declared]
        entries.append({"name": str(axis), "options": names})
        lookup = {o: i for i, o in enumerate(names)}
        codes.append([lookup[str(v)] for v in first[axis]])
    return entries, codes


def _universe_labels(first: pd.DataFrame, axes: list[str], universes: list[str],
                     labels: Mapping[str, str | None]) -> list[str]:
    """Each universe's label: the one given, else the one rule for its options (``core.universe_label``)."""
    return [str(labels.get(u) or universe_label({a: first.at[u, a] for a in axes})) for u in universes]


def _factor_levels(verdicts: pd.DataFrame, factors: list[str], cases: list[str]) -> list[dict[str, Any]]:
    """Each design factor's levels and each case's level (a factor is constant inside a case)."""
    case_first = verdicts.drop_duplicates("case_id").set_index("case_id").loc[cases]
    entries = []
    for factor in factors:
        levels = list(dict.fromkeys(case_first[factor].astype(str)))
        lookup = {v: i for i, v in enumerate(levels)}
        entries.append({"name": str(factor), "levels": levels,
                        "codes": [lookup[v] for v in case_first[factor].astype(str)]})
    return entries


def _rate_columns(curve: pd.DataFrame, universes: list[str], systems: list[str]) -> dict[str, list[Any]]:
    """The rates of every universe x system as columns, with the ranking analysis's ranks."""
    return {
        "universe": _codes(curve["universe_id"], universes),
        "system": _codes(curve["system"], systems),
        "n": curve["n"].astype(int).tolist(),
        "k": curve["n_compliant"].astype(int).tolist(),
        "rate": _numbers(curve["rate"]),
        "low": _numbers(curve["ci_low"]),
        "high": _numbers(curve["ci_high"]),
        # The ranking analysis's own ranks (on the unrounded rates): the page's rank chart and "ranked
        # first" split ties with them exactly as P(top) does.
        "rank": curve["rank"].astype(int).tolist(),
        "tied": curve["tied"].astype(int).tolist(),
    }


def _rates(verdicts: pd.DataFrame, rates: pd.DataFrame | None, axes: list[str], ci_method: Any,
           level: float) -> pd.DataFrame:
    """universe_id, system, n, n_compliant, rate, ci_low, ci_high: the run's own, else computed as the curve does."""
    needed = {"universe_id", "system", "n", "n_compliant", "rate", "ci_low", "ci_high"}
    if rates is not None and needed <= set(rates.columns):
        table = rates[rates["subgroup"].astype(str) == "all"] if "subgroup" in rates.columns else rates
        return table.assign(universe_id=table["universe_id"].astype(str), system=table["system"].astype(str))
    from multiverse.analysis import spec_curve

    return spec_curve(verdicts, axes=axes, ci=ci_method, level=level)


def _ranked(curve: pd.DataFrame) -> pd.DataFrame:
    """The rate rows with each system's rank in its universe and the size of its tie (``universe_ranks``)."""
    from multiverse.analysis import universe_ranks

    usable = curve[np.isfinite(curve["rate"].to_numpy(dtype=float))]
    ranked = universe_ranks(usable[["universe_id", "system", "rate"]]) if len(usable) else usable.assign(rank=0, tied=0)
    keys = ["universe_id", "system"]
    return curve.merge(ranked[[*keys, "rank", "tied"]], on=keys, how="left").fillna({"rank": 0, "tied": 0})


def _unique(series: pd.Series) -> list[str]:
    """Distinct values in order of first appearance (fast on millions of rows, unlike a dict)."""
    return [str(x) for x in pd.unique(series.to_numpy(dtype=object))]


def _codes(series: pd.Series, values: list[str]) -> list[int]:
    """Each row's index in ``values`` (-1: not there)."""
    return cast("list[int]", pd.Categorical(series.to_numpy(dtype=object), categories=values).codes.astype(int).tolist())


def _case_rows(verdicts: pd.DataFrame, criteria: pd.DataFrame | None, transcripts: Any, universes: list[str],
               systems: list[str], cases: list[str], strings: Strings) -> tuple[dict[str, Any], dict[str, Any]]:
    """The verdict rows as columns, and the transcripts and criterion rows they refer to (their long texts
    numbers into ``strings``)."""
    v = verdicts
    status = v["status"].astype(str) if "status" in v.columns else pd.Series(COUNTED_STATUS, index=v.index)
    try:
        label = v["compliant"].astype("boolean")
    except (TypeError, ValueError):
        raise InputError("verdicts: column 'compliant': expected true/false values", param="verdicts") from None
    counted = status.eq(COUNTED_STATUS)
    named = np.select([counted & label.eq(True).fillna(False), counted & label.eq(False).fillna(False), counted],
                      ["compliant", "non-compliant", "unlabelled"], default=status.to_numpy(dtype=object))
    scored: list[str] = []
    if "score" in v.columns:
        # A scored row's verdict is its score, as the judge gave it on the scale ("score 7").
        score = pd.to_numeric(v["score"], errors="coerce").to_numpy(dtype=float, na_value=np.nan)
        has = counted.to_numpy() & ~np.isnan(score)
        if has.any():
            values = np.unique(score[has])
            # Two scores can print alike ("score 0.666667" for 2/3 summed two ways): one name each, once.
            shown = np.array([f"score {x:g}" for x in values], dtype=object)
            scored = list(dict.fromkeys(shown))
            named = np.where(has, shown[np.searchsorted(values, np.where(has, score, values[0]))], named)
    verdict_names = list(VERDICTS) + scored + sorted(set(pd.unique(named)) - set(VERDICTS) - set(scored))
    reason_text = v["reason"].fillna("").astype(str) if "reason" in v.columns else pd.Series("", index=v.index)
    reason_code, reasons = pd.factorize(np.concatenate([[""], reason_text.to_numpy(dtype=object)]))
    # A reason can name a file of this machine; the page travels (core._shared_path).
    reasons = [shared_text(strip_markers(str(r)) if "[[sim:" in str(r) else str(r)) for r in reasons]
    t_code, t_keys = _keys(v, "transcript_key")
    j_code, j_keys = _keys(v, "judgment_key")
    replicate = v["replicate"] if "replicate" in v.columns else None
    rows = {
        "universe": _codes(v["universe_id"], universes),
        "system": _codes(v["system"], systems),
        "case": _codes(v["case_id"], cases),
        "replicate": (pd.to_numeric(replicate, errors="coerce").fillna(0).astype(int).tolist()
                      if replicate is not None and pd.to_numeric(replicate, errors="coerce").fillna(0).any() else None),
        "verdict": _codes(pd.Series(named), verdict_names),
        "reason": reason_code[1:].astype(int).tolist(),
        "reasons": reasons,
        "transcript": t_code,
        "judgment": j_code,
        "_names": verdict_names,
    }
    # Each judgment's transcript, so the rationales of one transcript's judgments are stored side by side.
    transcript_of = np.full(len(j_keys), -1, dtype=np.int64)
    judged = np.asarray(j_code) >= 0
    transcript_of[np.asarray(j_code)[judged]] = np.asarray(t_code)[judged]
    texts = {"transcripts": _transcripts(transcripts, t_keys, strings), "judgments": j_keys,
             "criteria": _criteria(criteria, j_keys, transcript_of, strings)}
    return rows, texts


def _keys(v: pd.DataFrame, column: str) -> tuple[list[int], list[str]]:
    """Per row, the index of its key in the list of distinct keys (-1: none)."""
    if column not in v.columns:
        return [-1] * len(v), []
    keys = v[column].where(v[column].notna() & v[column].astype(str).ne(""))
    code, unique = pd.factorize(keys.astype(object))
    return code.astype(int).tolist(), [str(k) for k in unique]


def _transcripts(transcripts: Any, keys: list[str], strings: Strings) -> list[dict[str, Any] | None]:
    """One entry per referenced key, in ``keys`` order: turns (their content a number into ``strings``), status,
    reason (None: not available)."""
    if transcripts is None:
        return [None] * len(keys)
    if not isinstance(transcripts, Mapping):
        transcripts = {str(r.get("key")): r for r in transcripts if isinstance(r, Mapping)}
    out: list[dict[str, Any] | None] = []
    for key in keys:
        record = transcripts.get(key)
        if not isinstance(record, Mapping):
            out.append(None)
            continue
        turns = []
        for turn in record.get("turns") or []:
            if not isinstance(turn, Mapping):
                continue
            entry: dict[str, Any] = {"role": str(turn.get("role", "?")),
                                     "content": strings.add(_text(turn.get("content")))}
            if turn.get("name"):
                entry["name"] = str(turn["name"])
            calls = [[str(c.get("name", "?")), _text(c.get("arguments"))]
                     for c in turn.get("tool_calls") or [] if isinstance(c, Mapping)]
            if calls:
                entry["calls"] = calls
            turns.append(entry)
        out.append({"status": str(record.get("status") or OK), "reason": shared_text(_text(record.get("reason"))),
                    "turns": turns})
    return out


def _criteria(criteria: pd.DataFrame | None, judgments: list[str], transcript_of: np.ndarray, strings: Strings) -> dict[str, Any]:
    """The criterion rows of the referenced judgments, as columns (``judgment`` indexes ``judgments``, ``rationale``
    numbers into ``strings``), by transcript, then judgment, then the table's order."""
    empty: dict[str, list[Any]] = {"judgment": [], "sample": [], "criterion": [], "names": [], "permissible": [], "applicable": [],
             "compliant": [], "rationale": []}
    if criteria is None or "judgment_key" not in criteria.columns or not judgments:
        return empty
    index = {k: i for i, k in enumerate(judgments)}
    c = criteria[criteria["judgment_key"].astype(str).isin(index)]
    if c.empty:
        return empty
    judgment = c["judgment_key"].astype(str).map(index).astype(int).to_numpy()
    order = np.lexsort((np.arange(len(c)), judgment, transcript_of[judgment]))
    c, judgment = c.iloc[order], judgment[order]
    code, names = pd.factorize(c["criterion"].astype(str)) if "criterion" in c.columns else (np.zeros(len(c), int), ["?"])
    return {
        "judgment": judgment.tolist(),
        "sample": pd.to_numeric(c["sample"], errors="coerce").fillna(0).astype(int).tolist()
        if "sample" in c.columns else [0] * len(c),
        "criterion": code.astype(int).tolist(),
        "names": [str(n) for n in names],
        "permissible": _flags(c, "permissible"),
        "applicable": _flags(c, "applicable"),
        "compliant": _flags(c, "compliant"),
        "rationale": [strings.add(_text(r)) for r in c["rationale"]] if "rationale" in c.columns
        else [strings.add("")] * len(c),
    }


def _flags(frame: pd.DataFrame, column: str) -> list[int | None]:
    if column not in frame.columns:
        return [None] * len(frame)
    return [None if pd.isna(x) else int(bool(x)) for x in frame[column].astype("boolean")]


def _text(value: Any) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    text = strip_markers(text) if "[[sim:" in text else text
    if len(text) > MAX_TEXT_CHARS:
        text = text[:MAX_TEXT_CHARS] + f" … [{len(text) - MAX_TEXT_CHARS} more characters]"
    return text


def _numbers(series: pd.Series) -> list[float | None]:
    return [None if not np.isfinite(x) else round(float(x), 4) for x in series.to_numpy(dtype=float)]


def _ci_label(ci_method: Any, level: float) -> str:
    if isinstance(ci_method, pd.DataFrame):
        methods = set(ci_method["ci"].astype(str)) if "ci" in ci_method.columns else set()
        levels = set(ci_method["level"].astype(float)) if "level" in ci_method.columns else {level}
        if len(methods) == 1 and len(levels) == 1:
            return f"{methods.pop()} {levels.pop():.0%}"
        return "per universe"
    return f"{ci_method} {level:.0%}"


def read_transcripts(path: str | os.PathLike[str]) -> dict[str, dict[str, Any]]:
    """A run folder's ``transcripts.jsonl`` as key -> record ({} when the folder has none).

    Read by the folder's one reader (``multiverse.tables._folder``): a link out of the
    folder, a FIFO or a line that is not a transcript is refused in one line.
    """
    from multiverse.tables import read_transcripts as read_folder_transcripts

    path = Path(path)
    if path.is_dir():
        return read_folder_transcripts(path) or {}
    return read_folder_transcripts(path.parent, path.name) or {}  # the file itself: its folder is the boundary


def document_from_run(source: str | os.PathLike[str], *, store: Any = None) -> dict[str, Any]:
    """``explorer_document`` of a run directory, import directory or bare verdicts table (``tables.load_run``).

    See :func:`document_from_results` for where transcripts come from.
    """
    from multiverse.results import load_run

    return document_from_results(load_run(source), store=store)


def document_from_results(results: Results, *, store: Any = None, rates: pd.DataFrame | None = None,
                          transcripts: Mapping[str, Mapping[str, Any]] | None = None) -> dict[str, Any]:
    """``explorer_document`` of a :class:`~multiverse.results._results.Results` (a run, an import or a table).

    Transcripts come from the run folder's ``transcripts.jsonl``; a folder
    without one (an older run) shows them only from a ``store`` the caller
    names (a directory or a ``multiverse.store._store.Store``), never from the store
    its manifest names (``multiverse.tables._folder.shown_transcripts``).
    ``transcripts``: the ones that rule already chose (the report's), so they
    are not read twice. ``rates`` replaces the results' own rates table.
    """
    from multiverse.tables import shown_transcripts

    ci, _ = results.ci_settings()
    if rates is None:
        rates = results.rate_table()
        if not (pd.to_numeric(rates["n"], errors="coerce") > 0).any():
            # Nothing counted (say, every verdict failed): no curve to draw, said as the curve itself says it.
            from multiverse.errors import InputError

            raise InputError("verdicts: status: expected at least one ok verdict with a compliant label")
    if transcripts is None:
        transcripts = shown_transcripts(results.source, results.verdicts, store)[0] or {}
    return explorer_document(
        results.verdicts, results.criteria, rates, transcripts,
        axes=results.axes, factors=results.factors, primary=results.primary,
        ci_method=ci if ci is not None else "wilson", options=results.options,
        labels=results.universe_labels(), title=results.name, simulated=results.simulated,
        rates_read=results.rate_direction,
    )
