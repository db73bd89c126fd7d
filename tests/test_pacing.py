"""Pacing calls per provider (multiverse.model._pacing), measured at a rate-limited server.

Real ``litellm.completion`` calls (no retries of its own) go from a pool of 64
threads through a Pacer to tests/ratelimited_server.py on loopback; the server
logs when each request arrived and how it was answered.
"""

from __future__ import annotations

import itertools
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from ratelimited_server import RateLimitedServer

from multiverse.core import _interrupt as interrupt
from multiverse.core._config import RateLimit
from multiverse.core._interrupt import RunInterrupted
from multiverse.errors import InputError
from multiverse.model._connections import Connections
from multiverse.model._failures import retry_after as _retry_after
from multiverse.model._pacing import Limit, Pacer, estimate_wall_seconds, lane_of
from multiverse.model._providers import load_litellm as _litellm

MESSAGES = [{"role": "user", "content": "Is the cited source real?"}]
JITTER = 0.05  # seconds a request may take from the client's start to the server's log (30 ms was seen exceeded at load 12)


#: One connection pool per endpoint, passed to litellm as a run passes it (multiverse.model._connections):
#: threads sharing litellm's own pool race on its sockets ("Bad file descriptor", litellm#19608).
CONNECTIONS = Connections(jobs=64)


def call(pacer: Pacer, model: str, url: str, tokens: int = 0) -> int:
    """One completion through the pacer, retried on 429 as the run would; returns the attempts."""
    litellm = _litellm()
    attempts = 0
    while True:
        attempts += 1
        with pacer.slot(model, url, tokens) as slot:
            try:
                response = litellm.completion(model=model, api_base=url, api_key="sk-local", messages=MESSAGES,
                                              num_retries=0, max_retries=0, timeout=10,
                                              client=CONNECTIONS.client(url, "sk-local"))
            except litellm.RateLimitError as exc:
                slot.report(429, retry_after=_retry_after(exc))
                continue
            slot.report(200, tokens_used=response.usage.total_tokens)
            return attempts


def warm(*servers: RateLimitedServer) -> None:
    """One call to each server, then a clean log: the first call to a host builds litellm's
    HTTP client (tens of ms), which would show at the server as two starts closer than paced."""
    for server in servers:
        _litellm().completion(model="openai/warm", api_base=server.url, api_key="sk-local", messages=MESSAGES,
                              num_retries=0, max_retries=0, timeout=10, client=CONNECTIONS.client(server.url, "sk-local"))
        server.reset()


def run_all(jobs: list[tuple], threads: int = 64) -> dict[int, float]:
    """Runs (pacer, model, url, tokens) calls from a pool; returns each call's end time by index."""
    done: dict[int, float] = {}

    def one(i: int) -> None:
        call(*jobs[i])
        done[i] = time.monotonic()

    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(one, range(len(jobs))))
    return done


def assert_spaced(times: list[float], spacing: float) -> None:
    """No span of the starts holds more than the limit allows, plus one request.

    The pacer spaces starts ``spacing`` apart at the client; on the way to the server a
    request may be held up (64 threads share the client's GIL; a tpm call goes at its
    estimate until its answer corrects it), so two starts can arrive closer than paced.
    A provider counts requests in a window: any k+1 starts span at least (k - 1) * spacing,
    less the time a request may take on its way (``JITTER``).
    """
    times = sorted(times)
    for i in range(len(times)):
        for j in range(i + 1, len(times)):
            assert j - i <= (times[j] - times[i] + JITTER) / spacing + 1, (i, j, times[j] - times[i])


@pytest.fixture(scope="module", autouse=True)
def _warm_litellm():
    _litellm()  # the import takes seconds: not part of any measured run


# -- declared limits ---------------------------------------------------------------------


def test_declared_rpm_and_concurrency_never_exceeded_at_the_server():
    with RateLimitedServer(latency=0.15) as server:
        warm(server)
        pacer = Pacer({"openai/": {"rpm": 600, "max_concurrency": 2}}, default_concurrency=64)
        started = time.monotonic()
        run_all([(pacer, "openai/fake", server.url, 0)] * 30)
        seconds = time.monotonic() - started
    times = [a.at for a in server.log]
    assert len(times) == 30 and set(server.statuses()) == {200}
    assert server.max_in_flight <= 2
    assert_spaced(times, 60 / 600)
    # 2 in flight x 150 ms is 13 calls/s, so the 10/s rate is what binds; the pacer reaches it.
    assert seconds <= 29 * 0.1 + 1.0


