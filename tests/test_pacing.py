"""Pacing calls per provider (multiverse.model._pacing).

What the pacer promises is checked on a clock the test advances (tests/virtual_clock.py): 64
threads call a fake provider through a Pacer whose time moves only when every thread waits, so
spacing, rates and durations are exact, whatever the machine's speed or load. One test sends real
``litellm.completion`` calls to tests/ratelimited_server.py on loopback, and checks there what
counts, not when: every call answered, never more in flight than declared, starts spaced.
"""

from __future__ import annotations

import itertools
import math
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import pytest
from ratelimited_server import RateLimitedServer
from virtual_clock import FakeProvider, VirtualClock, run_on

from multiverse.core import _interrupt as interrupt
from multiverse.core._config import RateLimit
from multiverse.core._interrupt import RunInterrupted
from multiverse.errors import InputError
from multiverse.model._connections import Connections
from multiverse.model._failures import retry_after as _retry_after
from multiverse.model._pacing import MAX_PAUSE, Limit, Pacer, estimate_wall_seconds, lane_of
from multiverse.model._providers import load_litellm as _litellm

MESSAGES = [{"role": "user", "content": "Is the cited source real?"}]
EPS = 1e-9  # float rounding of the virtual clock's sums

#: One connection pool per endpoint, passed to litellm as a run passes it (multiverse.model._connections):
#: threads sharing litellm's own pool race on its sockets ("Bad file descriptor", litellm#19608).
CONNECTIONS = Connections(jobs=64)


def call(pacer: Pacer, model: str, url: str, starts: list[float]) -> None:
    """One real completion through the pacer, retried on 429 as the run would; the pacer's start
    times go to ``starts``."""
    litellm = _litellm()
    while True:
        with pacer.slot(model, url) as slot:
            try:
                response = litellm.completion(model=model, api_base=url, api_key="sk-local", messages=MESSAGES,
                                              num_retries=0, max_retries=0, timeout=60,
                                              client=CONNECTIONS.client(url, "sk-local"))
            except litellm.RateLimitError as exc:
                slot.report(429, retry_after=_retry_after(exc))
                continue
            starts.append(slot.started)
            slot.report(200, tokens_used=response.usage.total_tokens)
            return


def paced(pacer: Pacer, provider: FakeProvider, model: str, url: str | None = None, tokens: int = 0,
          starts: list[float] | None = None) -> Callable[[], None]:
    """A job: one call to the fake provider through the pacer, retried on 429 as the run would."""
    def job() -> None:
        while True:
            with pacer.slot(model, url, tokens) as slot:
                status, wait, used = provider.answer(model, tokens)
                slot.report(status, retry_after=wait, tokens_used=used)
                if status == 200:
                    if starts is not None:
                        starts.append(slot.started)
                    return
    return job


def spacing(starts: list[float]) -> float:
    times = sorted(starts)
    return min((b - a for a, b in itertools.pairwise(times)), default=math.inf)


@pytest.fixture(scope="module")
def _warm_litellm():
    _litellm()  # the import takes seconds


# -- declared limits ---------------------------------------------------------------------


def test_declared_rpm_and_concurrency_never_exceeded_at_the_server(_warm_litellm):
    starts: list[float] = []
    with RateLimitedServer(latency=0.15) as server:
        pacer = Pacer({"openai/": {"rpm": 600, "max_concurrency": 2}}, default_concurrency=64)
        with ThreadPoolExecutor(64) as pool:
            list(pool.map(lambda _: call(pacer, "openai/fake", server.url, starts), range(30)))
        statuses, peak = server.statuses(), server.max_in_flight
    assert len(statuses) == 30 and set(statuses) == {200}
    assert peak <= 2  # counted at the server
    assert len(starts) == 30 and spacing(starts) >= 60 / 600 - EPS


def test_declared_rpm_is_reached_and_never_exceeded():
    clock = VirtualClock()
    provider = FakeProvider(clock, latency=0.15)
    pacer = Pacer({"openai/": {"rpm": 600, "max_concurrency": 2}}, default_concurrency=64, clock=clock)
    starts: list[float] = []
    run_on(clock, [paced(pacer, provider, "openai/fake", starts=starts)] * 30)
    assert provider.max_in_flight <= 2 and provider.statuses() == [200] * 30
    assert spacing(starts) >= 0.1 - EPS
    # 2 in flight x 150 ms is 13 calls/s, so the 10/s rate is what binds, and the pacer reaches it exactly.
    assert max(starts) - min(starts) <= 29 * 0.1 + EPS


