"""Looking inside a store's database from a test: its rows, as an auditor (or an attacker) sees them."""

from __future__ import annotations

import json
import sqlite3
import time
import zlib
from pathlib import Path

from multiverse.store import Store

__all__ = [
    "backdate",
    "body",
    "claims",
    "connect",
    "count",
    "delete",
    "leases",
    "legacy_entry",
    "record_json",
    "rewrite",
    "rows",
    "set_body",
    "snapshot",
    "store_files",
    "stored_records",
]


def connect(root: Path | Store) -> sqlite3.Connection:
    root = root.root if isinstance(root, Store) else root
    return sqlite3.connect(Path(root) / "store.sqlite3", isolation_level=None, timeout=60)


def rows(root: Path | Store, table: str = "entry", where: str = "", params: tuple = ()) -> list[tuple]:
    with connect(root) as conn:
        return conn.execute(f"SELECT * FROM {table} {where}", params).fetchall()


def body(root: Path | Store, stage: str, key: str) -> bytes:
    """The stored body of an entry (JSON, compressed when large)."""
    with connect(root) as conn:
        return conn.execute("SELECT body FROM entry WHERE stage = ? AND key = ?", (stage, key)).fetchone()[0]


def raw_json(blob: bytes) -> bytes:
    """A body's JSON: as it is, or decompressed (a large record, or a row of the earlier layout)."""
    return bytes(blob) if bytes(blob[:1]) == b"{" else zlib.decompress(blob)


def record_json(root: Path | Store, stage: str, key: str) -> dict:
    """An entry's JSON as stored (in rows of the earlier layout, long texts as references)."""
    return json.loads(raw_json(body(root, stage, key)))


def set_body(root: Path | Store, stage: str, key: str, raw: bytes) -> None:
    """Replace an entry's stored body, as a disk fault or a hand edit would."""
    with connect(root) as conn:
        assert conn.execute("UPDATE entry SET body = ? WHERE stage = ? AND key = ?", (raw, stage, key)).rowcount == 1


def backdate(root: Path | Store, seconds: float, stage: str | None = None, key: str | None = None) -> None:
    """Make entries look ``seconds`` older than now (all, a stage's or one)."""
    clauses, params = [], [time.time() - seconds]
    for column, value in (("stage", stage), ("key", key)):
        if value is not None:
            clauses.append(f"{column} = ?")
            params.append(value)
    where = (" WHERE " + " AND ".join(clauses)) if clauses else ""
    with connect(root) as conn:
        conn.execute(f"UPDATE entry SET stored_at = ?{where}", params)


def legacy_entry(root: Path, stage: str, key: str, record: object) -> Path:
    """An entry file as a store from before the database kept it."""
    path = Path(root) / stage / key[:2] / f"{key}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record, indent=2), encoding="utf-8")
    return path


def store_files(root: Path) -> list[Path]:
    """Every file under a store directory."""
    return sorted(p for p in Path(root).rglob("*") if p.is_file())


def stored_records(root: Path | Store, stage: str | None = None) -> dict[tuple[str, str], dict]:
    """Every record in the store's database, read strictly (UTF-8, JSON, every text reference resolved)."""
    with connect(root) as conn:
        texts = {d: zlib.decompress(b).decode("utf-8") for d, b in conn.execute("SELECT digest, body FROM text")}
        found = conn.execute("SELECT stage, key, body FROM entry" + (" WHERE stage = ?" if stage else ""),
                             (stage,) if stage else ()).fetchall()

    def resolve(value: object) -> object:
        if isinstance(value, str) and value.startswith("\x00"):
            return texts[value[1:]]
        if isinstance(value, dict):
            return {k: resolve(v) for k, v in value.items()}
        if isinstance(value, list):
            return [resolve(v) for v in value]
        return value

    return {(s, k): resolve(json.loads(raw_json(b).decode("utf-8"))) for s, k, b in found}  # type: ignore[misc]


def snapshot(root: Path | Store) -> list[tuple]:
    """What the store holds, to compare before and after (entries and texts)."""
    if not (Path(root.root if isinstance(root, Store) else root) / "store.sqlite3").is_file():
        return []
    return sorted(rows(root, "entry")) + sorted(rows(root, "text"))


def rewrite(root: Path, stage: str, change) -> int:
    """Replace every record of ``stage`` by ``change(record)`` (a hand edit of the store); how many."""
    records = stored_records(root, stage)
    store = Store(root)
    with connect(root) as conn:
        conn.execute("DELETE FROM entry WHERE stage = ?", (stage,))
        conn.execute("DELETE FROM entry_text WHERE stage = ?", (stage,))
    for (s, key), record in records.items():
        assert store.put(s, key, change(record))
    return len(records)


def count(root: Path | Store, stage: str | None = None) -> int:
    """How many entries of ``stage`` (None: of every stage) are committed (0 while the database is not made yet)."""
    path = Path(root.root if isinstance(root, Store) else root) / "store.sqlite3"
    if not path.is_file():
        return 0
    try:
        with connect(root) as conn:
            if stage is None:
                return conn.execute("SELECT COUNT(*) FROM entry").fetchone()[0]
            return conn.execute("SELECT COUNT(*) FROM entry WHERE stage = ?", (stage,)).fetchone()[0]
    except sqlite3.OperationalError:  # its tables are being made
        return 0


def delete(root: Path | Store, stage: str, keys: list[str] | None = None) -> int:
    """Remove entries of ``stage`` (all, or ``keys``) as a person or a disk fault would; how many."""
    with connect(root) as conn:
        if keys is None:
            return conn.execute("DELETE FROM entry WHERE stage = ?", (stage,)).rowcount
        return sum(conn.execute("DELETE FROM entry WHERE stage = ? AND key = ?", (stage, k)).rowcount for k in keys)


def claims(root: Path | Store) -> list[tuple]:
    """The claims held in the store (none before its database exists)."""
    path = Path(root.root if isinstance(root, Store) else root) / "store.sqlite3"
    return rows(root, "claim") if path.is_file() else []


def leases(root: Path | Store) -> list[tuple]:
    """The leases held on the store (none before its database exists)."""
    path = Path(root.root if isinstance(root, Store) else root) / "store.sqlite3"
    return rows(root, "lease") if path.is_file() else []
