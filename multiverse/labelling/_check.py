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

from multiverse.analysis import transcript_keys

from ..errors import InputError
from ._identity import IDENTITY_COLUMNS
from ._sample import LABEL_COLUMNS, draw_sample

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
    rows = _fill_blind(rows, drawn)
    _check_keys(rows, drawn, seed, n, source)
    keys = transcript_keys(rows)
    _check_rows(rows, keys, drawn, seed, n, source)
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


def _fill_blind(rows: pd.DataFrame, drawn: pd.DataFrame) -> pd.DataFrame:
    """A blank ``system`` (a page that hid the systems' names) is the system its row's drawn transcript_key names."""
    if "transcript_key" not in drawn.columns:
        return rows
    by_key = drawn.reset_index().drop_duplicates("transcript_key").set_index("transcript_key")["system"].astype(str)
    by_key = by_key[by_key.index.astype(str) != ""]
    blank = rows["system"].eq("") & rows["transcript_key"].isin(by_key.index)
    if not blank.any():
        return rows
    rows = rows.copy()
    rows.loc[blank, "system"] = rows.loc[blank, "transcript_key"].map(by_key)
    return rows


def _check_keys(rows: pd.DataFrame, drawn: pd.DataFrame, seed: int, n: int, source: str) -> None:
    """Every row names a drawn transcript by its own ``transcript_key`` (where the sample has keys), once."""
    has_keys = "transcript_key" in drawn.columns and drawn["transcript_key"].astype(str).str.strip().ne("").all()
    if has_keys:
        blank = rows["transcript_key"].eq("")
        if blank.any():
            i = blank.idxmax()
            raise InputError(f"{source}: row {i + 2}: transcript_key is blank; expected the key this row was written "
                             f"with{_guess(rows.loc[i], drawn)} ({int(blank.sum())} such rows)", param="human")
    for column in ("system", "case_id"):
        blank = rows[column].eq("")
        if blank.any():
            i = blank.idxmax()
            raise InputError(f"{source}: row {i + 2}: {column} is blank; expected the {column} this row's transcript "
                             f"was drawn with ({int(blank.sum())} such rows)", param="human")


def _guess(row: pd.Series, drawn: pd.DataFrame) -> str:
    """", K (the drawn transcript of system S, case C, replicate R)" when the row's other cells name one drawn row."""
    same = drawn[(drawn["system"].astype(str) == row["system"]) & (drawn["case_id"].astype(str) == row["case_id"])]
    if "replicate" in drawn.columns:
        same = same[[_same_number(str(r), str(row["replicate"])) for r in same["replicate"]]]
    where = f"system {_shown(row['system'])}, case {_shown(row['case_id'])}, replicate {_shown(row['replicate'])}"
    if len(same) == 1:
        return f", {_shown(str(same['transcript_key'].iloc[0]))!r} (the drawn transcript of {where})"
    if len(same) > 1:
        keys = ", ".join(repr(_shown(str(k))) for k in same["transcript_key"].iloc[:3])
        return f", one of {keys} (the {len(same)} drawn transcripts of {where}, one per rollout configuration)"
    return ""


def _check_rows(rows: pd.DataFrame, keys: pd.Series, drawn: pd.DataFrame, seed: int, n: int, source: str) -> None:
    """Each row one drawn transcript, once, with the system, case and replicate it was drawn with."""
    outside = ~keys.isin(drawn.index)
    if outside.any():
        i = outside.idxmax()
        by_key = "transcript_key" in rows.columns and rows.at[i, "transcript_key"] != ""
        field = "transcript_key" if by_key else "system, case_id and replicate"
        name = rows.at[i, "transcript_key"] if by_key else (
            f"{rows.at[i, 'system']}/{rows.at[i, 'case_id']}/{rows.at[i, 'replicate']}")
        numeric = by_key and _looks_numeric(str(name))
        raise InputError(f"{source}: row {i + 2}: {field}: transcript {_shown(name)!r} was not drawn in this sample "
                         f"(seed {seed}) of {n} per system; expected one of the sheet's own rows, as written "
                         f"({int(outside.sum())} such rows)"
                         + ("; a spreadsheet may have read the key as a number" if numeric else ""), param="human")
    twice = keys.duplicated(keep=False)
    if twice.any():
        key = keys[twice].iloc[0]
        where = [str(i + 2) for i in keys.index[keys.eq(key)]]
        raise InputError(f"{source}: rows {' and '.join(where)}: transcript_key: the same drawn transcript twice "
                         f"({_shown(str(key))!r}); expected each drawn transcript on one row", param="human")
    for column in ("system", "case_id", "replicate"):
        if column not in rows.columns:
            continue
        want = drawn.loc[keys, column].astype(str).to_numpy()
        have = rows[column].to_numpy()
        wrong = [i for i, (w, h) in enumerate(zip(want, have)) if w != h and not _same_number(w, h)]
        if wrong:
            i = wrong[0]
            says = "is blank" if have[i] == "" else f"says {_shown(have[i])!r}"
            raise InputError(f"{source}: row {rows.index[i] + 2}: {column}: the transcript of this row was drawn with "
                             f"{column} {want[i]!r}, the row {says} (the row edited?)", param="human")


def _looks_numeric(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


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
    label = next((c for c in LABEL_COLUMNS if c in rows.columns), None)
    if label is None:
        return []
    labelled = int(rows[label].ne("").sum())
    absent = drawn - len(rows)
    if labelled == drawn:
        return []
    gone = f"; {absent} drawn transcripts have no row in it (rows removed)" if absent else ""
    return [f"{source}: {labelled} of the {drawn} drawn transcripts are labelled{gone}"]