def test_declared_tpm_follows_the_tokens_answers_report():
    # The client estimates 25 tokens a call; the answers say 50. 6,000 tpm is 100 tokens/s,
    # so the calls must go one per 0.5 s, not the one per 0.25 s the estimate allows: each
    # answer (20 ms) corrects the pace before the next start.
    clock = VirtualClock()
    provider = FakeProvider(clock, latency=0.02, usage_tokens=50)
    pacer = Pacer({"openai/": {"tpm": 6000}}, default_concurrency=64, clock=clock)
    starts: list[float] = []
    run_on(clock, [paced(pacer, provider, "openai/fake", tokens=25, starts=starts)] * 8)
    times = sorted(starts)
    assert times[1] - times[0] >= 0.25 - EPS  # the first gap is the estimate's: no answer has corrected it yet
    assert spacing(times[1:]) >= 0.5 - EPS
    assert times[-1] - times[0] <= 0.5 + 6 * 0.5 + EPS  # and no slower than the tokens answered require


def test_declared_limits_do_not_block_each_other():
    clock = VirtualClock()
    slow, fast = FakeProvider(clock, latency=0.05), FakeProvider(clock, latency=0.05)
    pacer = Pacer({"openai/slow": {"rpm": 30}, "openai/fast": {"rpm": 2400, "max_concurrency": 8}},
                  default_concurrency=64, clock=clock)
    slow_starts: list[float] = []
    fast_starts: list[float] = []
    done = run_on(clock, [paced(pacer, slow, "openai/slow-model", starts=slow_starts)] * 4
                  + [paced(pacer, fast, "openai/fast-model", starts=fast_starts)] * 60)
    assert fast.max_in_flight <= 8
    assert spacing(fast_starts) >= 60 / 2400 - EPS and spacing(slow_starts) >= 2.0 - EPS
    assert max(done[i] for i in range(4)) >= 3 * 2.0 + 0.05 - EPS
    # 40 calls/s: the 60th starts 59/40 s in and is answered 50 ms later; waiting on the slow lane would take 6 s.
    assert max(done[i] for i in range(4, 64)) <= 59 / 40 + 0.05 + EPS


# -- unknown limits: AIMD ----------------------------------------------------------------


def test_adaptive_lane_meets_the_429_and_time_targets():
    # A provider that allows 20 requests/s, 64 jobs, nothing declared. Ideal: calls / 20 s.
    calls = 400  # enough that the first burst (64 in flight against 20/s) does not decide the share alone
    clock = VirtualClock()
    provider = FakeProvider(clock, per_second=20, latency=0.05)
    pacer = Pacer({}, default_concurrency=64, clock=clock)
    done = run_on(clock, [paced(pacer, provider, "openai/fake", "http://limited/v1")] * calls)
    seconds = max(done.values())
    statuses = provider.statuses()
    assert statuses.count(200) == calls
    limited = statuses.count(429) / len(statuses)
    ideal = calls / 20
    print(f"adaptive: {seconds:.1f} s for {calls} calls (ideal {ideal:.1f} s, {seconds / ideal:.2f}x), "
          f"{statuses.count(429)} of {len(statuses)} requests answered 429 ({limited:.0%}); {pacer.snapshot()}")
    assert limited <= 0.25
    assert seconds <= 1.6 * ideal
    lane = pacer.snapshot()[pacer.lane("openai/fake", "http://limited/v1")]
    assert lane["congestion_events"] >= 1 and lane["rpm"] >= 0.5 * 20 * 60  # cut, and recovered


