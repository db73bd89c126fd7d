"""A run folder's columnar index: a table as ``load_run`` reads it, kept beside it so the next read is quick.

Reading ``verdicts.parquet`` as ``load_run`` does (text columns as sorted
categoricals, a mostly distinct column recognised and left as text) costs
seconds at millions of rows, and every analysis command of a run pays it
again. So the first read writes what it read, one Arrow IPC file per
column (``.index/verdicts/0.arrow``, ``1.arrow``, ...: a dictionary column
keeps its codes and sorted categories), and later reads map those files
instead. One column a file, in one batch, so a read takes each column's
values where they lie in the mapped file, without a copy (a copy is fresh
memory: at 100,000 universes, 60M rows, seconds of page faults and gigabytes
of the peak), and the writer converts one column at a time, never holding a
second copy of the table. The index names the table it was read from by the
table's size, modification time and a digest of its parquet footer (row
groups, columns, their statistics): a table written again is read again,
never paired with an old index. A folder that cannot be written just goes
without one. A run or an import writes the index of a long table
(``INDEXED_ROWS``) as it writes the folder (``index_table``), so not even
the first analysis pays for the read: at 10,000 universes (6M rows) that
read is most of what ``load_run`` costs, against a run's hours of model
calls. The index is input like the tables: inside the folder, regular files
under the tables' cap, as many as it says, of equal rows under
``MAX_TABLE_ROWS``; anything else is ignored and the table read.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import mmap
import os
import shutil
import stat
import sys
import weakref
from pathlib import Path
from typing import Any

import pandas as pd

from multiverse.core import atomic_write

__all__ = ["INDEXED_ROWS", "INDEX_FOLDER", "PageTrail", "drop_index", "index_table", "page_out", "read_indexed"]

#: Where a folder keeps its index (a dot folder: listings and globs of the tables pass it by).
INDEX_FOLDER = ".index"
_SIGNATURE = b"multiverse.source"
_COLUMNS = b"multiverse.columns"
_VERSION = "2"
#: Tables of at least this many rows are indexed when a run or an import writes its folder.
INDEXED_ROWS = 1_000_000
# madvise advice (Linux): drop this process's pages of a range, the file's cache keeping them (a private
# mapping's written pages are lost with them: only for pages nothing wrote), and reclaim a range's pages,
# keeping any content (the file's cache loses them too: the next read is the disk's).
_DONTNEED, _PAGEOUT = 4, 21
_PAGE = mmap.PAGESIZE
#: The live mappings: start address -> (size, whether read-only). ``page_out`` acts only inside them.
_MAPPED: dict[int, tuple[int, bool]] = {}


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
    place = f"{INDEX_FOLDER}/{name}"
    try:
        index = folder_file(folder, place)
    except Exception:  # an index that leads elsewhere is no index
        index = None
    if index is not None and index.is_dir():
        frame = _read_index(index, signature, MAX_TABLE_ROWS, CAPS["table"])
        if frame is not None:
            return frame
    frame = read()
    _write_index(folder / INDEX_FOLDER, name, frame, signature)
    return frame


def drop_index(folder: Path, name: str) -> None:
    """Remove the folder's index of ``name`` (a table written again would only find it stale)."""
    index = Path(folder) / INDEX_FOLDER
    if index.is_dir() and not index.is_symlink():
        _remove(index, name)
        for half_written in index.glob(f".{name}-*"):  # what a crashed writer left
            if half_written.is_dir() and not half_written.is_symlink():
                shutil.rmtree(half_written, ignore_errors=True)


def _remove(index: Path, name: str) -> None:
    """The index of ``name`` gone from the index folder (and the one-file index of earlier versions)."""
    (index / f"{name}.arrow").unlink(missing_ok=True)
    if (index / name).is_dir() and not (index / name).is_symlink():
        shutil.rmtree(index / name, ignore_errors=True)  # a folder left behind only fails the swap


def index_table(folder: Path, name: str) -> None:
    """Write the index of the folder's ``name``.parquet now, as its first read by ``load_run`` would."""
    from multiverse.tables._tables import read_table

    table = Path(folder) / f"{name}.parquet"
    if table.is_file() and not table.is_symlink():
        read_indexed(Path(folder), name, table, lambda: read_table(table, categories=True))