def test_declared_tpm_follows_the_tokens_answers_report():
    # The client estimates 25 tokens a call; the answers say 50. 6,000 tpm is 100 tokens/s,
    # so the calls must go one per 0.5 s, not the one per 0.25 s the estimate allows: each
    # answer (20 ms) corrects the pace before the next start.
    with RateLimitedServer(latency=0.02, usage_tokens=50) as server:
        warm(server)
        pacer = Pacer({"openai/": {"tpm": 6000}}, default_concurrency=64)
        run_all([(pacer, "openai/fake", server.url, 25)] * 8)
    times = sorted(a.at for a in server.log)
    assert len(times) == 8
    # The first gap may be the estimate's (a loaded machine can delay the first answer 0.25 s).
    assert_spaced(times[1:], 0.5)
    assert times[-1] - times[0] >= 0.25 + 6 * 0.5 - JITTER


def test_declared_limits_do_not_block_each_other():
    with RateLimitedServer(latency=0.05) as slow, RateLimitedServer(latency=0.05) as fast:
        warm(slow, fast)
        pacer = Pacer({"openai/slow": {"rpm": 30}, "openai/fast": {"rpm": 2400, "max_concurrency": 8}},
                      default_concurrency=64)
        jobs = [(pacer, "openai/slow-model", slow.url, 0)] * 4 + [(pacer, "openai/fast-model", fast.url, 0)] * 60
        started = time.monotonic()
        done = run_all(jobs)
    fast_seconds = max(done[i] for i in range(4, 64)) - started
    slow_seconds = max(done[i] for i in range(4)) - started
    assert fast.max_in_flight <= 8
    assert_spaced([a.at for a in fast.log], 60 / 2400)
    assert_spaced([a.at for a in slow.log], 2.0)
    assert slow_seconds >= 6 - JITTER
    # 40 calls/s: 1.5 s, plus slack for a loaded machine's CPU; waiting on the slow lane would take 6 s.
    assert fast_seconds <= 59 / 40 + 2.0


# -- unknown limits: AIMD ----------------------------------------------------------------


def test_adaptive_lane_meets_the_429_and_time_targets():
    # A provider that allows 20 requests/s, 64 jobs, nothing declared. Ideal: calls / 20 s.
    calls = 400  # enough that the first burst (64 in flight against 20/s) does not decide the share alone
    with RateLimitedServer(per_second=20, latency=0.05) as server:
        warm(server)
        pacer = Pacer({}, default_concurrency=64)
        started = time.monotonic()
        run_all([(pacer, "openai/fake", server.url, 0)] * calls)
        seconds = time.monotonic() - started
    log = server.log
    statuses = [a.status for a in log]
    assert statuses.count(200) == calls
    limited = statuses.count(429) / len(statuses)
    ideal = calls / 20
    quiet = max((b.at - a.at, a.at - log[0].at) for a, b in itertools.pairwise(log))
    print(f"adaptive: {seconds:.1f} s for {calls} calls (ideal {ideal:.1f} s, {seconds / ideal:.2f}x), "
          f"{statuses.count(429)} of {len(statuses)} requests answered 429 ({limited:.0%}); longest quiet at the server "
          f"{quiet[0]:.2f} s, {quiet[1]:.1f} s in; {pacer.snapshot()}")
    assert limited <= 0.25
    assert seconds <= 1.6 * ideal
    lane = pacer.snapshot()[pacer.lane("openai/fake", server.url)]
    assert lane["congestion_events"] >= 1 and lane["rpm"] >= 0.5 * 20 * 60  # cut, and recovered


