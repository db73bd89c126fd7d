"""Import a generic label table (CSV, parquet or JSON Lines) as an import directory.

One row is one label: a system's answer to an item (a case), judged compliant or not,
under the measurement choices named in the axis columns. Each distinct combination of
axis values is a universe. universe_id follows the one rule, ``keys.universe_id({axis: value})``.

Labels are never guessed. A label is boolean or 0/1 (true/false, 1/0, any case), or a
category: ``positive`` names the compliant value and ``negative`` the non-compliant
ones; a category value named by neither is refused, listed. A missing label (empty,
blank, null, or the text nan/na/n/a/null/none unless named as a value) makes the row
``excluded`` with reason ``missing label``, counted in the warnings; it is never a
non-compliant label.

Optional columns carry what the analyses need beyond the label (see
:mod:`multiverse.importers._columns`): ``replicate`` numbers repeated runs of one
item (epochs; intervals then cluster by item), ``transcript`` holds the system's
answer or its id (judges are then paired only on the same transcript, and without it
on system, item and replicate, never "on transcript"), ``rationale`` the judge's
reason (the criteria table, shown by the explorer).

Bad input raises :class:`multiverse.errors.InputError` with one line naming the file,
the column and what was expected, and writes nothing: a missing column, an unexpected
label, an empty axis/system/item value, or two rows for the same (universe, system, item, replicate).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast

import numpy as np
import pandas as pd

from multiverse.analysis import compute_rates
from multiverse.core import (
    OK,
    RESERVED_NAMES,
    ImportBudget,
    both_spellings,
    check_rate_direction,
    look_alike,
    nfc,
    regular_file_problem,
    universe_id,
)
from multiverse.errors import InputError
from multiverse.importers._columns import rationale_criteria, replicate_numbers, table_transcripts
from multiverse.importers._directory import check_ci, resolve_primary, write_import_dir
from multiverse.importers._guard import MAX_CASE_ID_CHARS, MAX_NAME_CHARS, checked_names, import_budget
from multiverse.importers._jsonl_table import JSONL_SUFFIXES, read_jsonl_table
from multiverse.importers._losses import ImportLosses
from multiverse.importers._table_labels import check_label_values, compliance_labels, mark_no_grade, no_grade_cells
from multiverse.importers._table_orders import both_orders, pairwise_columns
from multiverse.importers._table_scores import (
    check_score_arguments,
    check_value_options,
    expand,
    read_scores,
    scored_primary,
    tie_warnings,
)
from multiverse.importers._unparsed import check_unparsed, count_import_unparsed
from multiverse.results import Results
from multiverse.tables import csv_header, positional

__all__ = ["import_table", "read_label_table"]



def read_label_table(path: str | os.PathLike[str], budget: ImportBudget | None = None) -> pd.DataFrame:
    """Read a .csv, .parquet or .jsonl table within ``budget`` (bytes uncompressed, rows); InputError when it is
    missing, unreadable or past a limit (a .jsonl: :mod:`multiverse.importers._jsonl_table`)."""
    path = Path(path)
    budget = budget or import_budget()
    suffix = path.suffix.lower()
    if suffix not in (".csv", ".parquet", ".pq", *JSONL_SUFFIXES):
        raise InputError(f"{path}: expected a .csv, .parquet or .jsonl file")
    problem = regular_file_problem(path)
    if problem:
        raise InputError(f"{path}: {problem}")
    try:
        # O_NONBLOCK and fstat: what is read is the regular file checked, even if the path changed since.
        with os.fdopen(os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0)), "rb") as handle:
            if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
                raise InputError(f"{path}: expected a regular file, got a special file")
            if suffix == ".csv":
                budget.take_bytes(os.fstat(handle.fileno()).st_size, str(path))
                return _read_csv(path, handle, budget)
            if suffix in JSONL_SUFFIXES:
                return read_jsonl_table(path, handle, os.fstat(handle.fileno()).st_size, budget)
            return _read_parquet(path, handle, budget)
    except InputError:
        raise
    except Exception as exc:
        detail = " ".join(str(exc).split())[:200]
        raise InputError(f"{path}: cannot read as {suffix.lstrip('.')}: {type(exc).__name__}: {detail}") from None


def _read_csv(path: Path, handle: Any, budget: ImportBudget) -> pd.DataFrame:
    # Labels, items and option names are read as written ("007" stays "007"), a piece of rows at a
    # time, so a table past `max_rows` is refused before it is all in memory.
    # By position, as every table is read (tables.csv_header): the columns of an index to_csv wrote (empty
    # headers, which pandas would name 'Unnamed: 0') are left out, a header named twice is refused.
    header = pd.read_csv(handle, header=None, nrows=1, dtype=str, keep_default_na=False)
    kept = csv_header(list(header.iloc[0])) if len(header) else []
    handle.seek(0)
    usecols = None if len(kept) == header.shape[1] else kept
    pieces = []
    for piece in pd.read_csv(handle, dtype=str, keep_default_na=False, na_values=[""], chunksize=100_000,
                             usecols=usecols):
        budget.take_rows(len(piece), str(path))
        pieces.append(piece)
    return pd.concat(pieces, ignore_index=True) if len(pieces) != 1 else pieces[0]


def _read_parquet(path: Path, handle: Any, budget: ImportBudget) -> pd.DataFrame:
    import pyarrow as pa
    import pyarrow.parquet as pq

    table_file = pq.ParquetFile(handle)
    meta = table_file.metadata
    # What the footer declares first, then what the row groups hold as they are read: a footer can lie.
    budget.take_rows(meta.num_rows, str(path))
    budget.take_bytes(sum(meta.row_group(i).total_byte_size for i in range(meta.num_row_groups)), str(path))
    budget.rows_read -= meta.num_rows
    budget.bytes_read -= sum(meta.row_group(i).total_byte_size for i in range(meta.num_row_groups))
    batches = []
    for batch in table_file.iter_batches(batch_size=100_000):
        budget.take_rows(batch.num_rows, str(path))
        budget.take_bytes(batch.nbytes, str(path))
        batches.append(batch)
    # pandas restores the index a writer stored (df.to_parquet keeps it): its named levels come back as columns
    # and rows count by position, as every run-folder table is read (tables.positional).
    return positional(pa.Table.from_batches(batches, schema=table_file.schema_arrow).to_pandas())


def import_table(
    path: str | os.PathLike[str],
    *,
    system: str,
    item: str,
    label: str | None = None,
    axes: Sequence[str] = (),
    positive: str | None = None,
    negative: Sequence[str] | None = None,
    out_dir: str | os.PathLike[str],
    factors: Sequence[str] = (),
    primary: dict[str, str] | None = None,
    ci: str = "wilson",
    rate: str = "compliance",
    force: bool = False,
    replicate: str | None = None,
    transcript: str | None = None,
    rationale: str | None = None,
    score: str | None = None,
    scale: tuple[float, float] | None = None,
    cuts: Sequence[float] = (),
    reference: str | None = None,
    order: str | None = None,
    verdict: str | None = None,
    combine: Sequence[str] = (),
    max_bytes: int | None = None,
    max_rows: int | None = None,
    max_transcript_bytes: int | None = None,
    merge_look_alikes: bool = False,
    no_grade: Sequence[str] = (),
    unparsed: str | Sequence[str] = "exclude",
) -> Results:
    """Import a label table into ``out_dir``; see the module docstring.

    ``system``, ``item`` and ``label`` name the columns holding the system, the item
    (it becomes case_id) and the compliance label; every ``axes`` column is a
    measurement choice, ``factors`` are optional design-factor columns for subgroup
    rates. ``positive``/``negative`` name category labels; ``primary`` ({axis:
    option}) the pre-registered universe (none when absent); ``ci`` the interval
    method of the rates; ``rate`` which way the folder's figures and pages read them (compliance or
    violation, the manifest's ``rate``). ``out_dir`` is checked first (see
    :func:`multiverse.tables._places.check_output_dir`; ``force`` allows a folder holding
    other files). ``replicate``, ``transcript`` and ``rationale`` name the optional
    columns of the module docstring. Returns the :class:`Results` (verdicts, rates,
    manifest; criteria when ``rationale`` is given).

    Scores instead of labels: ``score`` names the column and ``scale`` its
    ``(low, high)``; each of ``cuts`` adds the option "at least K" to the mean;
    ``reference`` names a pairwise table's reference system, which is never
    ranked (:mod:`multiverse.importers._table_scores`). ``order`` names the column holding the order of a
    pairwise comparison (``ab``/``ba``; an axis), ``verdict`` a column of three-way verdicts (A, tie, B)
    read as pairwise scores, and ``combine`` the rules that add both games combined as options of the
    order axis (:mod:`multiverse.importers._table_orders`).

    ``no_grade`` names label (or score) values that mean the grader answered without a grade:
    such a row is ``judge_failed``, reason ``no grade: VALUE``, and ``unparsed`` (a
    ``scoring.unparsed`` policy, or several: an axis) counts it (:mod:`._unparsed`).

    Bounds (:class:`multiverse.core.ImportBudget`): ``max_bytes`` of table
    (uncompressed), ``max_rows`` rows, ``max_transcript_bytes`` per transcript.
    Two systems, items, options or levels that look alike are refused unless
    ``merge_look_alikes`` reads them as one.
    """
    from multiverse.tables import check_output_dir

    path = Path(path)
    axes, factors = list(axes), list(factors)
    check_ci(ci)
    check_rate_direction(rate)
    policies = check_unparsed(unparsed)
    budget = import_budget(max_bytes, max_rows, max_transcript_bytes)
    check_output_dir(out_dir, kind="import", inputs=[path], force=force)
    frame = read_label_table(path, budget)
    # Column names and the names given for them compare in one spelling (NFC).
    _one_spelling(path, "columns", [str(c) for c in frame.columns])
    frame.columns = [nfc(str(c)) for c in frame.columns]
    check_value_options(path, label=label, score=score, verdict=verdict, scale=scale, reference=reference,
                        positive=positive, negative=negative, no_grade=no_grade, unparsed=policies, combine=combine)
    check_label_values(positive=positive, negative=negative, no_grade=no_grade)
    given = frame  # as the table writes it: a verdict column's no-grade values are its own, not scores
    frame, score, scale, axes, order = pairwise_columns(path, frame, order, verdict, score, scale, reference, combine,
                                                        axes, no_grade)
    check_score_arguments(path, label, score, scale, cuts, reference)
    system, item, label = nfc(system), nfc(item), nfc(label if label is not None else str(score))
    primary = {nfc(a): nfc(o) for a, o in primary.items()} if primary else primary
    axes, factors = [nfc(a) for a in axes], [nfc(f) for f in factors]
    optional = {role: nfc(column) for role, column in
                (("replicate", replicate), ("transcript", transcript), ("rationale", rationale)) if column is not None}
    _check_columns(path, frame, system, item, label, axes, factors, optional)
    if frame.empty:
        raise InputError(f"{path}: {label}: expected at least one labelled row, the table is empty")

    merge = bool(merge_look_alikes)
    axis_values = {axis: _names(path, frame[axis], axis, merge) for axis in axes}
    systems = _names(path, frame[system], system, merge)
    ungraded = no_grade_cells(given[label], no_grade)[1]
    column = frame[label].where(~ungraded)
    if score is None:
        scored = None
        compliant, empty = compliance_labels(path, column, label, positive, list(negative or []))
    else:
        assert scale is not None
        scored = read_scores(path, column, label, scale, nfc(reference) if reference else None, systems)
        compliant, empty = np.zeros(len(frame), dtype=bool), scored[1]
    items = _names(path, frame[item], item, merge, limit=MAX_CASE_ID_CHARS)

    combos = pd.DataFrame(axis_values) if axes else pd.DataFrame(index=frame.index)
    universe_ids = _universe_ids(combos, axes)
    replicates = (replicate_numbers(path, frame[optional["replicate"]], optional["replicate"])
                  if "replicate" in optional else np.zeros(len(frame), dtype=np.int64))
    _check_duplicates(path, universe_ids, systems, items, replicates, axes, axis_values, system, item, optional)

    verdicts = _verdict_frame(path, frame, universe_ids, axis_values, systems, items, factors, replicates, merge)
    transcripts = _judged_keys(path, frame, verdicts, optional)
    verdicts["status"] = np.where(empty, "excluded", OK)
    verdicts["reason"] = np.where(empty, "missing label", "")
    labels = pd.array(compliant, dtype="boolean")
    labels[empty if scored is None else slice(None)] = pd.NA  # a score is not a compliance label (as in a run)
    verdicts["compliant"] = labels

    warnings = []
    what = "label" if scored is None else "score"
    missing = empty & ~ungraded
    if missing.any():
        warnings.append(f"{path}: {label}: {int(missing.sum())} rows have a missing {what} and are "
                        f"excluded (status excluded, reason 'missing {what}'), not counted as non-compliant")
        verdicts["reason"] = np.where(empty, f"missing {what}", "")
    mark_no_grade(verdicts, given[label], ungraded)
    # The rationales belong to the table's rows, before scoring options repeat them per universe.
    criteria = (rationale_criteria(verdicts, frame[optional["rationale"]], label)
                if "rationale" in optional else None)
    choices, record = None, None
    if scored is not None:
        verdicts["score"] = np.where(empty, np.nan, scored[0])
        record = scored[2]
    verdicts = both_orders(path, verdicts, axes, order, combine, record)
    if record is not None:
        warnings += tie_warnings(verdicts, record, label)
        verdicts, axes, choices = expand(verdicts, axes, record, cuts)
        primary = scored_primary(primary, record, cuts)
    verdicts, axes, choices = _count_unparsed(verdicts, axes, choices, record, policies)
    rates = compute_rates(verdicts, axes=axes, factors=factors, ci=ci, scoring=choices, scale=record)
    options = _options(verdicts, axes, universe_ids)
    manifest = _manifest(path, axes, factors, choices, options, primary, warnings, ci, record, cuts,
                         input={"system": system, "item": item, "label": label, "positive": positive,
                               "negative": list(negative or []), "missing_labels": int(missing.sum()),
                               "no_grade": list(map(str, no_grade)), **optional,
                               "order": order, "verdict": verdict, "combine": list(combine)})
    return write_import_dir(out_dir, verdicts=verdicts, criteria=criteria, rates=rates, manifest=manifest,
                            transcripts=transcripts, budget=budget, rate=rate, unparsed=policies,
                            losses=_unused(path, frame, {system, item, label, *axes, *factors, *optional.values()}))


def _options(verdicts: pd.DataFrame, axes: list[str], universe_ids: Any) -> dict[str, Any]:
    """Each universe's axis options (the one universe of a table without axes: none)."""
    if axes:
        return dict(verdicts.drop_duplicates("universe_id").set_index("universe_id")[axes].to_dict("index"))
    return {universe_ids[0]: {}}


