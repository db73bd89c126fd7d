"""Benchmark: a whole ``multiverse run``'s CPU per request, next to litellm's and httpx's on the same server.

Each mode is a fresh Python process talking to one fake OpenAI-compatible
server on loopback (``tests/audit_server.py``'s responder, in its own process
so that its CPU is not counted), and is measured by the process CPU time
(user + system, from ``wait4``) of everything it did, start-up included:

- ``run``: ``multiverse run SPEC --jobs J`` (the CLI, as a user runs it) of an
  audit grid on the fake server: 2 systems x 4 cells x ``--cases`` cases, two
  turns, two judges. Requests are counted at the server; a second ``run`` of
  the same spec on the same store (``rerun``) must send none;
- ``litellm``: ``litellm.completion`` from J threads, sending the run's own
  requests again (the server keeps every body: the same messages, params,
  seeds, tools and answer schemas);
- ``acompletion``: the same through ``litellm.acompletion`` on one event loop, J at a time;
- ``httpx``: the same bodies POSTed by a bare ``httpx.Client`` from J threads (the transport's floor).

The ratio printed is ``run`` CPU per request over ``litellm``'s: the target
is at most 1.5. Start-up (imports) is in every mode's figure, so the ratio is
of whole processes, the way a user pays for them; each mode is also run
making no request, and the CPU per request after that start-up is printed
too (the run's start-up: its rerun, which imports no litellm, plus litellm's
import).

With ``--pairs N`` the whole measurement is made N times in a row (run, litellm,
run, litellm, ...: alternated pairs, so a drift of a shared machine's speed hits
both), and each ratio is printed as its median and range over the pairs, with
the load average before each pair.

``--backend processes`` (or ``dask``) runs the ``run`` mode on that backend; its CPU is the run's
process and every worker it started, and the backend is printed with every figure.

Run:  python tests/bench/bench_run_cpu.py [--cases 40] [--jobs 16] [--latency 0.05] [--modes run litellm acompletion httpx]
      [--backend local] [--pairs 3] [--json]
Not collected by pytest (no test functions).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
import urllib.request
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))

MODES = ("run", "litellm", "acompletion", "httpx")

# One request like a run's rollout turn: the audit server answers it as the system under audit.
_CALLER = r'''
import json, os, sys, threading, time
mode, url, jobs, bodies = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
# The run's own requests, replayed: the same messages, params, tools and answer schemas.
bodies = json.load(open(bodies)) if bodies != "-" else []
def kwargs(body):
    return {k: v for k, v in body.items() if k not in ("model", "stream")}
if mode == "httpx":
    import httpx
    client = httpx.Client(base_url=url, timeout=60)
    def one(body):
        client.post("/chat/completions", json=body).raise_for_status()
elif mode == "litellm":
    import litellm
    def one(body):
        litellm.completion(model="openai/fake", api_base=url, api_key="sk-local", **kwargs(body))
elif mode == "acompletion":
    import asyncio, litellm
    async def main():
        gate = asyncio.Semaphore(jobs)
        async def one(body):
            async with gate:
                await litellm.acompletion(model="openai/fake", api_base=url, api_key="sk-local", **kwargs(body))
        await asyncio.gather(*(one(b) for b in bodies))
    asyncio.run(main())
    sys.exit(0)
left = iter(bodies)
lock = threading.Lock()
def work():
    while True:
        with lock:
            body = next(left, None)
        if body is None:
            return
        one(body)
threads = [threading.Thread(target=work) for _ in range(jobs)]
for t in threads: t.start()
for t in threads: t.join()
'''


class AuditServer:
    """The audit responder on a fake OpenAI-compatible server, in its own process."""

    def __init__(self, latency: float):
        # Serves until its stdin closes; "dump PATH" writes the request bodies it received so far.
        code = ("import json, sys; sys.path.insert(0, sys.argv[1]);"
                "from audit_server import audit_responder; from fakeserver import FakeServer;"
                "server = FakeServer(responder=audit_responder, latency=float(sys.argv[2])).__enter__();"
                "print(server.url, flush=True)\n"
                "for line in sys.stdin:\n"
                "    open(line.split(None, 1)[1].strip(), 'w').write(json.dumps(server.requests)); print('ok', flush=True)")
        self.proc = subprocess.Popen([sys.executable, "-c", code, str(ROOT / "tests"), str(latency)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.url = self.proc.stdout.readline().strip()

    def total(self) -> int:
        with urllib.request.urlopen(f"{self.url}/stats") as response:
            return int(json.loads(response.read())["counts"].get("total", 0))

    def dump(self, path: Path) -> None:
        """Write every request body the server received so far to ``path`` (a JSON list)."""
        self.proc.stdin.write(f"dump {path}\n")
        self.proc.stdin.flush()
        assert self.proc.stdout.readline().strip() == "ok"

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(timeout=30)


def timed(argv: list[str], env: dict | None = None, cwd: str | None = None) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the process and its children) of one command."""
    wall = time.perf_counter()
    proc = subprocess.Popen(argv, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"{argv[:3]} failed: {proc.stderr.read().decode()[-2000:]}")
    return time.perf_counter() - wall, usage.ru_utime + usage.ru_stime


