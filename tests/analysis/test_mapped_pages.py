"""The memory of a run folder's mapped index: what a read touched is not kept.

``load_run`` maps each column of the folder's index. Checking a column's codes
touches every page of it, and the agreement reads every judgment key once (60M
keys are 1.4 GB of text at 100k universes): those pages are given back
(``tables.page_out``), where a mapped file's pages would otherwise count in the
process's memory until it ends. Giving back must never lose a value, and never
touch memory other than the index's.
"""

from __future__ import annotations

import ctypes
import itertools
import sys

import numpy as np
import pandas as pd
import pytest

from multiverse.analysis import agreement
from multiverse.results._load import load_run
from multiverse.tables import _index, page_out
from multiverse.tables._writer import write_run_folder

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="madvise and /proc/self/smaps are Linux's")

AXES = ["judge", "scoring"]


def _verdicts(seed: int = 0) -> pd.DataFrame:
    """Two judges x two scoring rules over 3 systems x 2,000 cases; judgment keys are 16 hex digits, as a
    run writes them, shared by the universes that differ only in the scoring rule."""
    rng = np.random.default_rng(seed)
    rows = []
    for judge, scoring in itertools.product(["j0", "j1"], ["strict", "lenient"]):
        for s, c in itertools.product(range(3), range(2000)):
            transcript = s * 10_000 + c
            rows.append({"universe_id": f"{judge}-{scoring}", "judge": judge, "scoring": scoring,
                         "system": f"system_{s}", "case_id": f"case.{c:04d}", "replicate": 0,
                         "transcript_key": f"{transcript:016x}",
                         "judgment_key": f"{(transcript * 2 + (judge == 'j1')) * 0x9E3779B97F4A7C15 % 2**64:016x}",
                         "status": "ok", "compliant": bool(rng.random() < 0.7)})
    return pd.DataFrame(rows)


def _resident_kb(address: int) -> int:
    """Resident kB of the mapping that starts at ``address``, as the kernel counts it."""
    start = f"{address:x}-"
    with open("/proc/self/smaps") as smaps:
        lines = iter(smaps)
        for line in lines:
            if line.startswith(start):
                for detail in lines:
                    if detail.startswith("Rss:"):
                        return int(detail.split()[1])
    raise AssertionError(f"no mapping at {address:#x}")


def _mapping_of(column: pd.Series) -> tuple[int, int]:
    """(start, size) of the index file mapping that holds ``column``'s text."""
    import pyarrow as pa

    data = pa.chunked_array(pa.array(column.array)).chunk(0).buffers()[2]
    found = [(start, size) for start, (size, _) in _index._MAPPED.items() if start <= data.address < start + size]
    assert len(found) == 1
    return found[0]


@pytest.fixture()
def folder(tmp_path):
    verdicts = _verdicts()
    rates = pd.DataFrame({"universe_id": ["j0-strict"], "system": ["system_0"], "rate": [0.7]})
    write_run_folder(tmp_path / "run", verdicts=verdicts, criteria=None, rates=rates,
                     manifest={"axes": AXES, "factors": []})
    load_run(tmp_path / "run")  # the first load writes the index (a table this short gets none from the writer)
    assert (tmp_path / "run" / ".index" / "verdicts" / "0.arrow").is_file()
    return tmp_path / "run", verdicts


def test_the_agreement_gives_back_the_judgment_keys_it_read_and_its_result_is_unchanged(folder):
    path, verdicts = folder
    results = load_run(path)
    keys = results.verdicts["judgment_key"]
    start, size = _mapping_of(keys)
    assert size > 200 * 1024  # many pages, so that what stays resident tells
    assert _resident_kb(start) < 64  # the load's checks touched its pages; none is kept
    assert keys.str.startswith("0").sum() >= 0  # reading the text maps it in
    assert _resident_kb(start) > size // 1024 // 2
    document = agreement(results.verdicts, axes=AXES, axis="judge")
    assert _resident_kb(start) < 64
    plain = verdicts.astype({"compliant": "boolean"})
    assert document == agreement(plain, axes=AXES, axis="judge")  # the same as a table in memory gives
    assert document["n_units"] == 3 * 2000
    # what was given back is read again, value for value
    assert results.verdicts["judgment_key"].tolist() == verdicts["judgment_key"].tolist()
    assert results.verdicts["system"].astype(str).tolist() == verdicts["system"].tolist()
    # the text's mapping is read-only: pandas writes a value into a copy, never into the mapping
    frame = results.verdicts
    frame.loc[frame.index[0], "judgment_key"] = "changed"
    assert frame["judgment_key"].iloc[0] == "changed"
    assert frame["judgment_key"].iloc[1:].tolist() == verdicts["judgment_key"].iloc[1:].tolist()
    assert load_run(path).verdicts["judgment_key"].tolist() == verdicts["judgment_key"].tolist()