def _count_unparsed(verdicts: pd.DataFrame, axes: list[str], choices: pd.DataFrame | None, record: Any,
                    policies: list[str]) -> tuple[pd.DataFrame, list[str], pd.DataFrame | None]:
    """The verdicts with their unparsed replies counted (several policies: an axis), and each universe's choice."""
    kind = ("binary", 0.0, 1.0) if record is None else (record.type, record.min, record.max)
    verdicts, axes, origin = count_import_unparsed(verdicts, axes, policies, dict.fromkeys(
        verdicts["universe_id"].astype(str).unique(), kind))
    if choices is not None:
        choices = pd.DataFrame([{**row, "universe_id": new} for new, (old, _) in origin.items()
                                for row in choices[choices["universe_id"] == old].to_dict("records")])
    return verdicts, axes, choices


def _unused(path: Path, frame: pd.DataFrame, used: set[str]) -> ImportLosses:
    """The table's columns no flag names: recorded, not imported, so listed as dropped."""
    losses = ImportLosses()
    unused = [str(c) for c in frame.columns if c not in used]
    if unused:
        losses.drop(f"columns {', '.join(unused[:8])}{', ...' if len(unused) > 8 else ''}", where=str(path),
                    count=len(unused), why="not named as the system, item, label, an axis, a factor, replicate, transcript or rationale")
    return losses


