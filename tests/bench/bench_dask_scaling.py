"""Benchmark: does a second Dask worker lower a run's wall time, and what does a request cost on Dask?

A fake OpenAI-compatible server (``tests/audit_server.py``'s responder, every
role of an audit) runs in its own process with a fixed latency per request (1 s
by default: a real provider's, so the run waits on the network, not on this
machine's CPU). The server keeps every request body: a body that arrives twice
is a request paid twice, and the benchmark fails if there is one.

Each measurement is one ``multiverse.run`` of the audit grid (2 systems x 4 cells
x ``--cases`` cases, two turns, two judges) into a fresh store, timed from the call
to its return:

- ``dask-1`` and ``dask-2``: ``backend="dask"`` on a fresh ``LocalCluster`` of one
  or two worker processes with ``--threads`` threads each (equal threads per
  worker), with the settings a run gives the local cluster it starts itself
  (``Dask.QUIET``: no profiler, no memory watch). The cluster is started, and its
  workers have imported what a unit needs, before the clock starts: a real
  cluster is started once for many runs.
  They run in alternated pairs (1 then 2, then 2 then 1, ...), so a change of
  the machine's load falls on both; the ratio printed is each pair's
  ``dask-2`` wall over its ``dask-1`` wall, with the median and range of the pairs;
- ``threads``: ``backend="local"`` with ``--threads`` jobs, once per pair, for the
  CPU per request of a threaded run beside Dask's.

CPU is every process of the run (this one, which holds the scheduler, the
nannies and the workers; not the server), user + system, per request the server
answered.

Run:  python tests/bench/bench_dask_scaling.py [--latency 1.0] [--threads 8] [--cases 8] [--pairs 3]
      [--store postgresql://... | --postgres] [--json]
Not collected by pytest (no test functions).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(1, str(ROOT / "tests"))
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")


class ServerProcess:
    """The audit server in its own process; its ``/stats`` counts every request and the distinct bodies."""

    def __init__(self, latency: float):
        self.proc = subprocess.Popen([sys.executable, __file__, "--serve", "--latency", str(latency)],
                                     stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        self.url = self.proc.stdout.readline().strip()

    def stats(self) -> dict[str, Any]:
        with urllib.request.urlopen(f"{self.url}/stats") as response:
            return dict(json.load(response))

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=10)


def serve(latency: float) -> None:
    from audit_server import audit_responder
    from fakeserver import FakeServer, serve_forever

    class Counting(FakeServer):
        """Counts the distinct bodies too: a body sent twice is a request paid twice."""

        def snapshot(self, *, reset: bool = False) -> dict[str, Any]:
            shot = super().snapshot(reset=reset)
            with self._lock:
                bodies = [json.dumps(b, sort_keys=True) for b in self.requests]
                self.requests.clear()
                self.counts.clear()
            shot["distinct"] = len(set(bodies))
            return shot

    serve_forever(Counting(responder=audit_responder, latency=latency))


def _warm() -> int:
    """What a worker imports for its first unit, imported before the clock starts."""
    import multiverse.engine._compute  # noqa: F401
    from multiverse.model._providers import load_litellm

    load_litellm()
    return os.getpid()


def _tree_cpu(exclude: int) -> float:
    """CPU seconds (user + system) of this process and every live descendant but ``exclude``."""
    import psutil

    me = psutil.Process()
    total = sum(me.cpu_times()[:2])
    for child in me.children(recursive=True):
        if child.pid == exclude:
            continue
        try:
            total += sum(child.cpu_times()[:2])
        except psutil.NoSuchProcess:
            pass
    return total


def one_run(mode: str, server: ServerProcess, threads: int, cases: int, store: str | None,
            quiet: bool = True) -> dict[str, Any]:
    """(wall s, CPU s, requests) of one run of the grid in ``mode`` (threads, dask-1, dask-2)."""
    import yaml
    from audit_server import fake_spec_document

    from multiverse import run
    from multiverse.spec import load_spec

    with tempfile.TemporaryDirectory(prefix="bench-dask-") as tmp:
        path = Path(tmp) / "bench.yaml"
        path.write_text(yaml.safe_dump(fake_spec_document(server.url, name="scaling", cases_per_cell=cases)))
        spec = load_spec(path)
        where = store or str(Path(tmp) / "store")
        if store:
            _empty(store)
        server.stats()  # zero the server's counts
        cluster = client = None
        started_up = 0.0
        try:
            if mode.startswith("dask"):
                import dask
                import distributed

                from multiverse.engine._backend_dask import QUIET

                up = time.perf_counter()
                with dask.config.set(QUIET if quiet else {}):
                    cluster = distributed.LocalCluster(n_workers=int(mode[-1]), threads_per_worker=threads,
                                                       processes=True, dashboard_address=None)
                client = distributed.Client(cluster)
                client.run(_warm)
                started_up = time.perf_counter() - up
            cpu = _tree_cpu(server.proc.pid)
            wall = time.perf_counter()
            result = run(spec, store=where, out=Path(tmp) / "run", jobs=threads, progress=False,
                         backend="local" if mode == "threads" else "dask", scheduler=client)
            wall = time.perf_counter() - wall
            cpu = _tree_cpu(server.proc.pid) - cpu
        finally:
            if client is not None:
                client.close()
            if cluster is not None:
                cluster.close()
        shot = server.stats()
    total, distinct = shot["counts"].get("total", 0), shot["distinct"]
    statuses = result.manifest.statuses
    if shot["counts"].get("ok", 0) != total or statuses.get("rollout_failed") or statuses.get("judge_failed"):
        raise SystemExit(f"{mode}: the run was not clean: server {shot['counts']}, statuses {statuses}")
    if distinct != total:
        raise SystemExit(f"{mode}: {total - distinct} request(s) paid twice ({total} sent, {distinct} distinct)")
    row = {"mode": mode, "wall_s": round(wall, 2), "cpu_s": round(cpu, 2), "requests": total,
           "cpu_ms_per_request": round(cpu / total * 1000, 2), "start_up_s": round(started_up, 2),
           "load": round(os.getloadavg()[0], 1)}
    print(f"  {mode:8s} wall {wall:7.2f} s  CPU {cpu:6.2f} s  {row['cpu_ms_per_request']:6.2f} ms/request  "
          f"{total} requests, none twice  (cluster start {started_up:.1f} s, load {row['load']})",
          file=sys.stderr, flush=True)
    return row


def _empty(url: str) -> None:
    """A PostgreSQL store emptied of a previous measurement's rows."""
    from multiverse.store import Store

    db = Store(url).open().db
    for table in ("entry", "entry_text", "text", "claim", "quarantine"):
        db.execute(f"DELETE FROM {table}")


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--latency", type=float, default=1.0, help="server latency per request, seconds")
    parser.add_argument("--threads", type=int, default=8, help="threads per worker (and the threaded run's jobs)")
    parser.add_argument("--cases", type=int, default=8, help="generated cases per cell (8: 384 requests)")
    parser.add_argument("--pairs", type=int, default=3, help="alternated pairs of dask-1 and dask-2 (>= 3)")
    parser.add_argument("--store", default=None, help="a postgresql:// store (emptied before each run); "
                                                      "default a fresh SQLite store per run")
    parser.add_argument("--postgres", action="store_true",
                        help="the store on a throwaway PostgreSQL server (tests/pg_server.py) made for the benchmark")
    parser.add_argument("--no-threads", action="store_true", help="skip the threaded run of each pair")
    parser.add_argument("--dask-defaults", action="store_true", help="distributed's default settings, not QUIET")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--json", action="store_true", help="print one JSON document on stdout")
    args = parser.parse_args()
    if args.serve:
        serve(args.latency)
        return
    header = {"command": " ".join(["python", "tests/bench/bench_dask_scaling.py", *sys.argv[1:]]),
              "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
              "machine": f"python {platform.python_version()}, {os.cpu_count()} CPUs",
              "load_average_at_start": round(os.getloadavg()[0], 2)}
    print("\n".join(f"{k}: {v}" for k, v in header.items()), file=sys.stderr)
    _warm()  # the threaded run's imports too are made before its clock starts
    with contextlib.ExitStack() as stack:
        if args.postgres:
            from pg_server import PostgresServer, binaries

            found = binaries()
            if found is None:
                raise SystemExit("--postgres: PostgreSQL is not installed (no initdb and pg_ctl)")
            args.store = stack.enter_context(PostgresServer(found)).url
        measure(args, header)


