"""Benchmark: does a multiverse run make exactly the model calls it needs?

Not collected by pytest (no test functions). Run from the repository root:

    python tests/bench/bench_call_economy.py                      # specs/deception-sim.yaml, else specs/demo.yaml
    python tests/bench/bench_call_economy.py --spec specs/demo.yaml

It runs the spec's whole grid twice in a fresh temporary store through
``multiverse.pipeline.run`` with a client that counts every completed model
call, and compares the first run's count with:

- the minimum: every unique unit computed once, i.e. unique generated cases
  + for every unique transcript the calls it actually needed (from its stored
  record's ``provenance.calls``: user turns, user retries, system turns and
  tool calls) + unique (transcript, judge configuration, sample) judge calls
  whose transcript rolled out ok (a failed rollout is never judged);
- the naive count: every universe run on its own, sharing nothing with the
  others (its own cases, its own transcripts at their actual cost, its own
  judge calls), i.e. what a per-audit script would spend;
- the second run's count, which must be 0: everything is stored.

Unique units come from ``multiverse.work.build_work``, which derives the same
cache keys the pipeline stores under.
"""

from __future__ import annotations

import argparse
import os
import platform
import shlex
import sys
import tempfile
import threading
import time
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from multiverse.pipeline import plan, run  # noqa: E402
from multiverse.spec import load_spec  # noqa: E402
from multiverse.store import Store  # noqa: E402
from multiverse.work import build_work  # noqa: E402

DEFAULT_SPECS = ("specs/deception-sim.yaml", "specs/demo.yaml")


class CountingClient:
    """The real model client, with every call counted per model (as tests/conftest.py).

    ``calls`` counts the calls that returned an answer (conftest's count);
    ``raised`` the calls that raised ModelError instead (e.g. a judge answer
    still unparseable after the client's repair request: a call that was made
    and paid for, but returned nothing). ``total`` is both: every model call
    the pipeline asked for.
    """

    def __init__(self, **kwargs):
        from multiverse.llm import LiteLLMClient as ModelClient

        self.client = ModelClient(**kwargs)
        self.calls: Counter = Counter()
        self.raised: Counter = Counter()
        self._lock = threading.Lock()

    def check_credentials(self, configs):
        return self.client.check_credentials(configs)

    def complete(self, config, messages, **kwargs):
        from multiverse.errors import ModelError

        # The stage, from the answer schema the stages request (protocol in ARCH.md).
        stage = {"case": "draft", "judgment": "judge"}.get(kwargs.get("schema_name") if kwargs.get("schema") else None, "rollout")
        try:
            completion = self.client.complete(config, messages, **kwargs)
        except ModelError as exc:
            with self._lock:
                self.raised[(stage, config.model, getattr(exc, "reason", ""))] += 1
            raise
        with self._lock:
            self.calls[(stage, config.model)] += 1
        return completion

    def by_stage(self, what: str = "total") -> Counter:
        out: Counter = Counter()
        for (stage, *_), n in self.calls.items():
            out[stage] += n
        if what == "total":
            for (stage, *_), n in self.raised.items():
                out[stage] += n
        return out

    @property
    def completed(self) -> int:
        return sum(self.calls.values())

    @property
    def total(self) -> int:
        return self.completed + sum(self.raised.values())


def _calls(record: dict | None) -> int:
    return int(((record or {}).get("provenance") or {}).get("calls", 0))


def count_units(spec, universes, store: Store) -> dict:
    """Minimum and naive call counts from the unique units and the stored records."""
    work = build_work(spec, universes)
    cases = [k for k, c in work.cases.items() if c.given is None]
    transcripts = store.get_many("transcript", list(work.transcripts))
    ok = {k for k, t in transcripts.items() if t.get("status") == "ok"}
    judge_ok = [k for k, j in work.judge_calls.items() if j.transcript_key in ok]
    judgments = store.get_many("judgment", judge_ok)
    minimum = {
        "draft": len(cases),
        "rollout": sum(_calls(transcripts.get(k)) for k in work.transcripts),
        "judge": len(judge_ok),
    }
    # Calls that returned an answer, per the stored records (a judge answer
    # that stayed unparseable records 0 calls).
    minimum_completed = {**minimum, "judge": sum(_calls(r) for r in judgments.values())}
    # Per universe on its own: its unique units (within the universe), each at
    # its actual cost; nothing shared with the other universes.
    naive = Counter()
    for universe in universes:
        alone = build_work(spec, [universe])
        naive["draft"] += sum(1 for c in alone.cases.values() if c.given is None)
        naive["rollout"] += sum(_calls(transcripts.get(k)) for k in alone.transcripts)
        naive["judge"] += sum(1 for j in alone.judge_calls.values() if j.transcript_key in ok)
    return {
        "universes": len(universes),
        "rows": len(work.rows),
        "units": {"draft": len(cases), "rollout": len(work.transcripts), "judge": len(work.judge_calls)},
        "transcripts_ok": len(ok),
        "transcripts_stored": len(transcripts),
        "judgments_stored": len(judgments),
        "judge_failed_records": sum(1 for r in judgments.values() if r.get("status") != "ok"),
        "minimum": minimum,
        "minimum_completed": minimum_completed,
        "naive": dict(naive),
    }