def measure(modes: list[str], cases: int, jobs: int, latency: float, backend: str = "local") -> dict:
    import yaml
    from audit_server import fake_spec_document

    server = AuditServer(latency)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    rows: dict[str, dict] = {}
    try:
        with tempfile.TemporaryDirectory() as tmp:
            spec = Path(tmp) / "bench.yaml"
            spec.write_text(yaml.safe_dump(fake_spec_document(server.url, name="bench", cases_per_cell=cases),
                                           sort_keys=False))
            requests = None
            if "run" in modes:
                argv = [sys.executable, "-m", "multiverse.cli", "run", str(spec), "--jobs", str(jobs), "--quiet",
                        "--backend", backend, "--store", f"{tmp}/store", "--out"]
                before = server.total()
                wall, cpu = timed([*argv, f"{tmp}/run"], env, tmp)
                requests = server.total() - before
                rows["run"] = _row(requests, wall, cpu)
                before = server.total()
                wall, cpu = timed([*argv, f"{tmp}/rerun"], env, tmp)
                rows["rerun"] = {"requests": server.total() - before, "wall_s": round(wall, 2), "cpu_s": round(cpu, 2)}
                files = sum(1 for p in Path(tmp, "store").rglob("*") if p.is_file())
                rows["run"]["store_files"] = files
            bodies = Path(tmp) / "requests.json"
            server.dump(bodies)
            if "run" not in modes:
                raise SystemExit("--modes needs run: the other modes replay the run's requests")
            for mode in (m for m in modes if m != "run"):
                before = server.total()
                wall, cpu = timed([sys.executable, "-c", _CALLER, mode, server.url, str(jobs), str(bodies)], env)
                rows[mode] = _row(server.total() - before, wall, cpu)
                # The same process making no request: what its imports cost.
                rows[mode]["startup_cpu_s"] = round(timed([sys.executable, "-c", _CALLER, mode, server.url, str(jobs), "-"],
                                                          env)[1], 2)
                rows[mode]["cpu_ms_per_request_after_startup"] = round(
                    (rows[mode]["cpu_s"] - rows[mode]["startup_cpu_s"]) / max(rows[mode]["requests"], 1) * 1000, 2)
    finally:
        server.close()
    out = {"date": datetime.now(timezone.utc).date().isoformat(), "machine": f"{platform.machine()}, {os.cpu_count()} cores",
           "python": platform.python_version(), "cases_per_cell": cases, "jobs": jobs, "latency_s": latency,
           "backend": backend, "modes": rows}
    if "run" in rows and "litellm" in rows:
        out["run_over_litellm"] = round(rows["run"]["cpu_ms_per_request"] / rows["litellm"]["cpu_ms_per_request"], 2)
        # The run's start-up: a run with everything stored (the rerun) plus importing litellm, which it needs
        # once a request is to be sent.
        run = rows["run"]
        run["startup_cpu_s"] = round(rows["rerun"]["cpu_s"] + rows["litellm"]["startup_cpu_s"], 2)
        run["cpu_ms_per_request_after_startup"] = round((run["cpu_s"] - run["startup_cpu_s"]) / run["requests"] * 1000, 2)
        out["run_over_litellm_after_startup"] = round(run["cpu_ms_per_request_after_startup"]
                                                      / rows["litellm"]["cpu_ms_per_request_after_startup"], 2)
    if "acompletion" in rows and "litellm" in rows:
        out["acompletion_over_litellm"] = round(rows["acompletion"]["cpu_ms_per_request"]
                                                / rows["litellm"]["cpu_ms_per_request"], 2)
    return out