def measure(args: argparse.Namespace, header: dict[str, Any]) -> None:
    """The pairs, their summary on stderr, and with ``--json`` the whole document on stdout."""
    server = ServerProcess(args.latency)
    rows: list[dict[str, Any]] = []
    ratios = []
    try:
        for pair in range(args.pairs):
            order = ["dask-1", "dask-2"] if pair % 2 == 0 else ["dask-2", "dask-1"]
            walls = {}
            for mode in order:
                row = one_run(mode, server, args.threads, args.cases, args.store, quiet=not args.dask_defaults)
                rows.append({**row, "pair": pair})
                walls[mode] = row["wall_s"]
            ratios.append(walls["dask-2"] / walls["dask-1"])
            print(f"  pair {pair + 1}: dask-2 / dask-1 wall = {ratios[-1]:.2f}", file=sys.stderr, flush=True)
            if not args.no_threads:
                rows.append({**one_run("threads", server, args.threads, args.cases, args.store), "pair": pair})
    finally:
        server.close()

    def summary(values: list[float]) -> dict[str, float]:
        return {"median": round(statistics.median(values), 3), "min": round(min(values), 3), "max": round(max(values), 3)}

    per_request = {m: summary([r["cpu_ms_per_request"] for r in rows if r["mode"] == m])
                   for m in ("threads", "dask-1", "dask-2") if any(r["mode"] == m for r in rows)}
    document = {**header, "quiet": not args.dask_defaults, "latency": args.latency, "threads_per_worker": args.threads, "cases": args.cases,
                "store": "postgresql" if args.store else "sqlite", "wall_ratio_2_over_1": summary(ratios),
                "cpu_ms_per_request": per_request, "runs": rows, "load_average_at_end": round(os.getloadavg()[0], 2)}
    ratio = document["wall_ratio_2_over_1"]
    print(f"\ntwo workers / one worker, wall: median {ratio['median']:.2f} (range {ratio['min']:.2f}-{ratio['max']:.2f}, "
          f"{len(ratios)} pairs; target <= 0.6)", file=sys.stderr)
    for mode, cpu in per_request.items():
        print(f"CPU per request, {mode}: median {cpu['median']:.2f} ms (range {cpu['min']:.2f}-{cpu['max']:.2f})",
              file=sys.stderr)
    if args.json:
        print(json.dumps(document, indent=2))


if __name__ == "__main__":
    main()