def test_a_rate_limited_provider_does_not_stall_another():
    with RateLimitedServer(per_second=4, latency=0.05) as strict, RateLimitedServer(latency=0.05) as open_:
        warm(strict, open_)
        # The open provider's 100 calls alone, then beside 16 calls to a provider that
        # allows 4 requests/s (about 4 s of 429s and pauses): they must take about as long.
        started = time.monotonic()
        run_all([(Pacer({}, default_concurrency=64), "openai/b", open_.url, 0)] * 100)
        alone = time.monotonic() - started
        pacer = Pacer({}, default_concurrency=64)
        jobs = [(pacer, "openai/a", strict.url, 0)] * 16 + [(pacer, "openai/b", open_.url, 0)] * 100
        started = time.monotonic()
        done = run_all(jobs)
    strict_seconds = max(done[i] for i in range(16)) - started
    open_seconds = max(done[i] for i in range(16, 116)) - started
    assert set(open_.statuses()) == {200}
    assert 429 in strict.statuses()  # the strict lane was paced by its 429s...
    assert strict_seconds >= 16 / 4 - 1.5
    # ...while the other lane's calls went as fast as alone (the strict lane's own
    # 16 calls share the process's CPU, hence the slack) and finished before the strict
    # lane did, so none of them waited behind it. The bound on alone is not compared with
    # the strict lane's time: on a loaded machine 100 calls alone can take longer than
    # the strict lane's pauses, which says nothing about pacing.
    assert open_seconds <= 1.5 * alone + 0.5, (alone, open_seconds, strict_seconds)
    assert open_seconds < strict_seconds, (alone, open_seconds, strict_seconds)


def test_retry_after_pauses_only_that_lane_and_clean_answers_recover():
    pacer = Pacer({}, default_concurrency=8)
    with pacer.slot("openai/x", "http://10.0.0.1:8000/v1") as slot:
        slot.report(429, retry_after=0.6)
    # Not paused: neither waited for the 0.6 s (a thread switch on a loaded machine is not a pause).
    with pacer.slot("anthropic/claude", None) as other:  # another provider
        other.report(200)
    assert other.waited < 0.5
    with pacer.slot("openai/x", "http://10.0.0.2:8000/v1") as other:  # another host
        other.report(200)
    assert other.waited < 0.5
    with pacer.slot("openai/x", "http://10.0.0.1:8000/v1") as slot:
        assert slot.waited >= 0.5
        slot.report(200)
    lane = pacer.snapshot()["openai@10.0.0.1:8000"]
    # One 429 is no evidence of a limit (a pause, no cut), and nothing got through yet: no rate is invented.
    assert lane["congestion_events"] == 0 and lane["rpm"] is None


def test_wait_seconds_tells_without_waiting_which_lane_has_room():
    pacer = Pacer({"openai/": {"rpm": 60, "max_concurrency": 1}}, default_concurrency=4)
    assert pacer.wait_seconds("openai/m") == 0.0  # a lane not used yet
    # Each wait is checked against the time that passed since what set it (not a fixed slack a loaded machine outruns).
    before = time.monotonic()
    held = pacer.slot("openai/m")
    held.__enter__()
    assert pacer.wait_seconds("openai/m") == float("inf")  # its one slot is taken
    held.__exit__(None, None, None)
    wait = pacer.wait_seconds("openai/m")
    assert 1.0 - (time.monotonic() - before) <= wait <= 1.0  # free, but 60 rpm: a second after the last start
    before = time.monotonic()
    with pacer.slot("anthropic/c") as slot:
        slot.report(429, retry_after=5)
    wait = pacer.wait_seconds("anthropic/c")
    assert 5.0 - (time.monotonic() - before) <= wait <= 5.0  # paused
    assert pacer.wait_seconds("gemini/g") == 0.0  # and nobody else


# -- waiting is interrupt-aware -------------------------------------------------------------


