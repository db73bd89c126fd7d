"""Benchmark: does a multiverse run send each model request once, and no more?

Not collected by pytest (no test functions). Run from the repository root:

    python tests/bench/bench_call_economy.py                      # specs/deception-sim.yaml, else specs/demo.yaml
    python tests/bench/bench_call_economy.py --spec specs/demo.yaml --uncached

Requests are counted where they arrive, not from the pipeline's own
bookkeeping: the simulated provider's handler digests every request body
litellm delivers to it (model, world, messages, seed, tools, response
format, every other parameter; ``tests/transport.py``). It runs the spec's
whole grid twice in a fresh temporary store through ``multiverse.engine._pipeline.run``
and reports:

- requests sent, and unique request digests among them: the minimum, since an
  answer can only be reused for the very same request; repeats (sent minus
  unique) must be 0;
- the second run's requests, which must be 0: everything is stored;
- the run's own count (manifest ``calls``), which must equal the requests sent;
- with ``--uncached``, the same grid once more in another fresh store with the
  request cache taken out, as runs were before it: what repeats it sends;
- the naive count: every universe run on its own, sharing no unit with the
  others (its own cases, its own transcripts at the requests they took here,
  its own judge calls), i.e. what a per-audit script would spend. This one is
  derived from the work units and the stored records, as a point of
  comparison; the minimum above is not.
"""

from __future__ import annotations

import argparse
import os
import platform
import shlex
import sys
import tempfile
import time
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from transport import SimTransportLog, Uncached  # noqa: E402

from multiverse.engine._pipeline import run  # noqa: E402
from multiverse.spec import load_spec  # noqa: E402
from multiverse.spec._grid import expand  # noqa: E402
from multiverse.store._store import Store  # noqa: E402
from multiverse.work._units import build_work  # noqa: E402

DEFAULT_SPECS = ("specs/deception-sim.yaml", "specs/demo.yaml")
STAGES = ("draft", "rollout", "judge")


def _sent(record: dict | None) -> int:
    """Requests a stored record's making sent, plus the answers it was served (as if nothing were shared)."""
    provenance = (record or {}).get("provenance") or {}
    return int(provenance.get("calls", 0)) + int(provenance.get("reused", 0))


def naive_count(spec, universes, store: Store) -> Counter:
    """Every universe on its own: its units (within the universe), each at the requests it took."""
    work = build_work(spec, universes)
    transcripts = store.get_many("transcript", list(work.transcripts))
    ok = {k for k, t in transcripts.items() if t.get("status") == "ok"}
    judgments = store.get_many("judgment", [k for k, j in work.judge_calls.items() if j.transcript_key in ok])
    cases = store.get_many("case", [k for k, c in work.cases.items() if c.given is None])
    naive: Counter = Counter()
    for universe in universes:
        alone = build_work(spec, [universe])
        naive["draft"] += sum(_sent(cases.get(k)) for k, c in alone.cases.items() if c.given is None)
        naive["rollout"] += sum(_sent(transcripts.get(k)) for k in alone.transcripts)
        naive["judge"] += sum(_sent(judgments.get(k)) for k in alone.judge_calls)
    return naive


def default_spec() -> Path:
    for name in DEFAULT_SPECS:
        if (ROOT / name).exists():
            return ROOT / name
    raise SystemExit("no spec found: pass --spec PATH")