def test_a_rate_limited_provider_does_not_stall_another():
    clock = VirtualClock()
    strict, open_ = FakeProvider(clock, per_second=4, latency=0.05), FakeProvider(clock, latency=0.05)
    pacer = Pacer({}, default_concurrency=64, clock=clock)
    # 16 calls to a provider that allows 4 requests/s (about 4 s of 429s and pauses) beside 100 to one without a limit.
    done = run_on(clock, [paced(pacer, strict, "openai/a", "http://strict/v1")] * 16
                  + [paced(pacer, open_, "openai/b", "http://open/v1")] * 100)
    strict_seconds = max(done[i] for i in range(16))
    open_seconds = max(done[i] for i in range(16, 116))
    assert set(open_.statuses()) == {200}
    assert 429 in strict.statuses()  # the strict lane was paced by its 429s...
    assert strict_seconds >= 16 / 4 - 1
    # ...while the other lane's calls went at full concurrency on the threads the strict lane's 16 calls
    # left it (48): three round trips. Had they waited behind the strict lane, they would take seconds.
    assert open_seconds <= math.ceil(100 / 48) * 0.05 + EPS, (open_seconds, strict_seconds)
    other = pacer.snapshot()[pacer.lane("openai/b", "http://open/v1")]
    assert other["congestion_events"] == 0 and other["paused_seconds"] == 0


def test_retry_after_pauses_only_that_lane_and_clean_answers_recover():
    clock = VirtualClock()
    pacer = Pacer({}, default_concurrency=8, clock=clock)
    with clock.alone():
        with pacer.slot("openai/x", "http://10.0.0.1:8000/v1") as slot:
            slot.report(429, retry_after=0.6)
        with pacer.slot("anthropic/claude", None) as other:  # another provider: not paused
            other.report(200)
        assert other.waited == 0
        with pacer.slot("openai/x", "http://10.0.0.2:8000/v1") as other:  # another host: not paused
            other.report(200)
        assert other.waited == 0
        with pacer.slot("openai/x", "http://10.0.0.1:8000/v1") as slot:
            assert slot.waited == pytest.approx(0.6)
            slot.report(200)
    lane = pacer.snapshot()["openai@10.0.0.1:8000"]
    # One 429 is no evidence of a limit (a pause, no cut), and nothing got through yet: no rate is invented.
    assert lane["congestion_events"] == 0 and lane["rpm"] is None


def test_wait_seconds_tells_without_waiting_which_lane_has_room():
    clock = VirtualClock()
    pacer = Pacer({"openai/": {"rpm": 60, "max_concurrency": 1}}, default_concurrency=4, clock=clock)
    assert pacer.wait_seconds("openai/m") == 0.0  # a lane not used yet
    held = pacer.slot("openai/m")
    held.__enter__()
    assert pacer.wait_seconds("openai/m") == float("inf")  # its one slot is taken
    held.__exit__(None, None, None)
    assert pacer.wait_seconds("openai/m") == 1.0  # free, but 60 rpm: a second after the last start
    with pacer.slot("anthropic/c") as slot:
        slot.report(429, retry_after=5)
    assert pacer.wait_seconds("anthropic/c") == 5.0  # paused
    assert pacer.wait_seconds("gemini/g") == 0.0  # and nobody else


# -- waiting is interrupt-aware -------------------------------------------------------------


@pytest.mark.parametrize("blocked_on", ["pause", "concurrency", "rate"])
def test_waiting_wakes_promptly_on_a_stop(blocked_on, monkeypatch):
    # What the waiter waits for never comes within the test: a pause of MAX_PAUSE, a slot never freed,
    # a start 10 minutes away. So a waiter that ends (joined) ended because of the stop.
    pacer = Pacer({"openai/": {"rpm": 0.1, "max_concurrency": 1}}, default_concurrency=4)
    held = None
    if blocked_on == "pause":
        with pacer.slot("openai/m") as slot:
            slot.report(429, retry_after=MAX_PAUSE)
    elif blocked_on == "concurrency":
        held = pacer.slot("openai/m")
        held.__enter__()
    else:
        with pacer.slot("openai/m") as slot:  # the next start is 600 s away
            slot.report(200)
    outcome: list = []

    def wait() -> None:
        try:
            with pacer.slot("openai/m"):
                outcome.append("started")
        except RunInterrupted:
            outcome.append("interrupted")

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
        waiter = threading.Thread(target=wait, daemon=True)
        waiter.start()
        assert waiting.wait(timeout=300)
        interrupt.request()
        waiter.join(300)  # far below what it waited for (600 s, or never), so only the stop ends it
        assert not waiter.is_alive()
    if held is not None:
        held.__exit__(None, None, None)
    assert outcome == ["interrupted"]
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