@pytest.mark.parametrize("blocked_on", ["pause", "concurrency", "rate"])
def test_waiting_wakes_promptly_on_a_stop(blocked_on, monkeypatch):
    pacer = Pacer({"openai/": {"rpm": 6, "max_concurrency": 1}}, default_concurrency=4)
    held = None
    if blocked_on == "pause":
        with pacer.slot("openai/m") as slot:
            slot.report(429, retry_after=30)
    elif blocked_on == "concurrency":
        held = pacer.slot("openai/m")
        held.__enter__()
    else:
        with pacer.slot("openai/m") as slot:  # the next start is 10 s away
            slot.report(200)
    outcome: list = []

    def wait() -> None:
        try:
            with pacer.slot("openai/m"):
                outcome.append("started")
        except RunInterrupted:
            outcome.append(time.monotonic())

    # The waiter is blocked once it sleeps until its start (a pause, the rate) or asks whether to stop
    # while it waits for a free slot (concurrency).
    waiting = threading.Event()
    check, sleep = interrupt.check, interrupt.sleep

    def seen_checking(reason: str = "") -> None:
        if reason.startswith("while waiting"):
            waiting.set()
        check(reason)

    def seen_sleeping(seconds: float) -> None:
        waiting.set()
        sleep(seconds)

    monkeypatch.setattr(interrupt, "check", seen_checking)
    monkeypatch.setattr(interrupt, "sleep", seen_sleeping)
    with interrupt.stopping_on_signals():
        waiter = threading.Thread(target=wait)
        waiter.start()
        assert waiting.wait(timeout=300)
        asked = time.monotonic()
        interrupt.request()
        waiter.join(300)
    if held is not None:
        held.__exit__(None, None, None)
    assert outcome and outcome[0] != "started"
    # Woken by the stop, not by the end of what it waited for (a 30 s pause, a slot never freed, a start
    # 10 s away): the bound is far below all three and far above a loaded machine's thread switch.
    assert outcome[0] - asked < 5.0
    assert pacer.snapshot()["openai/"]["in_flight"] == 0  # the interrupted wait left no slot behind


# -- lanes, limits, estimates -----------------------------------------------------------------


def test_lanes_longest_declared_prefix_else_provider_and_host():
    prefixes = ["openai/", "openai/gemma", "anthropic/claude-haiku"]
    assert lane_of("openai/gemma-3-1b", None, prefixes) == "openai/gemma"
    assert lane_of("openai/gpt-4o", "http://x:1/v1", prefixes) == "openai/"
    assert lane_of("anthropic/claude-haiku-4-5", None, prefixes) == "anthropic/claude-haiku"
    assert lane_of("anthropic/claude-opus", "https://api.anthropic.com", prefixes) == "anthropic@api.anthropic.com"
    assert lane_of("hosted_vllm/m", "http://user:secret@gpu:8000/v1", []) == "hosted_vllm@gpu:8000"
    assert lane_of("gpt-4o", None, [], provider=lambda m: "openai") == "openai"


@pytest.mark.parametrize("bad", [{"rpm": 0}, {"tpm": -5}, {"rpm": "60"}, {"max_concurrency": 2.5},
                                 {"rpm": True}, {"tpm": float("inf")}, {"rpm": float("nan")}])
def test_bad_limits_name_the_parameter(bad):
    with pytest.raises(InputError) as caught:
        Pacer({"openai/": bad})
    assert caught.value.param == "limits" and "openai/" in str(caught.value)


def test_limits_read_from_the_spec_rate_limit_or_a_mapping():
    declared = RateLimit(rpm=500, max_concurrency=4)  # what spec.rate_limits holds
    assert Limit.of(declared, "p") == Limit.of({"rpm": 500, "max_concurrency": 4}, "p") == Limit(500.0, None, 4)
    assert Pacer({"openai/": declared}).limits["openai/"].max_concurrency == 4


def test_wall_estimate_names_what_binds():
    limits = {"openai/": {"rpm": 600, "tpm": 60_000}, "anthropic/": {"max_concurrency": 2}}
    estimate = estimate_wall_seconds(
        {"openai/gpt-4o": 1200, "openai/gpt-4o-mini": 600, "anthropic/claude": 100, "sim/x": 10},
        {"openai/gpt-4o": 3_000_000, "openai/gpt-4o-mini": 0, "anthropic/claude": 10**6},
        limits, jobs=16, seconds_per_call=2.0)
    assert estimate.lanes["openai/"] == (3_000_000 / 60_000 * 60, "tpm")  # 3000 s > 1800/600 min = 180 s
    assert estimate.lanes["anthropic/"] == (100 * 2.0 / 2, "concurrency")
    assert estimate.lanes["sim"] == (10 * 2.0 / 16, "concurrency")
    assert estimate.seconds == 3000
    no_limits = estimate_wall_seconds({"a/x": 1000, "b/y": 1000}, {}, {}, jobs=10, seconds_per_call=1.0)
    assert no_limits.seconds == 200  # the two lanes share the 10 threads
    with pytest.raises(InputError) as caught:
        estimate_wall_seconds({}, {}, {}, jobs=0)
    assert caught.value.param == "jobs"
