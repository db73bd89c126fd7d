"""What every importer checks alike: the budget of bytes and rows, the names, the transcripts, the numbers.

- :func:`import_budget`: one :class:`~multiverse.core.ImportBudget` per import, its
  refusals naming the option that raises the limit (``max_bytes``, ``max_rows``,
  ``max_transcript_bytes``);
- :func:`checked_names`: names people read (systems, judges, options, factors,
  criteria) hold no control or invisible character, fit a line of a figure
  (``MAX_NAME_CHARS``; a case id ``MAX_CASE_ID_CHARS``), and no two look alike
  (UTS #39 skeletons), or look-alikes are merged when ``merge_look_alikes`` asks;
- :func:`checked_transcripts`: every transcript fits one line the folder's reader reads;
- :func:`check_storable`: the verdicts' numbers fit the columns that store them.

Each runs before anything is written: a refusal leaves no file behind.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import pandas as pd

from multiverse.core import (
    ImportBudget,
    both_spellings,
    confusable,
    look_alike,
    merged_spellings,
    unshowable_problem,
)
from multiverse.errors import InputError

__all__ = ["MAX_CASE_ID_CHARS", "MAX_NAME_CHARS", "MAX_REPLICATE", "check_storable", "checked_names", "checked_transcripts", "import_budget",
           "one_name_each", "text_only"]

#: Replicates beyond this are a misread column, not epochs.
MAX_REPLICATE = 1_000_000
#: A system, judge, option, factor level or criterion is a label in every table, figure and report: a
#: name of 100,000 characters took the report four minutes and then all its memory. A case id may be
#: a whole prompt (promptfoo's descriptions), so it may be longer; it is shown cut.
MAX_NAME_CHARS, MAX_CASE_ID_CHARS = 200, 20_000
_SURROGATE = re.compile("[\ud800-\udfff]")
# A JSON or YAML escape of a surrogate (``\\ud800``): the only way a parsed document holds a lone one.
_SURROGATE_ESCAPE = re.compile(r"\\[uU]0{0,4}[dD][89a-fA-F][0-9a-fA-F]{2}")


def text_only(document: Any, source: str) -> Any:
    """``document`` parsed from ``source`` with every lone surrogate as U+FFFD, as a UTF-8 decoder shows one.

    A JSON or YAML escape (``"\\udc80"``) is the one way a file decoded as
    UTF-8 holds half a character: no column, name check or writer could take
    it, so it is read as the replacement character. ``source`` is looked at
    first, so a document without such an escape is not walked.
    """
    return _without_surrogates(document) if _SURROGATE_ESCAPE.search(source) else document


def import_budget(max_bytes: int | None = None, max_rows: int | None = None,
                  max_transcript_bytes: int | None = None) -> ImportBudget:
    """The budget of one import; None keeps a limit's default."""
    from multiverse.tables import MAX_LINE_BYTES

    given = {name: value for name, value in (("max_bytes", max_bytes), ("max_rows", max_rows),
                                             ("max_transcript_bytes", max_transcript_bytes)) if value is not None}
    # The transcripts' lines are read back by the folder's reader, whose line cap no option can pass.
    return ImportBudget(lambda message, option: InputError(message, param=option), max_line_bytes=MAX_LINE_BYTES - 1,
                        **given)


def checked_names(names: Iterable[Any], what: str, *, merge: bool = False, look_alikes: bool = True,
                  param: str | None = None, limit: int = MAX_NAME_CHARS) -> dict[str, str]:
    """Every distinct name in ``names`` mapped to the name it is imported as (itself unless merged).

    A name with an unshowable character is refused. With ``look_alikes``, two
    names with one skeleton are refused, or with ``merge`` the later one is
    read as the first; without it (case ids: many, and never shown side by
    side) only two spellings of one normal form are refused.
    """
    distinct = [str(name) for name in dict.fromkeys(names) if name is not None and name is not pd.NA]
    for name in distinct:
        if len(name) > limit:
            raise InputError(f"{what}: a name of {len(name):,} characters ({name[:30]!a}...); expected at most "
                             f"{limit:,}", param=param)
        if not name.isprintable() or _has_noncharacter(name):
            problem = unshowable_problem(name)
            if problem:
                raise InputError(f"{what}: {problem}", param=param)
    if not look_alikes:
        pair = look_alike(distinct)
        if pair:
            raise InputError(f"{what}: two spellings of one name, {both_spellings(pair)}, that look the same; "
                             "expected each name in one spelling", param=param)
        return {name: name for name in distinct}
    if merge:
        return merged_spellings(distinct)
    pair = confusable(distinct)
    if pair:
        raise InputError(f"{what}: two spellings of one name, {both_spellings(pair)}, that look the same "
                         "(one skeleton under Unicode's confusables, UTS #39); expected names a reader can tell "
                         "apart, or `merge_look_alikes` to read them as one", param="merge_look_alikes")
    return {name: name for name in distinct}


