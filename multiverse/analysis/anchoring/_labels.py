"""Reading human labels and matching them to a run's transcripts (``analysis.anchoring`` uses them).

A labels file is untrusted: every refusal names the file, the row (file
rows, the header is row 1), the field and what was expected.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from multiverse.errors import InputError

from ._scores import human_scores

if TYPE_CHECKING:
    from multiverse.tables import ScaleRecord

__all__ = ["labels_by_key", "read_labels", "transcript_keys"]


def transcript_keys(verdicts: pd.DataFrame) -> pd.Series:
    """One key per verdict row naming its transcript: ``transcript_key``, or system/case/replicate for tables without one."""
    replicate = verdicts["replicate"].astype(str) if "replicate" in verdicts.columns else "0"
    fallback = verdicts["system"].astype(str) + "\x1f" + verdicts["case_id"].astype(str) + "\x1f" + replicate
    if "transcript_key" not in verdicts.columns:
        return fallback
    key = verdicts["transcript_key"]
    return key.astype(object).where(key.notna() & key.astype(str).ne(""), fallback).astype(str)


_TRUE = {"1", "1.0", "true", "yes", "compliant"}
_FALSE = {"0", "0.0", "false", "no", "non-compliant", "noncompliant"}


def read_labels(path: Any) -> pd.DataFrame:
    """Read a human-label file (CSV or parquet) with ``system``, ``case_id``, ``compliant`` or ``score``; InputError otherwise."""
    from pathlib import Path

    from multiverse.core import MAX_IMPORT_BYTES, read_regular_file, regular_file_problem, restore_cell
    from multiverse.tables import csv_header, read_table

    path = Path(path)
    # A sheet of human labels is thousands of rows: past an import's bytes it is not one (a 3 GiB file of
    # NULs read as CSV is one 3 GiB line, and took 19 GB before the kernel stopped it).
    read_regular_file(path, lambda problem: InputError(f"{path}: {problem}", param="human"), limit=MAX_IMPORT_BYTES,
                      what="labels file", probe=True)
    if path.suffix.lower() == ".csv" and not regular_file_problem(path):
        # As text: the table reader would turn yes/no or 1/0 into booleans its own way, or into blanks.
        try:
            sep = _separator(path)
            # By position (tables.csv_header): the row numbers of an index to_csv wrote (an empty header,
            # 'Unnamed: 0' to pandas) are left out; a header named twice is refused.
            header = pd.read_csv(path, header=None, nrows=1, dtype=str, keep_default_na=False,
                                 encoding="utf-8-sig", sep=sep)
            kept = csv_header([restore_cell(c).strip() for c in header.iloc[0]]) if len(header) else []
            frame = pd.read_csv(path, dtype=str, keep_default_na=False, encoding="utf-8-sig", sep=sep,
                                usecols=None if len(kept) == header.shape[1] else kept).map(restore_cell)
            # The sheet's headers are guarded like its cells; a spreadsheet may pad them with spaces.
            frame = frame.rename(columns=lambda c: restore_cell(c).strip())
        except UnicodeDecodeError as exc:
            raise InputError(f"{path}: byte {exc.start + 1} is not UTF-8 (a spreadsheet's own encoding?); expected a "
                             "UTF-8 CSV, as the labelling page exports it (in Excel: Save As, CSV UTF-8)",
                             param="human") from None
        except (ValueError, OSError, pd.errors.ParserError) as exc:
            raise InputError(f"{path}: cannot be read as a table ({str(exc).splitlines()[0]})", param="human") from None
    else:
        frame = read_table(path)
    missing = [c for c in ("system", "case_id") if c not in frame.columns]
    if "compliant" not in frame.columns and "score" not in frame.columns:
        missing.append("compliant (or score, for a scored run)")
    if missing:
        raise InputError(f"{path}: missing column(s) {', '.join(missing)}; expected system, case_id, "
                         "(replicate or transcript_key,) compliant or score", param="human")
    return frame


def _separator(path: Any) -> str:
    """A comma, or the semicolon or tab of a spreadsheet that saved the sheet in its locale's way (header line only)."""
    with open(path, encoding="utf-8-sig", errors="replace") as fh:
        header = fh.readline(65536)
    if "," not in header:
        for sep in (";", "\t"):
            if sep in header:
                return sep
    return ","