def _manifest(path: Path, axes: list[Any], factors: list[Any], choices: Any, options: dict[str, Any], primary: Any, warnings: list[Any],
              ci: str, record: Any, cuts: Sequence[float], input: dict[str, Any]) -> dict[str, Any]:
    """The import's manifest: its universes, primary, warnings, input columns and, for scores, the scale."""
    optional = {role: input[role] for role in ("replicate", "transcript", "rationale") if role in input}
    manifest: dict[str, Any] = {
        "source": "table",
        "axes": axes,
        "factors": factors,
        "universes": list(options) if choices is None else _universes(options, choices),
        "primary": resolve_primary(primary, axes, options),
        "primary_declared": bool(primary),
        "warnings": warnings,
        "universe_options": options,
        "input": {"file": str(path), **input,
                  "paired_on": "transcript" if "transcript" in optional else "system, item and replicate"},
        "estimator": "pooled",
        "ci": ci,
        "level": 0.95,
    }
    if record is not None:
        # Scores: the scale (and a pairwise reference) for every reader; each universe's estimator is its own.
        manifest.update(estimator=None, scale=record.model_dump(), reference=record.reference)
        manifest["input"].update(score=input["label"], label=None, cuts=[float(c) for c in cuts])
    return manifest


def _check_duplicates(path: Path, universe_ids: Any, systems: Any, items: Any, replicates: Any, axes: list[Any],
                      axis_values: dict[str, Any], system: str, item: str, optional: dict[str, str]) -> None:
    keyed = pd.DataFrame({"universe_id": universe_ids, "system": systems, "case_id": items, "replicate": replicates})
    duplicated = keyed.duplicated(keep=False)
    if duplicated.any():
        _refuse_duplicate(path, keyed, duplicated, axes, axis_values, system, item, optional.get("replicate"))