def _permissions(address: int) -> str:
    with open("/proc/self/maps") as maps:
        for line in maps:
            if line.startswith(f"{address:x}-"):
                return line.split()[1]
    raise AssertionError(f"no mapping at {address:#x}")


def test_page_out_keeps_what_this_process_wrote_and_leaves_other_memory_alone(folder, monkeypatch):
    """Text (Arrow's buffers, never written) is mapped read-only, and only unmapped when given back; codes,
    which pandas may write, are reclaimed with their content kept; memory not of the index is never advised."""
    path, _ = folder
    results = load_run(path)
    text_start, _ = _mapping_of(results.verdicts["judgment_key"])
    assert _permissions(text_start) == "r--p"
    codes = np.asarray(results.verdicts["system"].array.codes)
    found = [(a, n) for a, (n, _) in _index._MAPPED.items() if a <= codes.ctypes.data < a + n]
    assert len(found) == 1
    start, size = found[0]
    assert _permissions(start) == "rw-p"
    region = (ctypes.c_char * size).from_address(start)
    last = region[size - 1]
    region[size - 1] = b"!"  # a private write (the mapping is copy-on-write): the file stays as it was
    page_out(start, size)
    assert region[size - 1] == b"!"
    region[size - 1] = last

    advised: list[tuple[int, int, int]] = []
    monkeypatch.setattr(_index, "_advise", lambda *call: advised.append(call))
    own = np.arange(1 << 20, dtype=np.int64)
    page_out(own.ctypes.data, own.nbytes)  # this process's own memory: never advised (it would be swapped)
    page_out(start + size - 8, 64)  # reaching past the mapping's end: not the index's alone
    assert advised == []
    assert (own == np.arange(1 << 20)).all()
    page_out(start + 4096, 100)
    page_out(text_start + 4096, 100)
    assert advised == [(start + 4096, 100, _index._PAGEOUT), (text_start + 4096, 100, _index._DONTNEED)]


def test_an_index_column_whose_categories_repeat_is_refused_and_unsorted_ones_are_read_as_they_are(folder):
    """The load proves a dictionary column's categories distinct by their strict order (no hash table of
    millions of texts): categories out of order are checked by pandas instead, and repeated ones make the
    index no index (the table is read)."""
    import pyarrow as pa

    path, verdicts = folder
    index = path / ".index" / "verdicts"
    where = list(load_run(path).verdicts.columns).index("transcript_key")
    file = index / f"{where}.arrow"
    original = pa.ipc.open_file(pa.BufferReader(file.read_bytes())).read_all()
    column = original.column(0).chunk(0)
    dictionary = column.dictionary.to_pylist()

    def rewrite(categories: list[str], codes: np.ndarray) -> None:
        array = pa.DictionaryArray.from_arrays(pa.array(codes, type=column.indices.type),
                                               pa.array(categories, type=column.dictionary.type))
        table = pa.table({original.column_names[0]: array}).replace_schema_metadata(original.schema.metadata)
        with pa.OSFile(str(file), "wb") as sink, pa.ipc.new_file(sink, table.schema) as writer:
            writer.write_table(table)

    codes = column.indices.to_numpy()
    rewrite(dictionary[::-1], len(dictionary) - 1 - codes)  # the same values, categories in reverse
    loaded = load_run(path).verdicts["transcript_key"]
    assert loaded.astype(str).tolist() == verdicts["transcript_key"].tolist()
    assert loaded.cat.categories.is_unique and not loaded.cat.categories.is_monotonic_increasing

    repeated = sorted(dictionary + dictionary[:1])  # the first category twice, still in order
    rewrite(repeated, codes + (codes > 0))
    again = load_run(path).verdicts
    assert again["transcript_key"].astype(str).tolist() == verdicts["transcript_key"].tolist()
    assert again["transcript_key"].cat.categories.is_unique
    assert pa.ipc.open_file(pa.BufferReader(file.read_bytes())).read_all().equals(original)  # written anew


def test_without_pandas_unchecked_constructor_the_categories_are_checked_as_before(folder, monkeypatch):
    """The unchecked dtype constructor is pandas' private one: a pandas without it reads the same tables."""
    path, verdicts = folder
    monkeypatch.delattr(pd.CategoricalDtype, "_from_fastpath")
    loaded = load_run(path).verdicts
    assert loaded["transcript_key"].astype(str).tolist() == verdicts["transcript_key"].tolist()
    assert loaded["system"].astype(str).tolist() == verdicts["system"].tolist()