def _binary(human: pd.DataFrame, source: str) -> tuple[pd.Series, int]:
    """The labels as 0/1 floats, rows without a label dropped; refuses anything not binary."""
    if "compliant" not in human.columns:
        hint = (" (it has scores, but this run's judge gives compliant labels)" if "score" in human.columns else "")
        raise InputError(f"{source}: compliant: column missing; expected each labelled transcript's label, 0/1 or "
                         f"true/false{hint}", param="human")
    raw = human["compliant"]
    blank = raw.isna() | raw.astype(str).str.strip().eq("")
    text = raw[~blank].astype(str).str.strip().str.lower()
    value = pd.Series(np.nan, index=text.index)
    value[text.isin(_TRUE)] = 1.0
    value[text.isin(_FALSE)] = 0.0
    bad = value.isna()
    if bad.any():
        row = bad.idxmax()
        more = f", and {int(bad.sum()) - 1} more rows" if bad.sum() > 1 else ""
        shown = _shown(str(raw[row]))
        raise InputError(f"{source}: row {int(np.flatnonzero(human.index == row)[0]) + 2}: compliant: expected 0/1, "
                         f"true/false or yes/no, got {shown!r}{more}", param="human")
    return value, int(blank.sum())


_ID_COLUMNS = ("system", "case_id", "replicate", "transcript_key")


def _id_cells(human: pd.DataFrame) -> pd.DataFrame:
    """The rows' identifying cells as text, stripped; a replicate a spreadsheet wrote back as 0.0 reads 0."""
    out = human.copy()
    for column in _ID_COLUMNS:
        if column in out.columns:
            text = out[column].astype(object).where(out[column].notna(), "").astype(str).str.strip()
            if column == "replicate":
                number = pd.to_numeric(text, errors="coerce")
                whole = number.notna() & np.isfinite(number) & (number == number.round()) & (number.abs() < 2**53)
                text = text.where(~whole, number[whole].astype("int64").astype(str))
            out[column] = text
    return out


def _match(verdicts: pd.DataFrame, human: pd.DataFrame, source: str) -> pd.Series:
    """Each labelled row's transcript key; refuses labels for transcripts not in the run, or ambiguous ones.

    A row with a ``transcript_key`` is matched by it (its ``system``, when not
    blank, must agree: a page that hid the systems' names leaves it blank);
    a row without one by system, case and replicate. ``human``'s index is the
    row's position in its file (messages count file rows from 2, after the header).
    """
    human = _id_cells(human)
    transcripts = verdicts.assign(_key=transcript_keys(verdicts)).drop_duplicates("_key")
    known = transcripts.set_index("_key")
    given = human["transcript_key"] if "transcript_key" in human.columns else pd.Series("", index=human.index)
    by_key = given.ne("")
    keys = pd.Series("", index=human.index, dtype=object)
    if by_key.any():
        rows = human[by_key]
        unknown = ~rows["transcript_key"].isin(known.index)
        if unknown.any():
            i = unknown.idxmax()
            raise InputError(f"{source}: row {i + 2}: transcript_key {_shown(rows.at[i, 'transcript_key'])!r} is not a "
                             f"transcript of the run; expected the key of one of its transcripts ({int(unknown.sum())} "
                             "such rows)", param="human")
        owner = known.loc[rows["transcript_key"], "system"].astype(str).to_numpy()
        wrong = (owner != rows["system"].to_numpy()) & rows["system"].ne("").to_numpy()
        if wrong.any():
            j = int(np.argmax(wrong))
            raise InputError(f"{source}: row {rows.index[j] + 2}: system: transcript_key {rows['transcript_key'].iloc[j]} "
                             f"belongs to system {owner[j]!r}, the row says {_shown(rows['system'].iloc[j])!r}",
                             param="human")
        keys[by_key] = rows["transcript_key"]
    if (~by_key).any():
        keys[~by_key] = _match_by_cells(transcripts, human[~by_key], "transcript_key" in human.columns, source)
    return keys.astype(str)