def one_name_each(verdicts: pd.DataFrame, criteria: pd.DataFrame | None, axes: list[str], factors: list[str],
                  *, merge: bool = False) -> tuple[pd.DataFrame, pd.DataFrame | None]:
    """The verdicts and criteria with one rule for every name an import reads: systems, judges, axes and
    their options, factors and their levels, case ids, criteria (scorers' names). Nothing unshowable, no
    two alike (:func:`checked_names`), or with ``merge`` each look-alike read as the first seen.

    Every importer's names end here before anything is written (with ``merge`` off, after an importer
    merged what it read); an importer that builds its frames first (ASSERT) merges here too. Merging
    two names that made two rows of one key is refused: they were two things, not two spellings.
    """
    checked_names(axes, "axes", param="axes")
    checked_names(factors, "factors", param="factors")
    renamed: dict[str, dict[str, str]] = {}
    for frame, columns in ((verdicts, ("system", "judge", *axes, *factors, "case_id")),
                           (criteria, ("criterion_id", "criterion"))):
        for column in dict.fromkeys(columns):
            if frame is not None and column in frame.columns:
                named = checked_names(pd.unique(frame[column].dropna().astype(str)), column, merge=merge,
                                      param="factors" if column in factors else None,
                                      limit=MAX_CASE_ID_CHARS if column == "case_id" else MAX_NAME_CHARS)
                changed = {name: to for name, to in named.items() if name != to}
                if changed:
                    renamed[column] = changed
    if not renamed:
        return verdicts, criteria
    verdicts, criteria = _renamed(verdicts, renamed, axes), None if criteria is None else _renamed(criteria, renamed, axes)
    for frame, key in ((verdicts, ["universe_id", "system", "case_id", "replicate"]),
                       (criteria, ["universe_id", "system", "case_id", "replicate", "criterion_id"])):
        key = [column for column in key if frame is not None and column in frame.columns]
        if frame is not None and key and frame.duplicated(key).any():
            row = frame[frame.duplicated(key, keep=False)].iloc[0]
            raise InputError("merge_look_alikes: merging look-alike names made two rows of one "
                             + ", ".join(f"{column} {row[column]!a}" for column in key)
                             + "; expected look-alikes that are one name spelled two ways", param="merge_look_alikes")
    return verdicts, criteria


def _renamed(frame: pd.DataFrame, renamed: dict[str, dict[str, str]], axes: list[str]) -> pd.DataFrame:
    from multiverse.core import universe_id

    frame = frame.copy()
    for column, changed in renamed.items():
        if column in frame.columns:
            frame[column] = frame[column].map(lambda value, to=changed: to.get(value, value) if isinstance(value, str) else value)
    if "universe_id" in frame.columns and any(axis in renamed for axis in axes):
        # A universe is named by its options: merged options are one universe.
        present = [axis for axis in axes if axis in frame.columns]
        frame["universe_id"] = [universe_id(dict(zip(present, options, strict=True)))
                                for options in frame[present].itertuples(index=False)]
    return frame


def _has_noncharacter(name: str) -> bool:
    return any((ord(c) & 0xFFFE) == 0xFFFE or 0xFDD0 <= ord(c) <= 0xFDEF for c in name)


def checked_transcripts(transcripts: Mapping[str, Mapping[str, Any]] | None, budget: ImportBudget,
                        where: str) -> dict[str, dict[str, Any]] | None:
    """``transcripts`` with each under ``max_transcript_bytes`` as the line it is written as, else refused.

    A lone surrogate (a JSON ``"\\ud800"`` escape in a log) is not text and
    cannot be written as UTF-8: it becomes U+FFFD, as a decoder shows it.
    """
    if transcripts is None:
        return None
    checked: dict[str, dict[str, Any]] = {}
    for key, record in transcripts.items():
        line = json.dumps({"key": key, **record}, ensure_ascii=False)
        if _SURROGATE.search(line):
            record = _without_surrogates(record)
            line = json.dumps({"key": key, **record}, ensure_ascii=False)
        budget.check_transcript(len(line.encode("utf-8")) + 1, f"{where}: transcript of {record.get('system')} "
                                f"({key})")
        checked[key] = dict(record)
    return checked


def _without_surrogates(value: Any) -> Any:
    if isinstance(value, str):
        return _SURROGATE.sub("\ufffd", value)
    if isinstance(value, Mapping):
        return {_without_surrogates(k): _without_surrogates(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_without_surrogates(v) for v in value]
    return value


def check_storable(verdicts: pd.DataFrame) -> None:
    """Refuse verdicts whose replicate numbers do not fit their column (whole numbers, 0 to MAX_REPLICATE).

    The last check before writing: an importer checks each number where it
    reads it (naming the file and field), and this holds for all of them.
    """
    if "replicate" not in verdicts.columns:
        return
    column = verdicts["replicate"]
    if not pd.api.types.is_integer_dtype(column.dtype):
        try:
            values = column.to_numpy(dtype=np.int64)
        except (OverflowError, TypeError, ValueError):
            raise InputError(f"replicate: {_first_bad(column)}; expected a whole number from 0 to "
                             f"{MAX_REPLICATE:,}") from None
    else:
        values = column.to_numpy()
    if len(values) and (values.min() < 0 or values.max() > MAX_REPLICATE):
        bad = values[(values < 0) | (values > MAX_REPLICATE)][0]
        raise InputError(f"replicate: {bad}; expected a whole number from 0 to {MAX_REPLICATE:,}")


def _first_bad(column: pd.Series) -> str:
    for value in column:
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or not 0 <= value <= MAX_REPLICATE:
            shown = repr(value)
            return shown if len(shown) <= 40 else shown[:37] + "..."
    return "a value"