def _read_index(index: Path, signature: str, most_rows: int, most_bytes: int) -> pd.DataFrame | None:
    import pyarrow as pa

    columns: dict[str, Any] = {}
    try:
        count, rows = 1, None
        while len(columns) < count:  # file 0 says how many there are
            path = index / f"{len(columns)}.arrow"
            status = os.lstat(path)
            if not stat.S_ISREG(status.st_mode) or status.st_size > most_bytes:
                return None
            mapped = _map(path)
            reader = pa.ipc.open_file(pa.BufferReader(pa.py_buffer(mapped)))
            metadata = reader.schema.metadata or {}
            if (metadata.get(_SIGNATURE) != signature.encode() or reader.num_record_batches != 1
                    or len(reader.schema) != 1):
                return None
            count = int(metadata.get(_COLUMNS, b"0"))
            table = reader.read_all()
            if count < 1:
                return None
            if rows is None:
                rows = table.num_rows
            if table.num_rows != rows or rows > most_rows or table.column_names[0] in columns:
                return None
            columns[table.column_names[0]], in_place = _column(table, mapped)
            if not isinstance(mapped, mmap.mmap):
                # The read touched the file (the header, and every code when a column's codes are checked):
                # those pages leave this process's memory, though not the file's cache. Nothing has written
                # to the mapping yet, so none holds anything of its own; an analysis maps back what it reads.
                _advise(ctypes.addressof(mapped), len(mapped), _DONTNEED)
                if not in_place:  # Arrow's buffers (text) are never written: the mapping is made read-only
                    _read_only(ctypes.addressof(mapped), len(mapped))
    except (OSError, ValueError, TypeError, pa.ArrowException):
        return None
    return pd.DataFrame(columns, copy=False)


def page_out(address: int, size: int) -> None:
    """Give back the pages of ``size`` bytes at ``address`` when they lie in a mapped index file: a pass
    that read them once (60M judgment keys are 1.4 GB of text) need not keep them in memory. Their content
    stays (the file's, or what this process wrote, swapped out); a later read maps them back. Memory
    anywhere else is left alone, and so is everything off Linux. A read-only mapping's pages can hold
    nothing of this process's own, so they are only unmapped and the file's cache keeps them."""
    for start, (length, read_only) in list(_MAPPED.items()):
        if start <= address and address + size <= start + length:
            _advise(address, size, _DONTNEED if read_only else _PAGEOUT)
            return


class PageTrail:
    """Gives back (``page_out``) what a pass through mapped buffers has read, trailing it by ``BEHIND``
    bytes: the kernel maps a read's neighbours too (64 KB around it), so a piece's first read would map
    back the end of the piece before, had that just been given back."""

    BEHIND = 1 << 18

    def __init__(self) -> None:
        self._marks: dict[int, int] = {}  # a buffer's start -> where giving back has reached

    def reached(self, start: int, now: int, last: bool = False) -> None:
        """The pass has read the buffer at ``start`` up to address ``now`` (``last``: all it will read)."""
        mark = self._marks.get(start, start)
        until = now if last else now - self.BEHIND
        if until > mark:
            page_out(mark, until - mark)
            self._marks[start] = until


def _read_only(address: int, size: int) -> None:
    libc = _libc()
    if libc is not None and libc.mprotect(address, size, mmap.PROT_READ) == 0:
        _MAPPED[address] = (size, True)


def _advise(address: int, size: int, advice: int) -> None:
    """madvise over the whole pages of the range, where Linux has it (advice only: failures ignored)."""
    libc = _libc()
    if libc is None or size <= 0 or not sys.platform.startswith("linux"):
        return
    low = address - address % _PAGE
    libc.madvise(low, address + size - low, advice)


def _map(path: Path) -> Any:
    """The file mapped copy-on-write: pages shared with the file until written, and a write (pandas
    setting a value) stays in this process. A buffer that unmaps itself when nothing uses it.

    On POSIX through libc, so that no file descriptor stays open: Python's ``mmap`` keeps one per
    mapping, a loaded table would hold one per column, and a notebook of runs would meet the
    open-files limit (256 by default on macOS).
    """
    with open(path, "rb") as file:
        size = os.fstat(file.fileno()).st_size
        if not size:
            raise ValueError("an empty index file")
        libc = _libc()
        if libc is None:
            return mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_COPY)
        address = libc.mmap(None, size, mmap.PROT_READ | mmap.PROT_WRITE, mmap.MAP_PRIVATE, file.fileno(), 0)
    if address is None or address == ctypes.c_void_p(-1).value:
        raise OSError(ctypes.get_errno(), f"{path}: cannot be mapped")
    region = (ctypes.c_char * size).from_address(address)
    _MAPPED[address] = (size, False)
    weakref.finalize(region, _unmap, libc, address, size)
    return region


def _unmap(libc: Any, address: int, size: int) -> None:
    _MAPPED.pop(address, None)
    libc.munmap(address, size)


@functools.cache
def _libc() -> Any:
    if os.name != "posix" or not hasattr(mmap, "MAP_PRIVATE"):
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.mmap.restype = ctypes.c_void_p
        libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
        libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
        libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
        libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    except (OSError, AttributeError):
        return None
    return libc