def _match_by_cells(transcripts: pd.DataFrame, human: pd.DataFrame, has_key_column: bool, source: str) -> pd.Series:
    """The transcript keys of rows named by system, case and (where given) replicate."""
    on = ["system", "case_id"] + (["replicate"] if "replicate" in human.columns and "replicate" in transcripts.columns
                                  else [])
    blank_key = "transcript_key is blank, and " if has_key_column else ""
    for column in ("system", "case_id"):
        blank = human[column].eq("")
        if blank.any():
            i = blank.idxmax()
            raise InputError(f"{source}: row {i + 2}: {blank_key}{column} is blank; expected the row's transcript_key, "
                             f"or its system, case_id and replicate ({int(blank.sum())} such rows)", param="human")
    left = human[on].reset_index(drop=True)
    right = transcripts[on + ["_key"]].astype(str)
    merged = left.reset_index().merge(right, on=on, how="left")
    count = merged.groupby("index")["_key"].count()
    if (count == 0).any():
        i = int(count.index[count.eq(0).to_numpy()][0])
        where = ", ".join(f"{c}={_shown(left.at[i, c])}" for c in on)
        raise InputError(f"{source}: row {human.index[i] + 2}: {blank_key}{where} is not a transcript of the run "
                         f"({int(count.eq(0).sum())} such rows)", param="human")
    if (count > 1).any():
        i = int(count.index[count.gt(1).to_numpy()][0])
        where = ", ".join(f"{c}={_shown(left.at[i, c])}" for c in on)
        fix = "expected the row's transcript_key" if has_key_column else \
            "add a transcript_key column (the labelling sheet has one)"
        raise InputError(f"{source}: row {human.index[i] + 2}: {blank_key}{where} names {int(count[i])} transcripts of "
                         f"the run; {fix}", param="human")
    return pd.Series(merged.sort_values("index")["_key"].to_numpy(), index=human.index)


def _shown(text: str) -> str:
    # What a labels file says is echoed in one line, never at any length.
    return text if len(text) <= 40 else text[:40] + f"... ({len(text)} characters)"


def labels_by_key(verdicts: pd.DataFrame, human: pd.DataFrame, source: str, notes: list[str],
                  scale: ScaleRecord | None = None) -> pd.Series:
    """Human labels (0/1, or scores on ``scale`` for a scored run) indexed by transcript key, checked against the run."""
    human = human.reset_index(drop=True)  # row numbers in messages are file rows
    human = human[_id_cells(human).astype(str).apply(lambda c: c.str.strip()).ne("").any(axis=1)]  # trailing empty rows
    value, blanks = human_scores(human, scale, source) if scale is not None else _binary(human, source)
    if blanks:
        notes.append(f"{blanks} rows of {source} have no label yet and were left out; the labelled rows must "
                     "still be a uniform random sample (label them all, or in the sheet's order)")
    rows = human.loc[value.index]
    keys = _match(verdicts, rows, source)
    duplicated = keys.duplicated(keep=False)
    if duplicated.any():
        first = keys[duplicated].iloc[0]
        where = " and ".join(str(i + 2) for i in keys.index[keys.eq(first)])
        raise InputError(f"{source}: rows {where}: the same transcript {_shown(first)!r} is labelled "
                         f"{int(keys.eq(first).sum())} times; expected one label per transcript", param="human")
    return pd.Series(value.to_numpy(), index=keys.to_numpy())
