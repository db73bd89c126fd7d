"""Pacing wired into a real run: ``multiverse run --jobs 16`` against two providers,
and ``plan``'s wall-time estimate from the spec's ``rate_limits``.

Two loopback OpenAI-compatible servers (tests/ratelimited_server.py) play two
providers under audit; the simulated world plays the case generator, the
user and the judge. One provider has a tight declared limit. Measured at the
servers: the declared limits hold, and the other provider's calls are done
long before the slow one's, instead of queueing behind threads parked in
the slow lane.
"""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
import time
import warnings
from pathlib import Path

import pytest
import yaml
from cli_runner import run_cli
from ratelimited_server import RateLimitedServer

from multiverse import load_spec, plan, run

REPO = Path(__file__).resolve().parents[1]
RPM = 480  # 8 calls a second: 48 transcripts take at least 5.9 s
USED_TOKENS = 100  # tokens each answer of the tokens provider reports
TPM = 60 * 20 * USED_TOKENS  # at most 20 such answers a second


def spec_document(systems: list[dict], rate_limits: dict, *, cases_per_cell: int = 4, **rollout) -> dict:
    """A deception-world spec whose systems under audit are at loopback servers; the
    simulated world plays the case generator, the user and the judge (no time, no lane)."""
    return {
        "name": "paced",
        "world": "deception",
        "concept": {"name": "conversational misrepresentation",
                    "description": "Claims beyond what the conversation's reference basis warrants."},
        "rubric": str(REPO / "specs" / "deception-rubric.yaml"),
        "design": {
            "dimensions": [{"name": "behavior"},
                           {"name": "interaction_condition", "levels": ["material_reliance", "overclaim_pressure"]}],
            "cases_per_cell": cases_per_cell,  # 6 behaviours x 2 conditions x 4 = 48 cases
            "generator": {"model": "sim/generator"},
        },
        "systems": systems,
        "rollout": {"setting": "single_turn", "user": {"model": "sim/user-cooperative"}, "seed": 7, **rollout},
        "judge": {"model": "sim/judge-a"},
        "rate_limits": rate_limits,
    }


def two_provider_spec(path: Path, fast_url: str, slow_url: str, tokens_url: str = "http://127.0.0.1:11/v1",
                      **rollout) -> Path:
    systems = [
        # The slow provider first: a first-come executor would park every thread in its lane.
        {"name": "slow", "model": "openai/slow", "api_base": slow_url, "system_prompt": "You are Slow."},
        {"name": "fast", "model": "openai/fast", "api_base": fast_url, "system_prompt": "You are Fast."},
        # Its estimate (prompt / 4 + max_tokens) is above the tokens its server reports, as a cap makes it.
        {"name": "tokens", "model": "openai/tokens", "api_base": tokens_url, "system_prompt": "You are Tokens.",
         "params": {"max_tokens": USED_TOKENS}},
    ]
    limits = {"openai/slow": {"rpm": RPM, "max_concurrency": 2}, "openai/tokens": {"tpm": TPM}}
    path.write_text(yaml.safe_dump(spec_document(systems, limits, **rollout), sort_keys=False))
    return path