def _column(table: Any, mapped: Any) -> tuple[Any, bool]:
    """The one column of an index file, its values left where they lie in the mapped file when they can be,
    and whether they are numpy arrays over the mapping (which pandas may write: else it can be read-only).

    Arrow's ``to_pandas`` copies them (text it leaves in place); the codes of a dictionary column and the
    values of a numeric one without missing values are taken as they are, as arrays over the
    (copy-on-write) mapping.
    """
    import json

    import numpy as np
    import pyarrow as pa

    column = table.column(0)
    if column.num_chunks == 1 and column.null_count == 0:
        chunk = column.chunk(0)
        if pa.types.is_dictionary(column.type):
            codes = _in_place(chunk.indices, mapped)
            dtype = _categories(chunk.dictionary, column.type.ordered)
            return pd.Categorical.from_codes(codes, dtype=dtype), True
        pandas = json.loads((table.schema.metadata or {}).get(b"pandas", b"{}"))
        wanted = [c.get("numpy_type") for c in pandas.get("columns", [])]
        if (pa.types.is_integer(column.type) or pa.types.is_floating(column.type)) and wanted == [np.dtype(column.type.to_pandas_dtype()).name]:
            return pd.Series(_in_place(chunk, mapped), copy=False), True
    # Anything else through Arrow with the pandas metadata, which restores its dtype (a nullable boolean).
    return table.to_pandas()[table.column_names[0]], False


def _categories(dictionary: Any, ordered: bool) -> pd.CategoricalDtype:
    """The dtype of a dictionary column's categories. pandas checks that they are distinct by hashing them:
    for 3M transcript keys that made 3M Python strings and a hash table the categories keep (0.2 GB through
    the session, 0.5 s). ``read_table`` writes text categories sorted, and strictly increasing ones are
    distinct: Arrow compares the neighbours instead, and the dtype is made by pandas' own constructor
    without the check (a private one: a pandas without it checks as before). Any others are checked by pandas."""
    import pyarrow as pa
    import pyarrow.compute as pc

    categories = pd.Index(dictionary.to_pandas())
    unchecked = getattr(pd.CategoricalDtype, "_from_fastpath", None)
    text = pa.types.is_string(dictionary.type) or pa.types.is_large_string(dictionary.type)
    if (unchecked is not None and text and len(dictionary) > 1 and dictionary.null_count == 0
            and pc.all(pc.less(dictionary[:-1], dictionary[1:])).as_py()):
        return unchecked(categories, ordered)
    return pd.CategoricalDtype(categories, ordered=ordered)


def _in_place(array: Any, mapped: Any) -> Any:
    """A writable numpy view of a fixed-width Arrow array's values in the mapping (Arrow's own is read-only)."""
    import numpy as np
    import pyarrow as pa

    dtype = np.dtype(array.type.to_pandas_dtype())
    data = array.buffers()[1]
    offset = data.address - pa.py_buffer(mapped).address + array.offset * dtype.itemsize
    if offset < 0 or offset + len(array) * dtype.itemsize > len(mapped):
        raise ValueError("an index column outside its file")
    return np.frombuffer(mapped, dtype=dtype, count=len(array), offset=offset)


def _write_index(index: Path, name: str, frame: pd.DataFrame, signature: str) -> None:
    """One file per column into a fresh folder beside the index, then swapped in by renames."""
    import pyarrow as pa

    if index.is_symlink() or (index.exists() and not index.is_dir()) or not frame.columns.is_unique or frame.empty:
        return  # written only inside the folder, never through a link; an empty table is quick to read
    fresh = None
    try:
        index.mkdir(exist_ok=True)
        fresh = Path(_temporary_folder(index, name))
        for position, column in enumerate(frame.columns):
            part = pa.Table.from_pandas(frame[[column]], preserve_index=False).combine_chunks()
            metadata = {**(part.schema.metadata or {}), _SIGNATURE: signature.encode(),
                        _COLUMNS: str(len(frame.columns)).encode()}
            part = part.replace_schema_metadata(metadata)

            def write(tmp: str, part: Any = part) -> None:
                with pa.OSFile(tmp, "wb") as sink, pa.ipc.new_file(sink, part.schema) as writer:
                    writer.write_table(part, max_chunksize=max(part.num_rows, 1))

            atomic_write(fresh / f"{position}.arrow", write)
        _remove(index, name)
        os.replace(fresh, index / name)
        fresh = None
    except (OSError, ValueError, TypeError, pa.ArrowException):
        pass  # a folder that cannot be written goes without an index
    finally:
        if fresh is not None:
            shutil.rmtree(fresh, ignore_errors=True)


def _temporary_folder(index: Path, name: str) -> str:
    """A new folder of a name no one else picks, with the permissions the user's umask gives (``mkdtemp``'s
    are the owner's only, and a team sharing a run folder shares its index)."""
    import secrets

    path = index / f".{name}-{secrets.token_hex(8)}"
    path.mkdir()
    return str(path)