def _verdict_frame(path: Path, frame: pd.DataFrame, universe_ids: Any, axis_values: dict[str, Any], systems: Any, items: Any,
                   factors: list[Any], replicates: Any, merge: bool) -> pd.DataFrame:
    """The verdicts' identifying columns: universe, axes, system, case, factors and replicate."""
    verdicts = pd.DataFrame({"universe_id": universe_ids})
    for axis, values in axis_values.items():
        verdicts[axis] = values
    verdicts["system"] = systems
    verdicts["case_id"] = items
    for factor in factors:
        levels = frame[factor].fillna("").astype(str).map(nfc)
        named = checked_names(levels.unique(), f"{path}: {factor}", merge=merge, param="factors")
        verdicts[factor] = levels.to_numpy() if all(k == v for k, v in named.items()) else levels.map(named).to_numpy()
    verdicts["replicate"] = replicates
    return verdicts


def _judged_keys(path: Path, frame: pd.DataFrame, verdicts: pd.DataFrame, optional: dict[str, str]) -> Any:
    """Set the verdicts' transcript and judgment keys; the transcripts to write (or None)."""
    transcripts = None
    if "transcript" in optional:
        # Judges pair only on the same answer: the key digests the system, item, replicate and the transcript itself.
        keys, transcripts = table_transcripts(frame[optional["transcript"]], verdicts[["system", "case_id", "replicate"]],
                                             path=path, name=optional["transcript"])
        verdicts["transcript_key"] = keys
    else:
        # Nothing says two universes judged the same answer: no transcript key, so agreement pairs
        # on system, item and replicate and says so.
        verdicts["transcript_key"] = pd.array([pd.NA] * len(verdicts), dtype="string")
    # Each replicate is judged on its own (the key of a table without replicates is as before).
    judged = ["universe_id", "system", "case_id", *(["replicate"] if "replicate" in optional else [])]
    verdicts["judgment_key"] = _row_keys(verdicts[judged], "judgment")
    return transcripts


