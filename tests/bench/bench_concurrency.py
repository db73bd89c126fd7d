"""Benchmark: does the model client turn `jobs` into throughput, and what does a call cost the client?

Runs the fault-free fake OpenAI-compatible server (tests/fakeserver.py) in a
separate process, so its CPU does not compete with the client for the GIL,
with a fixed latency per request. For each way of calling (``--modes``) and
each jobs level it reports the efficiency (ideal wall time calls x latency /
jobs, over the wall time) and the client's CPU per call (every client process,
logging threads included):

- ``client``: ``ModelClient.complete`` from ``jobs`` threads (what a run does today);
- ``client-shared``: the same with one ``openai.OpenAI`` client passed to every call
  (``client`` in the model's params, which litellm takes);
- ``threads``: ``litellm.completion`` from ``jobs`` threads, litellm's logging and
  callbacks off (:func:`lean`) and one shared ``openai.OpenAI`` client;
- ``loop``: ``litellm.acompletion`` on one event loop, ``jobs`` at a time (lean, one
  shared ``openai.AsyncOpenAI``). Handing calls to such a loop from the executor's
  threads (``asyncio.run_coroutine_threadsafe``) was measured too and was 2-3x
  slower than ``threads``: litellm builds each request in the loop's default
  executor threads anyway, and the hand-offs add GIL switches;
- ``procs``: ``--procs`` worker processes, each running ``loop`` with its share of the jobs;
- ``run``, ``run-procs``, ``run-dask``: a real ``multiverse.run`` of a small audit grid
  (``--run-cases`` generated cases per cell: 4 cells x 2 systems, two judges, two
  turns) with ``backend`` local, processes or dask, against the same server
  playing every role (``tests/audit_server.py``). Calls are counted at the server;
  the client CPU is the run's process and every worker process it started (reaped,
  so their CPU is in its children's rusage). The wall time is the whole ``run()``:
  expanding the grid, starting workers, the run's tail (on threads a unit starts once
  what it reads is stored; on processes and dask a stage starts when the last unit of
  the one before has ended) and writing the tables.

``--profile`` adds where the CPU of one call goes (cProfile, thread CPU time,
serial calls at the same latency), summed by layer: request building, cost
calculation, logging, the openai SDK, the HTTP transport, response parsing,
our own code.

Run:  python tests/bench/bench_concurrency.py [--latency 0.1] [--calls 2000] [--jobs 32 64]
      [--modes client threads loop procs run run-procs] [--run-cases 64] [--profile] [--json]
      python tests/bench/bench_concurrency.py --jobs 64 --modes threads run --pairs 3
      (issue 47's figure: the run's share of the ideal over litellm's alone, in alternated pairs)
Not collected by pytest (no test functions).
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import io
import json
import multiprocessing
import os
import platform
import pstats
import subprocess
import sys
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(1, str(ROOT / "tests"))
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

MESSAGES = [{"role": "user", "content": "Is the cited source real? Answer briefly."}]
MODEL = "openai/fake"
RUN_BACKENDS = {"run": "local", "run-procs": "processes", "run-dask": "dask"}
MODES = ("client", "client-shared", "threads", "loop", "procs", *RUN_BACKENDS)


class ServerProcess:
    """tests/fakeserver.py in its own process; prints its URL on the first line."""

    def __init__(self, latency: float, audit: bool = False):
        # audit: every role of a run answered by tests/audit_server.py's responder
        command = [__file__, "--serve-audit"] if audit else [str(ROOT / "tests" / "fakeserver.py")]
        self.proc = subprocess.Popen([sys.executable, *command, "--latency", str(latency)], stdout=subprocess.PIPE, text=True)
        self.url = self.proc.stdout.readline().strip()

    def stats(self) -> dict:
        with urllib.request.urlopen(f"{self.url}/stats") as response:
            return json.load(response)

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=10)


def lean(litellm) -> None:
    """litellm with everything a run does not use switched off: no callbacks, no
    message logging, no debug output. (Its success handler still runs on its
    logging thread pool, and it still prices every answer: neither can be turned off.)"""
    litellm.success_callback = []
    litellm.failure_callback = []
    litellm.callbacks = []
    litellm._async_success_callback = []
    litellm._async_failure_callback = []
    litellm.turn_off_message_logging = True
    litellm.disable_streaming_logging = True
    litellm.suppress_debug_info = True
    litellm.set_verbose = False
    litellm.telemetry = False


def _litellm():
    from multiverse.model._providers import load_litellm

    return load_litellm()


def _request(url: str, client=None) -> dict:
    request = {"model": MODEL, "api_base": url, "api_key": "sk-local", "messages": MESSAGES,
               "num_retries": 0, "max_retries": 0, "timeout": 60}
    if client is not None:
        request["client"] = client
    return request


async def _gather(url: str, jobs: int, calls: int, go=None) -> tuple[float, float]:
    """(wall s, process CPU s) of ``calls`` ``litellm.acompletion`` calls, ``jobs`` at a time, on this loop."""
    import openai

    litellm = _litellm()
    lean(litellm)
    request = _request(url, openai.AsyncOpenAI(base_url=url, api_key="sk-local", max_retries=0))
    gate = asyncio.Semaphore(jobs)

    async def one():
        async with gate:
            return await litellm.acompletion(**request)

    await asyncio.gather(*(one() for _ in range(2 * jobs)))  # warm the connections
    if go is not None:
        go()
    wall, cpu = time.perf_counter(), time.process_time()
    await asyncio.gather(*(one() for _ in range(calls)))
    return time.perf_counter() - wall, time.process_time() - cpu


def caller(mode: str, url: str, jobs: int):
    """(function making one call, closer) for a mode that runs in this process."""
    litellm = _litellm()
    if mode in ("client", "client-shared"):
        from multiverse.model._llm import LiteLLMClient as ModelClient
        from multiverse.model._llm import ModelConfig

        params = {}
        if mode == "client-shared":
            import openai

            # litellm passes a request's `client` through: one openai client for every call,
            # instead of litellm's per-call look-up in its client cache.
            params["client"] = openai.OpenAI(base_url=url, api_key="sk-local", max_retries=0)
        client, config = ModelClient(jobs=jobs), ModelConfig(MODEL, params, api_base=url)

        def report() -> None:
            stats = client.stats
            print(f"  (ModelClient: {stats['calls']} requests, {stats['retries']} retries, "
                  f"failures by reason {stats['failures_by_reason']})", file=sys.stderr)

        return (lambda: client.complete(config, MESSAGES)), report
    lean(litellm)
    if mode == "threads":
        import openai

        sdk = openai.OpenAI(base_url=url, api_key="sk-local", max_retries=0)
        request = _request(url, sdk)
        return (lambda: litellm.completion(**request)), sdk.close
    raise SystemExit(f"unknown mode {mode!r}")


def timed_pool(function, jobs: int, calls: int) -> tuple[float, float]:
    """(wall s, process CPU s) of ``calls`` calls of ``function`` from ``jobs`` threads, after a warm-up."""
    with ThreadPoolExecutor(jobs) as pool:
        list(pool.map(lambda _: function(), range(2 * jobs)))
        wall, cpu = time.perf_counter(), time.process_time()
        list(pool.map(lambda _: function(), range(calls)))
        return time.perf_counter() - wall, time.process_time() - cpu


def _worker(url: str, jobs: int, calls: int, ready, go, results) -> None:
    def wait_for_go():
        ready.put(os.getpid())
        go.wait()

    results.put(asyncio.run(_gather(url, jobs, calls, wait_for_go))[1])


def timed_procs(url: str, jobs: int, calls: int, procs: int) -> tuple[float, float]:
    """(wall s, CPU s of all workers) with ``procs`` processes sharing the jobs and the calls."""
    context = multiprocessing.get_context("spawn")
    ready, results, go = context.Queue(), context.Queue(), context.Event()
    shares = [(jobs // procs + (i < jobs % procs), calls // procs + (i < calls % procs)) for i in range(procs)]
    workers = [context.Process(target=_worker, args=(url, j, n, ready, go, results)) for j, n in shares]
    for w in workers:
        w.start()
    for _ in workers:
        ready.get(timeout=300)
    wall = time.perf_counter()
    go.set()
    cpu = sum(results.get(timeout=600) for _ in workers)
    wall = time.perf_counter() - wall
    for w in workers:
        w.join(30)
    return wall, cpu


def serve_audit(latency: float) -> None:
    from audit_server import audit_responder
    from fakeserver import FakeServer, serve_forever

    serve_forever(FakeServer(responder=audit_responder, latency=latency))


def _cpu_with_children() -> float:
    import resource

    return sum(r.ru_utime + r.ru_stime for r in (resource.getrusage(resource.RUSAGE_SELF),
                                                  resource.getrusage(resource.RUSAGE_CHILDREN)))


def timed_run(backend: str, url: str, jobs: int, cases: int) -> tuple[float, float, int]:
    """(wall s, client CPU s, calls at the server) of one ``multiverse.run`` of the audit grid."""
    import tempfile

    import yaml
    from audit_server import fake_spec_document

    from multiverse.engine._pipeline import run
    from multiverse.spec import load_spec

    with tempfile.TemporaryDirectory(prefix="bench-run-") as tmp:
        path = Path(tmp) / "bench.yaml"
        path.write_text(yaml.safe_dump(fake_spec_document(url, name=f"bench{jobs}", cases_per_cell=cases)))
        spec = load_spec(path)
        before = _server_stats(url)["counts"]  # the server's counts are cumulative
        wall, cpu = time.perf_counter(), _cpu_with_children()
        result = run(spec, store=Path(tmp) / "store", out=Path(tmp) / "run", jobs=jobs, progress=False, backend=backend)
        wall, cpu = time.perf_counter() - wall, _cpu_with_children() - cpu
        counts = {k: v - before.get(k, 0) for k, v in _server_stats(url)["counts"].items()}
    statuses = result.manifest.statuses
    if counts.get("ok", 0) != counts.get("total", 0) or statuses.get("rollout_failed") or statuses.get("judge_failed"):
        raise SystemExit(f"the benchmark run was not clean: server {counts}, statuses {statuses}")
    return wall, cpu, counts["total"]


def _server_stats(url: str) -> dict:
    with urllib.request.urlopen(f"{url}/stats") as response:
        return json.load(response)


def measure(modes: list[str], latency: float, calls: int, jobs_levels: list[int], procs: int, passthrough: list[str]) -> dict:
    """Each mode in a fresh client process: litellm's logging backlog and clients from
    one mode must not slow the next (they did: the loop after two thread modes ran 20x slower)."""
    server = ServerProcess(latency=latency, audit=any(m in RUN_BACKENDS for m in modes))
    out: dict = {}
    try:
        for mode in modes:
            argv = [sys.executable, __file__, "--child-mode", mode, "--url", server.url, "--latency", str(latency),
                    "--calls", str(calls), "--procs", str(procs), "--jobs", *map(str, jobs_levels), *passthrough]
            proc = subprocess.run(argv, check=False, stdout=subprocess.PIPE, text=True)
            if proc.returncode != 0:
                out[mode] = {"error": f"exit {proc.returncode}"}
                continue
            out[mode] = json.loads(proc.stdout)
    finally:
        server.close()
    return out


def run_mode(mode: str, url: str, latency: float, calls: int, jobs_levels: list[int], procs: int,
             run_cases: int = 64) -> dict:
    rows = {}
    for jobs in jobs_levels:
        if mode in RUN_BACKENDS:
            wall, cpu, calls = timed_run(RUN_BACKENDS[mode], url, jobs, run_cases)
        elif mode == "procs":
            wall, cpu = timed_procs(url, jobs, calls, procs)
        elif mode == "loop":
            wall, cpu = asyncio.run(_gather(url, jobs, calls))
        else:
            function, close = caller(mode, url, jobs)
            wall, cpu = timed_pool(function, jobs, calls)
            close()
        ideal = calls * latency / jobs
        row = {"efficiency": round(ideal / wall, 3), "client_cpu_ms_per_call": round(cpu / calls * 1000, 2),
               "calls": calls, "wall_s": round(wall, 2), "ideal_s": round(ideal, 2),
               "load_average": round(os.getloadavg()[0], 1)}
        rows[str(jobs)] = row
        print(f"  {mode:9s} {jobs:5d} {calls:6d} {wall:8.2f} {ideal:8.2f} {row['efficiency']:7.0%}"
              f" {row['client_cpu_ms_per_call']:8.2f}   load {row['load_average']:.1f}", file=sys.stderr, flush=True)
    return rows


# -- where a call's CPU goes -----------------------------------------------------------

# Entry points of each layer: (path part, function name). Times are cumulative
# (the function and all it calls), so nested layers are subtracted below.
_ENTRY = {
    "complete": ("multiverse/llm.py", "complete"),
    "litellm": ("litellm/utils.py", "wrapper"),
    "setup": ("litellm/utils.py", "function_setup"),
    "cost": ("litellm_core_utils/litellm_logging.py", "response_cost_calculator"),
    "sdk": ("litellm/llms/openai/openai.py", "make_sync_openai_chat_completion_request"),
    "transport": ("httpx/_client.py", "send"),
    "sdk_parse": ("openai/_legacy_response.py", "parse"),
    "convert": ("convert_dict_to_response.py", "convert_to_model_response_object"),
    "optional_params": ("litellm/utils.py", "get_optional_params"),
}


def profile(url: str, calls: int) -> dict:
    """CPU of one serial ``ModelClient.complete`` call by layer (cProfile, thread CPU
    time; the profiler itself inflates the total about 3x, the shares much less)."""
    _litellm()
    from multiverse.model._llm import LiteLLMClient as ModelClient
    from multiverse.model._llm import ModelConfig

    client, config = ModelClient(jobs=1), ModelConfig(MODEL, {}, api_base=url)
    for _ in range(20):
        client.complete(config, MESSAGES)
    profiler = cProfile.Profile(time.thread_time)
    thread, process = time.thread_time(), time.process_time()
    profiler.enable()
    for _ in range(calls):
        client.complete(config, MESSAGES)
    profiler.disable()
    thread, process = time.thread_time() - thread, time.process_time() - process
    entries = pstats.Stats(profiler, stream=io.StringIO()).stats  # type: ignore[attr-defined]

    def cum(key: str) -> float:
        part, name = _ENTRY[key]
        return sum(v[3] for (path, _line, fn), v in entries.items() if fn == name and part in path)

    t = {key: cum(key) for key in _ENTRY}
    layers = {
        "our code (ModelClient.complete around litellm)": t["complete"] - t["litellm"],
        "litellm: logging object and call set-up": t["setup"],
        "litellm: request building (params, provider config)": t["litellm"] - t["setup"] - t["cost"] - t["sdk"] - t["convert"],
        "litellm: cost calculation": t["cost"],
        "litellm: response conversion": t["convert"],
        "openai SDK: request and response model": t["sdk"] - t["transport"],
        "HTTP transport (httpx, httpcore, h11)": t["transport"],
    }
    ms = {name: round(seconds / calls * 1000, 2) for name, seconds in layers.items()}
    return {"calls": calls, "thread_cpu_ms_per_call_profiled": round(thread / calls * 1000, 2),
            "process_cpu_ms_per_call_profiled": round(process / calls * 1000, 2),
            "other_threads_cpu_ms_per_call": round((process - thread) / calls * 1000, 2),
            "ms_per_call": ms, "share": {name: round(v / t["complete"], 3) for name, v in layers.items()}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency", type=float, default=0.1, help="server latency per request, seconds")
    parser.add_argument("--calls", type=int, default=2000, help="calls per mode and jobs level")
    parser.add_argument("--jobs", type=int, nargs="+", default=[32, 64])
    parser.add_argument("--modes", nargs="+", choices=MODES, default=["client", "threads", "loop", "procs"])
    parser.add_argument("--procs", type=int, default=2, help="worker processes of the procs mode")
    parser.add_argument("--run-cases", type=int, default=64,
                        help="generated cases per cell of the run modes' grid (64: about 3,300 calls)")
    parser.add_argument("--serve-audit", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--profile", action="store_true", help="also profile serial calls by layer")
    parser.add_argument("--profile-calls", type=int, default=200)
    parser.add_argument("--json", action="store_true", help="print one JSON document on stdout")
    parser.add_argument("--pairs", type=int, default=0,
                        help="measure the first two --modes (say threads run) in this many alternated pairs, each "
                             "in fresh processes, and print the second's efficiency over the first's: median and range")
    parser.add_argument("--child-mode", choices=MODES, help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    parser.add_argument("--session", action="store_true",
                        help="give litellm one httpx client sized for the jobs (litellm.client_session)")
    parser.add_argument("--priced", action="store_true", help="give the fake model a (zero) price in litellm's map")
    parser.add_argument("--switch-interval", type=float, default=None,
                        help="sys.setswitchinterval for the client (Python's default is 0.005 s)")
    args = parser.parse_args()
    if args.serve_audit:
        serve_audit(args.latency)
        return
    if args.switch_interval is not None:
        sys.setswitchinterval(args.switch_interval)
    if args.priced:
        # An entry in litellm's price map: pricing an answer is then a look-up, not a
        # search through its fallback name patterns (what an unpriced model costs).
        _litellm().register_model({MODEL: {"input_cost_per_token": 0.0, "output_cost_per_token": 0.0,
                                           "litellm_provider": "openai", "mode": "chat"}})
    if args.session:
        import httpx

        # litellm's own sync client is a bare httpx.Client: at most 100 connections, 20 kept alive.
        _litellm().client_session = httpx.Client(follow_redirects=True, limits=httpx.Limits(
            max_connections=max(args.jobs) * 2, max_keepalive_connections=max(args.jobs) * 2))
    if args.child_mode:
        _litellm()
        print(json.dumps(run_mode(args.child_mode, args.url, args.latency, args.calls, args.jobs, args.procs,
                                  args.run_cases)))
        return
    passthrough = ["--run-cases", str(args.run_cases)] + (["--priced"] if args.priced else []) + (["--session"] if args.session else []) + (
        ["--switch-interval", str(args.switch_interval)] if args.switch_interval is not None else [])

    command = " ".join(["python", "tests/bench/bench_concurrency.py", *sys.argv[1:]])
    started = time.perf_counter()
    _litellm()
    header = {
        "command": command, "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "machine": f"python {platform.python_version()}, {os.cpu_count()} CPUs, litellm {_version('litellm')}, "
                   f"openai {_version('openai')}, httpx {_version('httpx')}",
        "load_average_at_start": round(os.getloadavg()[0], 2), "litellm_import_s": round(time.perf_counter() - started, 2),
    }
    print("\n".join(f"{k}: {v}" for k, v in header.items()), file=sys.stderr)
    print(f"\n  {'mode':9s} {'jobs':>5s} {'calls':>6s} {'wall s':>8s} {'ideal s':>8s} {'eff.':>7s} {'CPU ms':>8s}",
          file=sys.stderr)
    if args.pairs:
        paired(args, passthrough, header)
        return
    by_mode = measure(args.modes, args.latency, args.calls, args.jobs, args.procs, passthrough)
    best = {}
    for jobs in map(str, args.jobs):
        measured = [m for m in by_mode if jobs in by_mode[m]]
        if not measured:
            continue
        mode = max(measured, key=lambda m: by_mode[m][jobs]["efficiency"])
        best[jobs] = {**by_mode[mode][jobs], "mode": mode}
    document = {"latency": args.latency, "jobs": best, "modes": by_mode, **header,
                "load_average_at_end": round(os.getloadavg()[0], 2)}
    if args.profile:
        server = ServerProcess(latency=args.latency)
        try:
            document["profile"] = profile(server.url, args.profile_calls)
        finally:
            server.close()
        print(f"\nwhere one call's CPU goes (ModelClient.complete, serial, {args.profile_calls} calls under cProfile):",
              file=sys.stderr)
        for layer, share in document["profile"]["share"].items():
            print(f"  {layer:55s} {share:6.1%} {document['profile']['ms_per_call'][layer]:7.2f} ms", file=sys.stderr)
        print(f"  (litellm's logging threads, outside the call: "
              f"{document['profile']['other_threads_cpu_ms_per_call']:.2f} ms)", file=sys.stderr)
    if args.json:
        print(json.dumps(document, indent=1))
    else:
        for jobs, row in best.items():
            print(f"jobs={jobs}: best mode {row['mode']}, efficiency {row['efficiency']:.0%}, "
                  f"{row['client_cpu_ms_per_call']:.2f} ms client CPU per call")


def paired(args: argparse.Namespace, passthrough: list[str], header: dict) -> None:
    """The second mode's efficiency over the first's, per jobs level, in alternated pairs (A B, B A, A B ...),
    so the machine's load drifts over both alike. A figure is the median of the pairs with its range."""
    import statistics

    if len(args.modes) < 2:
        raise SystemExit("--pairs compares two --modes: the reference first (threads), then the one measured (run)")
    first, second = args.modes[:2]
    pairs = []
    for i in range(args.pairs):
        order = [first, second] if i % 2 == 0 else [second, first]
        pairs.append(measure(order, args.latency, args.calls, args.jobs, args.procs, passthrough))
    summary = {}
    for jobs in map(str, args.jobs):
        rows = [(p[first][jobs], p[second][jobs]) for p in pairs if jobs in p.get(first, {}) and jobs in p.get(second, {})]
        ratios = [b["efficiency"] / a["efficiency"] for a, b in rows]
        if not ratios:
            continue
        summary[jobs] = {
            "ratio": {"median": round(statistics.median(ratios), 3), "min": round(min(ratios), 3), "max": round(max(ratios), 3)},
            first: {"median": statistics.median(a["efficiency"] for a, _ in rows),
                    "cpu_ms_per_call": statistics.median(a["client_cpu_ms_per_call"] for a, _ in rows)},
            second: {"median": statistics.median(b["efficiency"] for _, b in rows),
                     "cpu_ms_per_call": statistics.median(b["client_cpu_ms_per_call"] for _, b in rows)},
            "load_average": [min(min(a["load_average"], b["load_average"]) for a, b in rows),
                             max(max(a["load_average"], b["load_average"]) for a, b in rows)],
        }
        print(f"jobs={jobs}: {second} / {first} efficiency {summary[jobs]['ratio']['median']:.2f} "
              f"(range {summary[jobs]['ratio']['min']:.2f}-{summary[jobs]['ratio']['max']:.2f}, {len(ratios)} pairs; "
              f"{second} {summary[jobs][second]['median']:.0%} at {summary[jobs][second]['cpu_ms_per_call']:.2f} ms CPU a call"
              f"{_backend_words(second)}, {first} {summary[jobs][first]['median']:.0%} at "
              f"{summary[jobs][first]['cpu_ms_per_call']:.2f} ms{_backend_words(first)}; load "
              f"{summary[jobs]['load_average'][0]}-{summary[jobs]['load_average'][1]})", file=sys.stderr)
    if args.json:
        print(json.dumps({"latency": args.latency, "pairs": pairs, "summary": summary, **header,
                          "load_average_at_end": round(os.getloadavg()[0], 2)}, indent=1))


def _backend_words(mode: str) -> str:
    """What a run mode runs on, for the printed figure: the backend and its processes."""
    if mode not in RUN_BACKENDS:
        return ""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return {"local": " (backend local: threads in one process)",
            "processes": f" (backend processes: a worker process a core, {cores} cores)",
            "dask": f" (backend dask: a local cluster, a worker process a core, {cores} cores)"}[RUN_BACKENDS[mode]]


def _version(name: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(name)
    except PackageNotFoundError:
        return "?"


if __name__ == "__main__":
    main()