def _row(requests: int, wall: float, cpu: float) -> dict:
    return {"requests": requests, "wall_s": round(wall, 2), "cpu_s": round(cpu, 2),
            "cpu_ms_per_request": round(cpu / max(requests, 1) * 1000, 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=40, help="generated cases per cell (about 13 requests each)")
    parser.add_argument("--jobs", type=int, default=16)
    parser.add_argument("--latency", type=float, default=0.05, help="seconds the server takes per request")
    parser.add_argument("--modes", nargs="+", choices=MODES, default=list(MODES))
    parser.add_argument("--backend", choices=("local", "processes", "dask"), default="local",
                        help="the run mode's backend (its CPU counts every worker process it starts)")
    parser.add_argument("--pairs", type=int, default=1, help="measure this many times, alternating the modes")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.pairs > 1:
        paired(args)
        return
    result = measure(args.modes, args.cases, args.jobs, args.latency, args.backend)
    if args.json:
        print(json.dumps(result, indent=2))
        return
    print(f"{result['date']}, {result['machine']}, Python {result['python']}; jobs {args.jobs}, latency {args.latency}s; "
          f"run on backend {args.backend}")
    print(f"{'mode':12} {'requests':>9} {'wall s':>8} {'CPU s':>8} {'CPU ms/request':>15} {'start-up CPU s':>15} "
          f"{'ms/request after':>17}")
    for mode, row in result["modes"].items():
        per = row.get("cpu_ms_per_request", "")
        print(f"{mode:12} {row['requests']:>9} {row['wall_s']:>8} {row['cpu_s']:>8} {per:>15} "
              f"{row.get('startup_cpu_s', ''):>15} {row.get('cpu_ms_per_request_after_startup', ''):>17}")
    for key in ("run_over_litellm", "run_over_litellm_after_startup", "acompletion_over_litellm"):
        if key in result:
            print(f"{key}: {result[key]}")


def paired(args: argparse.Namespace) -> None:
    """``--pairs N``: the measurement N times in a row; each ratio's median and range, with the loads."""
    import statistics

    found: list[dict] = []
    for _ in range(args.pairs):
        load = os.getloadavg()[0]
        found.append({**measure(args.modes, args.cases, args.jobs, args.latency, args.backend),
                      "load_average": round(load, 1)})
    ratios = [k for k in ("run_over_litellm", "run_over_litellm_after_startup", "acompletion_over_litellm")
              if k in found[0]]
    summary = {k: {"median": statistics.median(f[k] for f in found), "min": min(f[k] for f in found),
                   "max": max(f[k] for f in found), "each": [f[k] for f in found]} for k in ratios}
    per_request = {mode: [f["modes"][mode]["cpu_ms_per_request"] for f in found] for mode in found[0]["modes"]
                   if "cpu_ms_per_request" in found[0]["modes"][mode]}
    document = {"date": found[0]["date"], "machine": found[0]["machine"], "python": found[0]["python"],
                "cases_per_cell": args.cases, "jobs": args.jobs, "latency_s": args.latency, "backend": args.backend,
                "pairs": args.pairs,
                "load_average": [f["load_average"] for f in found], "requests": found[0]["modes"]["run"]["requests"],
                "cpu_ms_per_request": per_request, **summary}
    if args.json:
        print(json.dumps(document, indent=2))
        return
    print(f"{document['date']}, {document['machine']}, Python {document['python']}; jobs {args.jobs}, latency "
          f"{args.latency}s; run on backend {args.backend}; {args.pairs} alternated pairs of {document['requests']} "
          f"requests; load average "
          f"{document['load_average']}")
    for mode, values in per_request.items():
        print(f"  {mode:12} CPU ms/request: {', '.join(f'{v:g}' for v in values)}")
    for key in ratios:
        row = summary[key]
        print(f"{key}: median {row['median']:g}, range {row['min']:g}-{row['max']:g} ({', '.join(map(str, row['each']))})")


if __name__ == "__main__":
    main()
