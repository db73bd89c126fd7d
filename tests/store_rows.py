"""Looking inside a store's database from a test: its rows, as an auditor (or an attacker) sees them."""

from __future__ import annotations

import json
import sqlite3
import time
import zlib
from pathlib import Path

from multiverse.store import Store

__all__ = ["backdate", "body", "connect", "legacy_entry", "record_json", "rows", "set_body", "store_files"]


def connect(root: Path | Store) -> sqlite3.Connection:
    root = root.root if isinstance(root, Store) else root
    return sqlite3.connect(Path(root) / "store.sqlite3", isolation_level=None, timeout=60)


def rows(root: Path | Store, table: str = "entry", where: str = "", params: tuple = ()) -> list[tuple]:
    with connect(root) as conn:
        return conn.execute(f"SELECT * FROM {table} {where}", params).fetchall()


def body(root: Path | Store, stage: str, key: str) -> bytes:
    """The stored (compressed) body of an entry."""
    with connect(root) as conn:
        return conn.execute("SELECT body FROM entry WHERE stage = ? AND key = ?", (stage, key)).fetchone()[0]


def record_json(root: Path | Store, stage: str, key: str) -> dict:
    """An entry's JSON as stored (long texts as references)."""
    return json.loads(zlib.decompress(body(root, stage, key)))


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
