"""A run folder's columnar index: a table as ``load_run`` reads it, kept beside it so the next read is quick.

Reading ``verdicts.parquet`` as ``load_run`` does (text columns as sorted
categoricals, a mostly distinct column recognised and left as text) costs
seconds at millions of rows, and every analysis command of a run pays it
again. So the first read writes what it read, as an Arrow IPC file
(``.index/verdicts.arrow``: dictionary columns keep their codes and sorted
categories), and later reads map that file instead. The index names the
table it was read from by the table's size, modification time and a digest
of its parquet footer (row groups, columns, their statistics): a table
written again is read again, never paired with an old index. A folder that
cannot be written just goes without one. A run or an import writes the
index of a long table (``INDEXED_ROWS``) as it writes the folder
(``index_table``), so not even the first analysis pays for the read: at
10,000 universes (6M rows) that read is most of what ``load_run`` costs,
against a run's hours of model calls. The index is input like the
tables: inside the folder, a regular file, under the tables' cap, and its
rows under ``MAX_TABLE_ROWS``; anything else is ignored and the table read.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pandas as pd

from multiverse.core import atomic_write

__all__ = ["INDEXED_ROWS", "INDEX_FOLDER", "index_table", "read_indexed"]

#: Where a folder keeps its index (a dot folder: listings and globs of the tables pass it by).
INDEX_FOLDER = ".index"
_SIGNATURE = b"multiverse.source"
_VERSION = "1"
_ROWS = 1 << 20
#: Tables of at least this many rows are indexed when a run or an import writes its folder.
INDEXED_ROWS = 1_000_000


def _signature(table: Path) -> str:
    """The table's size, modification time and footer digest: what the index must have been read from."""
    import pyarrow.parquet as pq

    status = table.stat()
    footer = pq.ParquetFile(table).metadata
    digest = hashlib.sha256(repr(footer.to_dict()).encode()).hexdigest()
    return f"{_VERSION}:{status.st_size}:{status.st_mtime_ns}:{digest}"


def read_indexed(folder: Path, name: str, table: Path, read: Any) -> pd.DataFrame:
    """``read()`` of ``table`` (``name``.parquet of ``folder``), through the folder's index when it is current."""
    from multiverse.tables._folder import CAPS, folder_file
    from multiverse.tables._tables import MAX_TABLE_ROWS

    if table.suffix != ".parquet":
        return read()
    try:
        signature = _signature(table)
    except (OSError, ValueError):
        return read()  # the read proper reports what is wrong with the table
    place = f"{INDEX_FOLDER}/{name}.arrow"
    try:
        index = folder_file(folder, place)
    except Exception:  # an index that leads elsewhere is no index
        index = None
    if index is not None and index.is_file() and index.stat().st_size <= CAPS["table"]:
        frame = _read_index(index, signature, MAX_TABLE_ROWS)
        if frame is not None:
            return frame
    frame = read()
    _write_index(folder / place, frame, signature)
    return frame


def index_table(folder: Path, name: str) -> None:
    """Write the index of the folder's ``name``.parquet now, as its first read by ``load_run`` would."""
    from multiverse.tables._tables import read_table

    table = Path(folder) / f"{name}.parquet"
    if table.is_file() and not table.is_symlink():
        read_indexed(Path(folder), name, table, lambda: read_table(table, categories=True))


def _read_index(index: Path, signature: str, most_rows: int) -> pd.DataFrame | None:
    import pyarrow as pa

    try:
        with pa.memory_map(str(index)) as source:
            reader = pa.ipc.open_file(source)
            metadata = reader.schema.metadata or {}
            if metadata.get(_SIGNATURE) != signature.encode() or sum(
                    reader.get_batch(i).num_rows for i in range(reader.num_record_batches)) > most_rows:
                return None
            return _frame(reader.read_all())
    except (OSError, ValueError, TypeError, pa.ArrowException):
        return None


def _frame(table: Any) -> pd.DataFrame:
    """The index's table as the frame that was written: ``Table.to_pandas`` unifies a dictionary column's
    batches by hashing every value (a second at 6M rows, most of a load), though every batch the writer wrote
    carries the same dictionary; so such a column is rebuilt from its codes, and any other goes through Arrow."""
    import numpy as np
    import pyarrow as pa

    coded: dict[str, Any] = {}
    for name in table.column_names:
        column = table.column(name)
        chunks = column.chunks
        if (pa.types.is_dictionary(column.type) and chunks and column.null_count == 0
                and all(chunk.dictionary.equals(chunks[0].dictionary) for chunk in chunks[1:])):
            codes = np.concatenate([chunk.indices.to_numpy(zero_copy_only=False) for chunk in chunks])
            categories = pd.Index(chunks[0].dictionary.to_pandas())
            coded[name] = pd.Categorical.from_codes(codes, dtype=pd.CategoricalDtype(categories, ordered=column.type.ordered))
    # The rest through Arrow with the schema's pandas metadata, which restores their dtypes (a nullable boolean).
    rest = table.select([name for name in table.column_names if name not in coded]).to_pandas()
    columns = {name: coded[name] if name in coded else rest[name] for name in table.column_names}
    return pd.DataFrame(columns, copy=False) if columns else rest


def _write_index(path: Path, frame: pd.DataFrame, signature: str) -> None:
    import pyarrow as pa

    if path.parent.is_symlink() or (path.parent.exists() and not path.parent.is_dir()):
        return  # written only inside the folder, never through a link
    try:
        first = pa.Table.from_pandas(frame.iloc[:0], preserve_index=False)
        schema = first.schema.with_metadata({**(first.schema.metadata or {}), _SIGNATURE: signature.encode()})
        path.parent.mkdir(exist_ok=True)

        def write(tmp: str) -> None:
            # A slice of rows at a time: converting the whole frame at once held a second copy of it.
            with pa.OSFile(tmp, "wb") as sink, pa.ipc.new_file(sink, schema) as writer:
                for start in range(0, len(frame), _ROWS):
                    part = pa.Table.from_pandas(frame.iloc[start:start + _ROWS], schema=schema, preserve_index=False)
                    writer.write_table(part)

        atomic_write(path, write)
    except (OSError, ValueError, pa.ArrowException):
        pass  # a folder that cannot be written goes without an index