@pytest.mark.slow
def test_providers_in_a_run_keep_their_limits_and_do_not_wait_for_each_other(tmp_path):
    with RateLimitedServer(latency=0.1) as fast, RateLimitedServer(latency=0.1) as slow, \
            RateLimitedServer(latency=0.1, usage_tokens=USED_TOKENS) as tokens:
        spec = two_provider_spec(tmp_path / "two.yaml", fast.url, slow.url, tokens.url)
        env = {k: v for k, v in os.environ.items() if k != "MULTIVERSE_STORE"}
        # The slow provider answers nothing until the test says so: the fast provider's calls do not
        # wait for the slow ones' if all 48 arrive meanwhile. Events, not times: the machine's speed
        # or load changes how long this takes, not what it shows.
        slow.hold()
        # -W error::ResourceWarning: a socket the run left open would print "Exception ignored".
        running = subprocess.Popen(
            [sys.executable, "-W", "error::ResourceWarning", "-m", "multiverse.cli", "run", str(spec),
             "--out", str(tmp_path / "run"), "--store", str(tmp_path / "store"), "--jobs", "16", "--quiet"],
            cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        try:
            fast_while_held = fast.accepted(48)
            slow_while_held = slow.accepted(0)
        finally:
            slow.release()
        _, stderr = running.communicate(timeout=300)
        assert running.returncode == 0, stderr[-2000:]
        fast_log, slow_log, tokens_log = list(fast.log), list(slow.log), list(tokens.log)
        slow_peak = slow.max_in_flight
    assert "ResourceWarning" not in stderr and "Exception ignored" not in stderr, stderr[-2000:]
    assert fast_while_held == 48 and slow_while_held <= 2
    assert len(fast_log) == len(slow_log) == len(tokens_log) == 48
    assert {a.status for a in fast_log + slow_log + tokens_log} == {200}
    # The declared max_concurrency, counted where a provider counts it. (That the pacer spaces starts
    # by rpm and tpm is asserted exactly, on a clock the test controls, in tests/test_pacing.py.)
    assert slow_peak <= 2


@pytest.mark.slow
def test_an_adaptive_run_meets_the_429_and_time_targets(tmp_path):
    """``run(spec, jobs=64)`` with the real client and nothing declared, against a provider
    that answers 429 above 20 requests/s: at most 25% of requests 429, every call answered."""
    # Eight systems at one provider, one lane: a run long enough that its first burst (64 calls
    # at once, before any answer says the limit; 44 of them 429) is not most of what is measured.
    calls = 8 * 48
    with RateLimitedServer(per_second=20, latency=0.05) as server:
        systems = [{"name": f"s{i}", "model": "openai/limited", "api_base": server.url,
                    "system_prompt": f"You are assistant {i}."} for i in range(8)]
        spec = tmp_path / "adaptive.yaml"
        spec.write_text(yaml.safe_dump(spec_document(systems, {}), sort_keys=False))
        # Earlier tests' garbage in this worker process first: what the gc below finds is then the run's own.
        gc.collect()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", ResourceWarning)
            started = time.monotonic()
            results = run(load_spec(spec), store=tmp_path / "store", out=tmp_path / "run", jobs=64, progress=False)
            wall = time.monotonic() - started
            gc.collect()  # a pool the run left open would warn here
        log = list(server.log)
    statuses = [a.status for a in log]
    assert statuses.count(200) == calls and set(statuses) <= {200, 429}
    assert "rollout_failed" not in set(results.verdicts.status)  # every call was answered, some after a 429
    limited = statuses.count(429) / len(statuses)
    span = max(a.at for a in log) - min(a.at for a in log)
    ideal = calls / 20
    print(f"adaptive run: {span:.1f} s at the server for {calls} calls (ideal {ideal:.1f} s, {span / ideal:.2f}x), "
          f"{statuses.count(429)} of {len(statuses)} requests answered 429 ({limited:.0%}); run {wall:.1f} s")
    # A loaded machine sends fewer requests a second, which can only lower this share; the time the
    # lane takes against the ideal is asserted on a clock the test controls, in tests/test_pacing.py.
    assert limited <= 0.25
    # An event loop left unclosed was reported only in CI, after other modules had run in the same worker
    # process (never alone): a library's loop from that process's earlier state, not a pool of this run's.
    leaked = [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)
              and not str(w.message).startswith("unclosed event loop")]
    assert not leaked, leaked[:3]


@pytest.mark.parametrize(("setting", "jobs"), [("single_turn", 8), ("single_turn", 2), ("multi_turn", 8)])
def test_plan_estimates_wall_time_from_the_declared_limits(tmp_path, setting, jobs):
    spec_path = two_provider_spec(tmp_path / "two.yaml", "http://127.0.0.1:9/v1", "http://127.0.0.1:10/v1",
                                  setting=setting, max_turns=3)
    result = plan(load_spec(spec_path), store=tmp_path / "store", jobs=jobs)
    # Worked out by hand: 48 cases per system; sim/ generator, user and judge take no time;
    # plan counts 900 + 250 tokens a rollout call.
    per_system = 48 * (3 if setting == "multi_turn" else 1)
    slow = {"concurrency": per_system * 5.0 / 2, "rpm": per_system / RPM * 60}  # max_concurrency 2
    fast = per_system * 5.0 / jobs
    tokens = {"concurrency": per_system * 5.0 / jobs, "tpm": per_system * 1150 / TPM * 60}
    shared = 3 * per_system * 5.0 / jobs  # every provider's calls share the jobs threads
    wall = result.wall.as_dict()  # the document plan --json prints
    assert wall["jobs"] == jobs and wall["seconds_per_call"] == 5.0
    assert wall["lanes"]["openai/slow"] == {"seconds": max(slow.values()), "bound": max(slow, key=slow.get)}
    assert wall["lanes"]["openai/tokens"] == {"seconds": max(tokens.values()), "bound": max(tokens, key=tokens.get)}
    assert wall["lanes"]["openai@127.0.0.1:9"] == {"seconds": fast, "bound": "concurrency"}
    assert wall["seconds"] == max(shared, max(slow.values()), max(tokens.values()), fast)
    assert set(wall["lanes"]) == {"openai/slow", "openai/tokens", "openai@127.0.0.1:9"}  # no sim/ lane
    # The command in this process (run_cli): what it prints is the test, not the interpreter's start-up.
    command = ["plan", spec_path, "--store", tmp_path / "store", "--jobs", jobs]
    shown = run_cli(command, cwd=REPO).ok()
    lane, bound = max(((name, v["bound"]) for name, v in wall["lanes"].items()),
                      key=lambda item: wall["lanes"][item[0]]["seconds"])
    why = f"{lane}'s {bound}" if wall["lanes"][lane]["seconds"] >= wall["seconds"] else \
        f"the {jobs} jobs all providers share"
    assert f"wall time at least {round(wall['seconds'] / 60) if wall['seconds'] >= 90 else round(wall['seconds'])}" in shown
    assert why in shown
    as_json = json.loads(run_cli([*command, "--json"], cwd=REPO).ok())
    assert as_json["wall"] == wall
