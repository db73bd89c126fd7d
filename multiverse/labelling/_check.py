"""Checking a filled labelling sheet against the sample it says it is, before any label is used.

The anchored rates rest on a uniform random sample (``analysis.anchoring``),
so a sheet that names its sample is held to it: the sample is drawn again
from the run with the sheet's seed and n, and the sheet must name this run
and that sample's keys. Every row must then be one drawn transcript, once,
as drawn (system, case, replicate). A row that is not is refused, never
ignored: a sheet that grew rows, or whose keys were edited, is not the sample
any more, and people should hear so rather than read a rate that quietly
rests on fewer rows. Fewer rows than drawn (labelling stopped part way, or
rows deleted) is allowed and counted in a note. A labels file with no
identity at all (a sheet drawn before sheets had one, or labels made
elsewhere) is used as it is, with a note that nothing checked it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from ..analysis.anchoring import transcript_keys
from ..errors import InputError
from ._identity import IDENTITY_COLUMNS
from ._sample import draw_sample

__all__ = ["check_sheet"]


def check_sheet(labels: pd.DataFrame, verdicts: pd.DataFrame, transcripts: Mapping[str, Any] | None, *,
                factors: Sequence[str] = (), axes: Sequence[str] = (), source: str = "human labels") -> list[str]:
    """Refuse (InputError, one line) ``labels`` whose rows are not the sample they name; return notes.

    ``verdicts``, ``transcripts``, ``factors`` and ``axes`` are the run's, as
    ``label_run`` drew from them. Row numbers in messages are file rows
    (the header is row 1).
    """
    given = [c for c in IDENTITY_COLUMNS if c in labels.columns]
    if not given:
        return [f"{source} does not say which sample it is ({', '.join(IDENTITY_COLUMNS)} are missing, as in a sheet "
                "drawn by an earlier version or labels made elsewhere): nothing checked that its rows are the uniform "
                "random sample the anchored rates assume; a newly drawn sheet is checked"]
    if len(given) < len(IDENTITY_COLUMNS):
        missing = [c for c in IDENTITY_COLUMNS if c not in given]
        raise InputError(f"{source}: {missing[0]}: column missing; expected all of {', '.join(IDENTITY_COLUMNS)} "
                         "as the sheet was written", param="human")
    for column in ("system", "case_id", "replicate", "transcript_key"):
        if column not in labels.columns:  # the sheet has them all: without one its rows cannot be told apart
            raise InputError(f"{source}: {column}: column missing; expected the sheet's columns with its sample's",
                             param="human")
    rows = labels.reset_index(drop=True).astype(object).where(labels.reset_index(drop=True).notna(), "")
    rows = rows.astype(str).apply(lambda column: column.str.strip())
    rows = rows[rows.ne("").any(axis=1)]  # a spreadsheet's trailing empty rows say nothing
    identity = {c: _one_value(rows, c, source) for c in IDENTITY_COLUMNS}
    seed, n = _whole(identity, "sample_seed", 0, source), _whole(identity, "sample_n", 1, source)
    sample = draw_sample(verdicts, transcripts, n, seed, factors, axes)
    expected = sample.attrs["identity"]
    if identity["sample_run"] != expected["sample_run"]:
        raise InputError(f"{source}: sample_run: the sheet was drawn from another run, or from this one before its "
                         f"transcripts changed; expected {expected['sample_run']}, got {_shown(identity['sample_run'])}",
                         param="human")
    if identity["sample_keys"] != expected["sample_keys"]:
        raise InputError(f"{source}: sample_keys: seed {seed} and n {n} draw the keys {expected['sample_keys']} from "
                         f"this run, the sheet says {_shown(identity['sample_keys'])}; expected the identity as the sheet was "
                         "written (sample_seed, sample_n and sample_keys edited?)", param="human")
    drawn = sample.assign(_key=sample.attrs["keys"]).set_index("_key")
    keys = transcript_keys(rows)
    _check_rows(rows, keys, drawn, seed, source)
    return _coverage(rows, keys, len(drawn), source)


def _one_value(rows: pd.DataFrame, column: str, source: str) -> str:
    values = rows[column]
    first = values.iloc[0] if len(values) else ""
    odd = values.ne(first) | values.eq("")
    if odd.any():
        row = int(odd.idxmax()) + 2
        what = "is blank" if values[odd.idxmax()] == "" else f"is {_shown(values[odd.idxmax()])!r}"
        raise InputError(f"{source}: row {row}: {column} {what}; expected {_shown(first)!r} as on row "
                         f"{int(values.index[0]) + 2}"
                         " (every row carries the same sample identity: a row added or edited?)", param="human")
    return str(first)


def _whole(identity: dict[str, str], column: str, least: int, source: str) -> int:
    text = identity[column]
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < least or len(text) > 18:
        raise InputError(f"{source}: {column}: expected a whole number, at least {least}, got {_shown(text)!r}", param="human")
    return value


def _check_rows(rows: pd.DataFrame, keys: pd.Series, drawn: pd.DataFrame, seed: int, source: str) -> None:
    """Each row one drawn transcript, once, with the system, case and replicate it was drawn with."""
    outside = ~keys.isin(drawn.index)
    if outside.any():
        i = outside.idxmax()
        name = rows.at[i, "transcript_key"] if "transcript_key" in rows.columns and rows.at[i, "transcript_key"] else (
            f"{rows.at[i, 'system']}/{rows.at[i, 'case_id']}")
        raise InputError(f"{source}: row {i + 2}: transcript {_shown(name)!r} was not drawn in this sample (seed {seed}); "
                         f"expected only the sheet's own rows ({int(outside.sum())} such rows)", param="human")
    twice = keys.duplicated(keep=False)
    if twice.any():
        key = keys[twice].iloc[0]
        where = [str(i + 2) for i in keys.index[keys.eq(key)]]
        raise InputError(f"{source}: rows {' and '.join(where)}: the same drawn transcript twice; expected each "
                         "drawn transcript on one row", param="human")
    for column in ("system", "case_id", "replicate"):
        if column not in rows.columns:
            continue
        want = drawn.loc[keys, column].astype(str).to_numpy()
        have = rows[column].to_numpy()
        wrong = [i for i, (w, h) in enumerate(zip(want, have)) if w != h and not _same_number(w, h)]
        if wrong:
            i = wrong[0]
            raise InputError(f"{source}: row {rows.index[i] + 2}: {column}: the transcript of this row was drawn with "
                             f"{column} {want[i]!r}, the row says {_shown(have[i])!r} (the row edited?)", param="human")


def _shown(text: str) -> str:
    # What a sheet says is echoed in one line, never at any length.
    return text if len(text) <= 40 else text[:40] + f"... ({len(text)} characters)"


def _same_number(a: str, b: str) -> bool:
    # A spreadsheet writes replicate 0 back as 0.0.
    try:
        return float(a) == float(b)
    except ValueError:
        return False


def _coverage(rows: pd.DataFrame, keys: pd.Series, drawn: int, source: str) -> list[str]:
    if "compliant" not in rows.columns:
        return []
    labelled = int(rows["compliant"].ne("").sum())
    absent = drawn - len(rows)
    if labelled == drawn:
        return []
    gone = f"; {absent} drawn transcripts have no row in it (rows removed)" if absent else ""
    return [f"{source}: {labelled} of the {drawn} drawn transcripts are labelled{gone}"]
