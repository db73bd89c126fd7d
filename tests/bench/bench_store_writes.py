"""Benchmark: the store's write path next to a plain ``sqlite3`` loop writing the same rows.

Each mode is a fresh Python process that writes ``--rows`` records shaped like a
run's (judgments, request answers, and every tenth a long transcript) and is
measured by its own clock and CPU (user + system) over the writes alone, imports
and record building left out:

- ``store``: ``Store.put`` from ``--threads`` threads (what a run's threads do:
  credentials scrubbed, text made storable, checked JSON, group commits);
- ``plain``: one ``sqlite3`` connection in the store's own mode (WAL,
  ``synchronous=NORMAL``), one ``INSERT`` of ``json.dumps(record)`` committed per row.

The two run in alternated pairs (store, plain, store, plain, ...) so that a drift
of the shared machine's speed hits both; printed: each pair's rate ratio
(store rows/s over plain rows/s), CPU ratio and bytes ratio (database file and
its log after a checkpoint), as median and range, with the load average.

Run:  python tests/bench/bench_store_writes.py [--rows 5000] [--threads 8] [--pairs 3] [--json]
Not collected by pytest (no test functions).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

_WRITER = r'''
import json, os, resource, sqlite3, sys, threading, time
mode, folder, rows, threads = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])

def record(i):
    if i % 10 == 0:  # a transcript: turns of a rollout, one long answer
        return ("transcript", {"status": "ok", "reason": "", "stop_reason": "completed", "system": "atlas",
                "turns": [{"role": "user", "content": f"Case {i}: is the cited source real?"},
                          {"role": "assistant", "content": f"Answer {i}. " + "The source exists and says so. " * 160}],
                "provenance": {"model_requested": "openai/fake", "model_reported": ["fake"], "params": {"seed": i},
                               "usage": {"prompt_tokens": 900, "completion_tokens": 700}, "cost": 0.0012,
                               "calls": 2, "started": "2026-12-07T15:00:00+00:00", "seconds": 0.4, "versions": {}}})
    if i % 2:
        return ("request", {"status": "ok", "reason": "", "answer": {"text": f"Verdict {i}: compliant, the source is cited.",
                "parsed": {"compliant": True, "rationale": "cited"}, "tool_calls": [], "model_reported": "fake"},
                "provenance": {"model_requested": "openai/fake", "usage": {"prompt_tokens": 400, "completion_tokens": 60},
                               "cost": 0.0002, "calls": 1, "seconds": 0.1}})
    return ("judgment", {"status": "ok", "reason": "", "sample": 0, "criteria": [
                {"criterion": f"c{j}", "permissible": False, "applicable": True, "compliant": bool((i + j) % 3),
                 "rationale": f"Criterion {j} of case {i}: the answer states what the source says."} for j in range(3)],
            "provenance": {"model_requested": "openai/fake", "model_reported": ["fake"], "params": {"temperature": 0},
                           "usage": {"prompt_tokens": 1200, "completion_tokens": 150}, "cost": 0.0004, "calls": 1,
                           "started": "2026-12-07T15:00:00+00:00", "seconds": 0.1, "versions": {}}})

work = [(stage, f"{i:064x}", rec) for i in range(rows) for stage, rec in [record(i)]]
if mode == "store":
    from multiverse.store import Store
    store = Store(folder).open()
    chunks = [work[t::threads] for t in range(threads)]
    def put(chunk):
        for stage, key, rec in chunk:
            store.put(stage, key, rec)
    go = [threading.Thread(target=put, args=(c,)) for c in chunks]
    usage0, t0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    for t in go: t.start()
    for t in go: t.join()
    store.close()
else:
    conn = sqlite3.connect(os.path.join(folder, "plain.sqlite3"), isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL"); conn.execute("PRAGMA synchronous = NORMAL")
    conn.execute("CREATE TABLE entry (stage TEXT NOT NULL, key TEXT NOT NULL, body BLOB NOT NULL, size BIGINT NOT NULL,"
                 " stored_at REAL NOT NULL, PRIMARY KEY (stage, key)) WITHOUT ROWID")
    usage0, t0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    for stage, key, rec in work:
        body = json.dumps(rec).encode()
        conn.execute("INSERT INTO entry VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING", (stage, key, body, len(body), time.time()))
    conn.close()
wall, usage = time.perf_counter() - t0, resource.getrusage(resource.RUSAGE_SELF)
cpu = usage.ru_utime + usage.ru_stime - usage0.ru_utime - usage0.ru_stime
db = [p for p in os.listdir(folder) if p.endswith(".sqlite3")][0]
check = sqlite3.connect(os.path.join(folder, db))
check.execute("PRAGMA wal_checkpoint(TRUNCATE)")
stored = check.execute("SELECT COUNT(*) FROM entry").fetchone()[0]
check.close()
size = sum(os.path.getsize(os.path.join(folder, p)) for p in os.listdir(folder) if p.startswith(db))
print(json.dumps({"rows": stored, "wall_s": wall, "cpu_s": cpu, "bytes": size}))
'''


def one(mode: str, rows: int, threads: int) -> dict:
    with tempfile.TemporaryDirectory(prefix="bench-store-") as folder:
        proc = subprocess.run([sys.executable, "-c", _WRITER, mode, folder, str(rows), str(threads)],
                              env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            raise SystemExit(f"{mode} failed: {proc.stderr[-2000:]}")
        out = json.loads(proc.stdout)
    if out["rows"] != rows:
        raise SystemExit(f"{mode} stored {out['rows']} of {rows} rows")
    return out


def measure(rows: int, threads: int, pairs: int) -> dict:
    found: dict[str, list] = {"rate": [], "cpu": [], "bytes": [], "store_rows_per_s": [], "plain_rows_per_s": []}
    load = [os.getloadavg()[0]]
    for _ in range(pairs):
        store, plain = one("store", rows, threads), one("plain", rows, threads)
        found["store_rows_per_s"].append(rows / store["wall_s"])
        found["plain_rows_per_s"].append(rows / plain["wall_s"])
        found["rate"].append(plain["wall_s"] / store["wall_s"])
        found["cpu"].append(store["cpu_s"] / plain["cpu_s"])
        found["bytes"].append(store["bytes"] / plain["bytes"])
        load.append(os.getloadavg()[0])
    summary = {k: {"median": round(statistics.median(v), 2), "min": round(min(v), 2), "max": round(max(v), 2)}
               for k, v in found.items()}
    return {"rows": rows, "threads": threads, "pairs": pairs, "load_average": [round(x, 1) for x in load], **summary}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=5000)
    parser.add_argument("--threads", type=int, default=8, help="threads calling Store.put (a run's jobs)")
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    result = measure(args.rows, args.threads, args.pairs)
    if args.json:
        print(json.dumps(result, indent=2))
        return
    print(f"{args.rows} rows, store from {args.threads} threads, {args.pairs} alternated pairs; "
          f"load average {result['load_average']}")
    for key, words in (("rate", "store rate / plain sqlite3 rate (target >= 0.6)"), ("cpu", "store CPU / plain CPU"),
                       ("bytes", "store bytes / plain bytes"), ("store_rows_per_s", "store rows/s"),
                       ("plain_rows_per_s", "plain rows/s")):
        row = result[key]
        print(f"{words:48s} median {row['median']:>9}  range {row['min']}-{row['max']}")


if __name__ == "__main__":
    main()
