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

import itertools
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from ratelimited_server import RateLimitedServer

from multiverse import load_spec, plan

REPO = Path(__file__).resolve().parents[1]
RPM = 480  # 8 calls a second: 48 transcripts take at least 5.9 s
JITTER = 0.03  # seconds a request may take from the client's pacer to the server's log


def two_provider_spec(path: Path, fast_url: str, slow_url: str, **rollout) -> Path:
    document = {
        "name": "two-providers",
        "world": "deception",
        "concept": {"name": "conversational misrepresentation",
                    "description": "Claims beyond what the conversation's reference basis warrants."},
        "rubric": str(REPO / "specs" / "deception-rubric.yaml"),
        "design": {
            "dimensions": [{"name": "behavior"},
                           {"name": "interaction_condition", "levels": ["material_reliance", "overclaim_pressure"]}],
            "cases_per_cell": 4,  # 6 behaviours x 2 conditions x 4 = 48 cases
            "generator": {"model": "sim/generator"},
        },
        "systems": [
            # The slow provider first: a first-come executor would park every thread in its lane.
            {"name": "slow", "model": "openai/slow", "api_base": slow_url, "system_prompt": "You are Slow."},
            {"name": "fast", "model": "openai/fast", "api_base": fast_url, "system_prompt": "You are Fast."},
        ],
        "rollout": {"setting": "single_turn", "user": {"model": "sim/user-cooperative"}, "seed": 7, **rollout},
        "judge": {"model": "sim/judge-a"},
        "rate_limits": {"openai/slow": {"rpm": RPM, "max_concurrency": 2}},
    }
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


def test_two_providers_in_a_run_keep_their_limits_and_do_not_wait_for_each_other(tmp_path):
    with RateLimitedServer(latency=0.1) as fast, RateLimitedServer(latency=0.1) as slow:
        spec = two_provider_spec(tmp_path / "two.yaml", fast.url, slow.url)
        env = {k: v for k, v in os.environ.items() if k != "MULTIVERSE_STORE"}
        done = subprocess.run(
            [sys.executable, "-m", "multiverse.cli", "run", str(spec), "--out", str(tmp_path / "run"),
             "--store", str(tmp_path / "store"), "--jobs", "16", "--quiet"],
            check=False, cwd=REPO, env=env, capture_output=True, text=True, timeout=300,
        )
        assert done.returncode == 0, done.stderr[-2000:]
        fast_log, slow_log = list(fast.log), list(slow.log)
        slow_peak = slow.max_in_flight
    assert len(fast_log) == len(slow_log) == 48 and {a.status for a in fast_log + slow_log} == {200}
    # Declared limits, measured where a provider measures them.
    starts = sorted(a.at for a in slow_log)
    # Starts are paced 60/rpm apart at the client; a loaded client delays a request on its way by
    # tens of ms (the first one to a host also waits for litellm to build its HTTP client), so at
    # the server no window holds more than its share of rpm plus that one late request.
    assert all(j - i <= (starts[j] - starts[i]) * RPM / 60 + 1 for i in range(len(starts)) for j in range(i, len(starts)))
    gaps = sorted(b - a for a, b in itertools.pairwise(starts))
    assert gaps[len(gaps) // 2] >= 60 / RPM - JITTER
    assert slow_peak <= 2
    assert starts[-1] - starts[0] >= 47 * 60 / RPM - JITTER
    # The fast provider's calls do not wait for the slow one's: they are all in within
    # the first half of the slow provider's, rather than trickling in beside them.
    fast_end = max(a.at for a in fast_log)
    print(f"fast provider done {fast_end - starts[0]:.2f} s after the slow one's first call; slow took "
          f"{starts[-1] - starts[0]:.2f} s")
    assert fast_end - starts[0] < 0.5 * (starts[-1] - starts[0])


@pytest.mark.parametrize(("setting", "jobs"), [("single_turn", 8), ("single_turn", 2), ("multi_turn", 8)])
def test_plan_estimates_wall_time_from_the_declared_limits(tmp_path, setting, jobs):
    spec_path = two_provider_spec(tmp_path / "two.yaml", "http://127.0.0.1:9/v1", "http://127.0.0.1:10/v1",
                                  setting=setting, max_turns=3)
    result = plan(load_spec(spec_path), store=tmp_path / "store", jobs=jobs)
    # Worked out by hand: 48 cases per system; sim/ generator, user and judge take no time.
    per_system = 48 * (3 if setting == "multi_turn" else 1)
    slow = {"concurrency": per_system * 5.0 / 2, "rpm": per_system / RPM * 60}  # max_concurrency 2
    fast = per_system * 5.0 / jobs
    shared = 2 * per_system * 5.0 / jobs  # every provider's calls share the jobs threads
    wall = result["wall"]
    assert wall["jobs"] == jobs and wall["seconds_per_call"] == 5.0
    assert wall["lanes"]["openai/slow"] == {"seconds": max(slow.values()), "bound": max(slow, key=slow.get)}
    assert wall["lanes"]["openai@127.0.0.1:9"] == {"seconds": fast, "bound": "concurrency"}
    assert wall["seconds"] == max(shared, max(slow.values()), fast)
    assert set(wall["lanes"]) == {"openai/slow", "openai@127.0.0.1:9"}  # no sim/ lane
    env = {k: v for k, v in os.environ.items() if k != "MULTIVERSE_STORE"}
    shown = subprocess.run([sys.executable, "-m", "multiverse.cli", "plan", str(spec_path), "--store",
                            str(tmp_path / "store"), "--jobs", str(jobs)],
                           check=True, cwd=REPO, env=env, capture_output=True, text=True).stdout
    why = "openai/slow's concurrency" if max(slow.values()) >= shared else f"the {jobs} jobs all providers share"
    assert f"wall time at least {round(wall['seconds'] / 60) if wall['seconds'] >= 90 else round(wall['seconds'])}" in shown
    assert why in shown