def _refuse_duplicate(path: Path, keyed: pd.DataFrame, duplicated: Any, axes: Any, axis_values: Any, system: str, item: str, replicate: Any) -> None:
    first = keyed[duplicated].index[0]
    where = ", ".join(f"{axis}={axis_values[axis][first]}" for axis in axes)
    universe = f"universe ({where}), " if axes else ""
    if replicate is not None:
        raise InputError(
            f"{path}: {', '.join([*axes, system, item, replicate])}: duplicate rows for {universe}"
            f"{system}={keyed['system'][first]}, {item}={keyed['case_id'][first]}, "
            f"{replicate}={keyed['replicate'][first]}; expected one label per universe, system, item and replicate")
    hint = (" (repeated runs of an item, such as epochs, need a `replicate` column"
            + ("" if axes else "; without axis columns the whole table is one universe: is a column missing from "
               "`axes`, e.g. the judge or grader?") + ")")
    raise InputError(
        f"{path}: {', '.join([*axes, system, item])}: duplicate rows for {universe}"
        f"{system}={keyed['system'][first]}, {item}={keyed['case_id'][first]}; expected one label per universe, "
        f"system and item{hint}", param="replicate")


def _universes(options: dict[str, Any], choices: pd.DataFrame) -> list[dict[str, Any]]:
    # The manifest records what each universe chose, never a NaN for a choice it did not make.
    chose = {row.pop("universe_id"): {k: v for k, v in row.items() if v is not None and not (isinstance(v, float) and np.isnan(v))}
             for row in choices.to_dict("records")}
    return [{"id": u, "options": options[u], "scoring": chose[u]} for u in options]


