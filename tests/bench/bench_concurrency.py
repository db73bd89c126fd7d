"""Benchmark: does the model client turn `jobs` into throughput?

Runs the fault-free fake OpenAI-compatible server (tests/fakeserver.py) in a
separate process, so its CPU does not compete with the client for the GIL,
with a fixed latency per request, and calls it through ModelClient.complete
from a pool of `jobs` threads. For each jobs level it prints the wall time,
the ideal wall time (calls * latency / jobs), the efficiency (ideal / wall),
the client's CPU per call and the peak of requests the server saw in flight.

It also measures the client's overhead per call at zero latency, layer by
layer (raw httpx, the openai SDK, litellm.completion, ModelClient.complete),
to show where the time goes when the speed-up falls short.

Run:  python tests/bench/bench_concurrency.py [--latency 0.1] [--calls 2000] [--jobs 1 8 32 64]
Not collected by pytest (no test functions).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from multiverse.llm import LiteLLMClient as ModelClient  # noqa: E402
from multiverse.llm import ModelConfig  # noqa: E402
from multiverse.providers import load_litellm as _litellm  # noqa: E402

MESSAGES = [{"role": "user", "content": "Is the cited source real? Answer briefly."}]


class ServerProcess:
    """tests/fakeserver.py in its own process; prints its URL on the first line."""

    def __init__(self, latency: float):
        self.proc = subprocess.Popen(
            [sys.executable, str(ROOT / "tests" / "fakeserver.py"), "--latency", str(latency)],
            stdout=subprocess.PIPE,
            text=True,
        )
        self.url = self.proc.stdout.readline().strip()

    def stats(self) -> dict:
        with urllib.request.urlopen(f"{self.url}/stats") as response:
            return json.load(response)

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=10)


def per_call(function, calls: int) -> tuple[float, float]:
    """(wall ms, process CPU ms) per call of ``function``, after a warm-up."""
    for _ in range(20):
        function()
    wall, cpu = time.perf_counter(), time.process_time()
    for _ in range(calls):
        function()
    return (time.perf_counter() - wall) / calls * 1000, (time.process_time() - cpu) / calls * 1000


def overhead(calls: int) -> None:
    server = ServerProcess(latency=0.0)
    try:
        import httpx
        import openai

        litellm = _litellm()
        client = ModelClient(jobs=1)
        config = ModelConfig("openai/fake", {}, api_base=server.url)
        http = httpx.Client()
        sdk = openai.OpenAI(base_url=server.url, api_key="sk-local", max_retries=0)
        layers = [
            ("httpx POST + json", lambda: http.post(f"{server.url}/chat/completions", json={"model": "fake", "messages": MESSAGES}).json()),
            ("openai SDK", lambda: sdk.chat.completions.create(model="fake", messages=MESSAGES)),
            (
                "litellm.completion",
                lambda: litellm.completion(
                    model="openai/fake", api_base=server.url, api_key="sk-local", messages=MESSAGES, num_retries=0, max_retries=0
                ),
            ),
            ("ModelClient.complete", lambda: client.complete(config, MESSAGES)),
        ]
        print(f"\nclient overhead per call at 0 ms latency, serial ({calls} calls each; CPU = whole client process)")
        print(f"  {'layer':24s} {'wall ms':>8s} {'CPU ms':>8s}")
        for name, function in layers:
            wall, cpu = per_call(function, calls)
            print(f"  {name:24s} {wall:8.2f} {cpu:8.2f}")
    finally:
        server.close()


def speedup(latency: float, calls: int, jobs_levels: list[int], serial_calls: int) -> list[dict]:
    server = ServerProcess(latency=latency)
    rows = []
    try:
        for jobs in jobs_levels:
            n = serial_calls if jobs == 1 else calls
            client = ModelClient(jobs=jobs)
            config = ModelConfig("openai/fake", {}, api_base=server.url)
            with ThreadPoolExecutor(jobs) as pool:
                list(pool.map(lambda _, client=client, config=config: client.complete(config, MESSAGES), range(2 * jobs)))  # warm the pool
                server.stats()  # restart the in-flight peak
                wall, cpu = time.perf_counter(), time.process_time()
                list(pool.map(lambda _, client=client, config=config: client.complete(config, MESSAGES), range(n)))
                wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
            ideal = n * latency / jobs
            rows.append(
                {
                    "jobs": jobs,
                    "calls": n,
                    "wall_s": wall,
                    "ideal_s": ideal,
                    "efficiency": ideal / wall,
                    "speedup": (n * latency / wall),
                    "cpu_ms_per_call": cpu / n * 1000,
                    "peak_in_flight": server.stats()["max_in_flight"],
                    "failures": client.stats["failures"],
                }
            )
            row = rows[-1]
            print(
                f"  {jobs:4d} {n:6d} {wall:8.2f} {ideal:8.2f} {row['efficiency']:8.0%} {row['speedup']:8.1f}x"
                f" {row['cpu_ms_per_call']:8.2f} {row['peak_in_flight']:6d}",
                flush=True,
            )
    finally:
        server.close()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description="ModelClient concurrency benchmark against tests/fakeserver.py")
    parser.add_argument("--latency", type=float, default=0.1, help="server latency per request, seconds")
    parser.add_argument("--calls", type=int, default=2000, help="calls per jobs level (jobs > 1)")
    parser.add_argument("--serial-calls", type=int, default=200, help="calls at jobs=1 (fewer: it is slow)")
    parser.add_argument("--jobs", type=int, nargs="+", default=[1, 8, 32, 64])
    parser.add_argument("--overhead-calls", type=int, default=300)
    args = parser.parse_args()

    command = " ".join(["python", "tests/bench/bench_concurrency.py", *sys.argv[1:]])
    print(f"command: {command}")
    print(
        f"python {platform.python_version()}, {os.cpu_count()} CPUs, litellm {_version('litellm')}, "
        f"openai {_version('openai')}, httpx {_version('httpx')}; load average {os.getloadavg()[0]:.2f}"
    )
    started = time.perf_counter()
    _litellm()
    print(f"litellm import: {time.perf_counter() - started:.2f} s")

    overhead(args.overhead_calls)

    print(
        f"\nspeed-up at {args.latency * 1000:.0f} ms latency "
        f"(jobs=1 runs {args.serial_calls} calls, the others {args.calls})"
    )
    print(f"  {'jobs':>4s} {'calls':>6s} {'wall s':>8s} {'ideal s':>8s} {'eff.':>8s} {'speedup':>9s} {'CPU ms':>8s} {'peak':>6s}")
    rows = speedup(args.latency, args.calls, args.jobs, args.serial_calls)
    at_32 = next((row for row in rows if row["jobs"] == 32), None)
    if at_32 is not None:
        verdict = "meets" if at_32["efficiency"] >= 0.8 else "misses"
        print(f"\njobs=32: {at_32['efficiency']:.0%} of the ideal speed-up ({verdict} the 80% target)")
        budget_ms = 1000 / (32 / args.latency)
        print(
            f"  at 32 jobs x {args.latency * 1000:.0f} ms the client must finish a call every {budget_ms:.2f} ms;"
            f" it spends {at_32['cpu_ms_per_call']:.2f} ms of CPU per call under the GIL"
        )


def _version(name: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(name)
    except PackageNotFoundError:
        return "?"


if __name__ == "__main__":
    main()