def _uncached_run(spec, tmp: Path, jobs: int, log: SimTransportLog) -> dict:
    import multiverse.model

    # The run takes the class from the package when it starts (a run in its own process would not see this).
    real = multiverse.model.RequestCache
    multiverse.model.RequestCache = Uncached  # type: ignore[assignment,misc]
    try:
        mark = log.mark()
        t0, c0 = time.perf_counter(), time.process_time()
        run(spec, store=tmp / "uncached", out=tmp / "run-uncached", progress=False, jobs=jobs)
        seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
    finally:
        multiverse.model.RequestCache = real  # type: ignore[misc]
    # A cache left in place would store every answer: none may be there, or the comparison is void.
    store = Store(tmp / "uncached")
    try:
        kept = sum(1 for _ in store.keys("request"))
    finally:
        store.close()
    if kept:
        raise SystemExit(f"--uncached: the request cache was still in place ({kept:,} answers stored)")
    return {**log.summary(mark), "seconds": seconds, "cpu": cpu}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spec", type=Path, default=None,
                        help="spec to run (default: specs/deception-sim.yaml if present, else specs/demo.yaml)")
    parser.add_argument("--jobs", type=int, default=8, help="concurrent model calls (default 8)")
    parser.add_argument("--uncached", action="store_true",
                        help="also run the grid with the request cache taken out (as before it), to count its repeats")
    args = parser.parse_args()
    spec_path = (args.spec or default_spec()).resolve()
    spec = load_spec(spec_path)

    print("command: " + " ".join(shlex.quote(a) for a in [sys.executable, *sys.argv]) + f"   (cwd {os.getcwd()})")
    print(f"machine: {os.cpu_count()} cores, {platform.platform()}, python {platform.python_version()}; "
          f"load average {os.getloadavg()[0]:.2f}")
    print(f"date: {datetime.now(timezone.utc).isoformat(timespec='seconds')}")
    print(f"spec: {spec_path}")

    with tempfile.TemporaryDirectory(prefix="bench-call-economy-") as tmp_name, SimTransportLog() as log:
        tmp = Path(tmp_name)
        store = Store(tmp / "store")
        uncached = _uncached_run(spec, tmp, args.jobs, log) if args.uncached else None
        mark = log.mark()
        t0, c0 = time.perf_counter(), time.process_time()
        result = run(spec, store=store, out=tmp / "run", progress=False, jobs=args.jobs)
        first_seconds, first_cpu = time.perf_counter() - t0, time.process_time() - c0
        first = log.summary(mark)
        mark = log.mark()
        t0 = time.perf_counter()
        run(spec, store=store, out=tmp / "run2", progress=False, jobs=args.jobs)
        second_seconds = time.perf_counter() - t0
        second = log.summary(mark)
        naive = naive_count(spec, expand(spec), store)
        stored_requests = sum(1 for _ in store.keys("request"))

    manifest = {s: result.manifest.stages[s].calls for s in STAGES}
    print(f"grid: {len(expand(spec))} universes, {len(result.verdicts):,} verdict rows; "
          f"statuses {result.manifest.statuses}")
    print(f"first run {first_seconds:.1f} s ({first_cpu:.1f} s CPU), second run {second_seconds:.1f} s"
          + (f"; without the request cache (run first, in its own store) {uncached['seconds']:.1f} s "
             f"({uncached['cpu']:.1f} s CPU)" if uncached else "") + f"; load average now {os.getloadavg()[0]:.2f}")
    print()
    rows = [("first run", first), ("second run", second)]
    if uncached:
        rows.append(("without request cache", uncached))
    print(f"{'':<24}{'sent':>10}{'unique':>10}{'repeats':>10}")
    for name, counts in rows:
        print(f"{name:<24}{counts['requests']:>10,}{counts['unique']:>10,}{counts['repeats']:>10,}")
    print(f"the run's own count (manifest calls): {sum(manifest.values()):,} "
          f"({', '.join(f'{s} {manifest[s]:,}' for s in STAGES)}); request entries stored: {stored_requests:,}")
    total_naive = sum(naive.values())
    print(f"naive (each universe on its own, from the units): {total_naive:,} "
          f"({', '.join(f'{s} {naive[s]:,}' for s in STAGES)}); sharing saves "
          f"{total_naive - first['requests']:,} ({(total_naive - first['requests']) / max(total_naive, 1):.1%}), "
          f"naive / sent = {total_naive / max(first['requests'], 1):.2f}x")
    print()
    targets = [
        ("no request sent twice", first["repeats"] == 0, f"{first['repeats']:,} repeats in {first['requests']:,}"),
        ("second run sends 0", second["requests"] == 0, f"second run sent {second['requests']:,}"),
        ("the run counts what went over the wire", sum(manifest.values()) == first["requests"],
         f"manifest {sum(manifest.values()):,}, transport {first['requests']:,}"),
    ]
    if uncached:
        targets.append(("the cache sends the same unique requests", uncached["unique"] == first["unique"],
                        f"without it {uncached['unique']:,} unique of {uncached['requests']:,} sent"))
    for name, ok, detail in targets:
        print(f"{'PASS' if ok else 'MISS'}  {name}: {detail}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