def _check_columns(path: Path, frame: pd.DataFrame, system: str, item: str, label: Any, axes: Any, factors: Any, optional: Any) -> None:
    # Each role names its parameter in backticks, which the command line shows as the flag.
    named = [("the `system` column", system, "system"), ("the `item` column", item, "item"),
             ("the `label` column", label, "label")]
    named += [("an `axes` column", axis, "axes") for axis in axes]
    named += [(f"the `{role}` column", column, role) for role, column in optional.items()]
    for role, column, param in named:
        if column not in frame.columns:
            have = ", ".join(map(str, frame.columns[:12])) + (", ..." if len(frame.columns) > 12 else "")
            raise InputError(f"{path}: {column}: column not found ({role}; the table has: {have})", param=param)
    for factor in factors:
        if factor not in frame.columns:
            raise InputError(f"{path}: {factor}: factor column not found")
    roles = [system, item, label, *axes, *factors, *optional.values()]
    for column in roles:
        if roles.count(column) > 1:
            raise InputError(f"{path}: {column}: column used twice; expected distinct system, item, label, axis, "
                             "factor, replicate, transcript and rationale columns")
    for column in [*axes, *factors]:
        if column in RESERVED_NAMES:
            raise InputError(f"{path}: {column}: axis column name is reserved for the verdicts table; rename the column")


def _names(path: Path, column: pd.Series, name: str, merge: bool | None = None, *,
           limit: int = MAX_NAME_CHARS) -> np.ndarray:
    """A column of names (systems, items, options) as strings in NFC; no empty values, nothing unshowable.

    Systems, items and options (``merge`` given) are also refused when two look alike,
    or merged when ``merge``.
    """
    text = column.astype("string").str.strip()
    empty = text.isna() | (text == "")
    if empty.any():
        row = int(np.flatnonzero(empty.to_numpy())[0])
        raise InputError(f"{path}: {name}: empty value in data row {row + 1}; expected a name in every row")
    distinct = text.unique()
    if not merge:
        _one_spelling(path, name, distinct, hint=merge is not None)
    spelled = {value: nfc(value) for value in distinct if nfc(value) != value}
    named = checked_names([spelled.get(value, value) for value in distinct], f"{path}: {name}",
                          merge=bool(merge), look_alikes=merge is not None, limit=limit)
    changed = {value: named[spelled.get(value, value)] for value in distinct}
    changed = {value: to for value, to in changed.items() if to != value}
    return cast("np.ndarray", (text.replace(changed) if changed else text).to_numpy(dtype=object))


def _one_spelling(path: Path, name: str, names: Any, hint: bool = False) -> None:
    pair = look_alike(names)
    if pair:
        raise InputError(f"{path}: {name}: two spellings of one name, {both_spellings(pair)}, that look the same; "
                         "expected each name in one spelling" + (", or `merge_look_alikes` to read them as one"
                                                                  if hint else ""),
                         param="merge_look_alikes" if hint else None)


def _universe_ids(combos: pd.DataFrame, axes: list[str]) -> np.ndarray:
    """Universe ids by the one rule (the digest of the axis values), one per distinct combination."""
    if not axes:
        return np.full(len(combos), universe_id({}), dtype=object)
    distinct = combos.drop_duplicates()
    ids = {tuple(row): universe_id(dict(zip(axes, row))) for row in distinct.itertuples(index=False)}
    return np.array([ids[tuple(row)] for row in combos.itertuples(index=False)], dtype=object)


def _row_keys(columns: pd.DataFrame, kind: str) -> np.ndarray:
    """Stable 16-hex keys per row (pandas' fixed-key 64-bit hash; vectorised)."""
    hashed = pd.util.hash_pandas_object(columns.assign(_kind=kind), index=False).to_numpy()
    return np.char.mod("%016x", hashed).astype(object)