def default_spec() -> Path:
    for name in DEFAULT_SPECS:
        if (ROOT / name).exists():
            return ROOT / name
    raise SystemExit("no spec found: pass --spec PATH")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spec", type=Path, default=None,
                        help="spec to run (default: specs/deception-sim.yaml if present, else specs/demo.yaml)")
    parser.add_argument("--jobs", type=int, default=8, help="concurrent model calls (default 8)")
    args = parser.parse_args()
    spec_path = (args.spec or default_spec()).resolve()
    spec = load_spec(spec_path)

    print("command: " + " ".join(shlex.quote(a) for a in [sys.executable, *sys.argv]) + f"   (cwd {os.getcwd()})")
    print(f"machine: {os.cpu_count()} cores, {platform.platform()}, python {platform.python_version()}; "
          f"load average {os.getloadavg()[0]:.2f}")
    print(f"date: {datetime.now(timezone.utc).isoformat(timespec='seconds')}")
    print(f"spec: {spec_path}")

    with tempfile.TemporaryDirectory(prefix="bench-call-economy-") as tmp:
        store = Store(Path(tmp) / "store")
        out = Path(tmp) / "run"
        planned = plan(spec, store=store)
        first = CountingClient(jobs=args.jobs)
        t0 = time.perf_counter()
        result = run(spec, store=store, out=out, progress=False, client=first, jobs=args.jobs)
        first_seconds = time.perf_counter() - t0
        second = CountingClient(jobs=args.jobs)
        t0 = time.perf_counter()
        run(spec, store=store, out=out, progress=False, client=second, jobs=args.jobs)
        second_seconds = time.perf_counter() - t0
        counts = count_units(spec, result.universes, store)

    stages = ("draft", "rollout", "judge")
    made, made_completed = first.by_stage("total"), first.by_stage("completed")
    manifest = {s: result.manifest["stages"][s]["calls"] for s in stages}
    minimum, minimum_completed, naive = counts["minimum"], counts["minimum_completed"], counts["naive"]
    second_made = second.by_stage("total")
    requests = first.client.stats
    print(f"grid: {counts['universes']} universes, {counts['rows']:,} verdict rows; unique units: "
          f"{counts['units']['draft']} cases to draft, {counts['units']['rollout']} transcripts "
          f"({counts['transcripts_ok']} rolled out ok), {counts['units']['judge']} judge calls "
          f"({counts['judgments_stored']} stored, {counts['judge_failed_records']} of them judge_failed)")
    print(f"statuses: {result.manifest['statuses']}")
    print(f"first run {first_seconds:.1f} s, second run {second_seconds:.1f} s")
    print()
    print("made = model calls the first run asked for (answered + raised); minimum = each unique unit once,")
    print("at the calls its stored record needed; naive = every universe run on its own, sharing nothing.")
    print("answered = calls that returned an answer (tests/conftest.py's count); manifest = the run's own count;")
    print("plan = multiverse.pipeline.plan's forecast before the run (its rollout figure assumes 2 calls per turn).")
    header = ["stage", "made", "minimum", "naive", "2nd run", "answered", "min answered", "manifest", "plan"]
    print(f"{header[0]:<9}" + "".join(f"{h:>13}" for h in header[1:]))
    planned_calls = {s: planned["stages"][s]["calls"] for s in stages}
    for s in stages:
        row = [made[s], minimum[s], naive[s], second_made[s], made_completed[s], minimum_completed[s], manifest[s],
               planned_calls[s]]
        print(f"{s:<9}" + "".join(f"{v:>13,}" for v in row))
    totals = [first.total, sum(minimum.values()), sum(naive.values()), second.total, first.completed,
              sum(minimum_completed.values()), sum(manifest.values()), sum(planned_calls.values())]
    print(f"{'total':<9}" + "".join(f"{v:>13,}" for v in totals))
    print(f"requests sent by the client (incl. transport retries and JSON repair requests): {requests['calls']:,} "
          f"(retries {requests.get('retries', 0)}, repairs {requests.get('repairs', 0)}, failures {requests.get('failures', 0)})")
    if first.raised:
        print("calls that raised instead of answering: "
              + ", ".join(f"{stage}/{model} {reason}: {n}" for (stage, model, reason), n in sorted(first.raised.items())))
    if first.completed != sum(manifest.values()) or first.raised:
        print(f"note: the manifest counts {sum(manifest.values()):,} calls (answered only); the pipeline asked for "
              f"{first.total:,} and the client sent {requests['calls']:,} requests")
    total_made, total_min, total_naive = first.total, sum(minimum.values()), sum(naive.values())
    if planned_calls["rollout"] < minimum["rollout"]:
        print(f"note: plan forecast {planned_calls['rollout']:,} rollout calls and calls them an upper bound; the rollouts "
              f"needed {minimum['rollout']:,} ({minimum['rollout'] - planned_calls['rollout']:+,}: simulated-user retries "
              f"and tool calls). plan's naive forecast: {planned['naive_calls']:,}")
    print(f"sharing saves {total_naive - total_made:,} of {total_naive:,} naive calls "
          f"({(total_naive - total_made) / max(total_naive, 1):.1%}); naive / made = "
          f"{total_naive / max(total_made, 1):.2f}x")
    print()
    targets = [
        ("calls made == minimum", total_made == total_min,
         f"made {total_made:,}, minimum {total_min:,}, difference {total_made - total_min:+,}"
         f" (answered only: {first.completed:,} vs {sum(minimum_completed.values()):,})"),
        ("second run makes 0 calls", second.total == 0, f"second run made {second.total:,}"),
    ]
    for name, ok, detail in targets:
        print(f"{'PASS' if ok else 'MISS'}  {name}: {detail}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
