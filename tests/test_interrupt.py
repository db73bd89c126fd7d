"""Ctrl-C stops spending: after the first SIGINT/SIGTERM no new call reaches the
provider, calls in flight are kept, claims are released, exit 130 with one line;
a second signal exits at once.

The provider is ``tests/fakeserver.py`` on loopback; every request it receives
is counted there, so "no new call" is measured where the money would be spent.
A signal lands mid-stage because the test holds the run's requests there
(:class:`Hold`) until it has sent it, not because the calls are slow: a loaded
machine cannot end the run first.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml
from store_rows import claims, connect, count, leases, stored_records

from multiverse.core import _interrupt as interrupt
from multiverse.core._interrupt import RunInterrupted
from multiverse.engine._backend_dask import Dask
from multiverse.engine._backend_threads import LocalThreads
from multiverse.engine._compute import attempt as _attempt
from multiverse.engine._executor import Executor
from multiverse.engine._pipeline import plan, run
from multiverse.spec import load_spec
from multiverse.store._store import Store

sys.path.insert(0, str(Path(__file__).parent))
from audit_server import audit_responder, fake_spec_document
from cli_runner import start_cli
from fakeserver import FakeServer

REPO = Path(__file__).resolve().parents[1]
JOBS = 2


def write_spec(path: Path, url: str, **kwargs) -> Path:
    path.write_text(yaml.safe_dump(fake_spec_document(url, **kwargs), sort_keys=False))
    return path


def start_run(tmp_path: Path, spec: Path, *extra: str) -> subprocess.Popen:
    """``multiverse run`` as a process of its own: these tests send it signals."""
    return start_cli(["run", spec, "--out", tmp_path / "run", "--store", tmp_path / "store", "--jobs", JOBS,
                      "--quiet", *extra], cwd=tmp_path)


def wait_for(condition, timeout: float = 300.0) -> None:
    """Until ``condition()`` holds: for a state the test has made certain (held requests), so the
    generous timeout only ends a test whose run broke."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


class Hold:
    """The fake server's responder, holding the run's requests: once ``after`` requests have come,
    every later one waits until :meth:`release` (the test has sent its signal). ``holding`` is set when
    the first is held: the run is then mid-stage, with calls in flight, however slow the machine."""

    def __init__(self, after: int):
        self.after, self._seen = after, 0
        self.holding, self._released = threading.Event(), threading.Event()
        self._lock = threading.Lock()

    def __call__(self, body: dict) -> object:
        with self._lock:
            self._seen += 1
            held = self._seen > self.after
        if held and not self._released.is_set():
            self.holding.set()
            self._released.wait(timeout=900)
        return audit_responder(body)

    def release(self) -> None:
        self._released.set()


def assert_store_consistent(root: Path) -> None:
    """No claim and no lease left behind; every entry is whole JSON of a finished unit."""
    assert claims(root) == []
    assert leases(root) == []
    for (stage, key), record in stored_records(root).items():
        assert record["status"], key
        if stage == "transcript":
            # a unit stopped between two turns is never stored half-done
            assert len(record["turns"]) == 4, key


def descendants(pid: int) -> set[int]:
    """The live processes below process ``pid`` (its children, theirs, ...)."""
    parents: dict[int, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            parents[int(stat.parent.name)] = int(stat.read_text().rpartition(")")[2].split()[1])
        except (OSError, ValueError, IndexError):
            continue
    found, frontier = set(), {pid}
    while frontier:
        frontier = {child for child, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


def one_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1, stderr
    assert "Traceback" not in stderr
    return lines[0]


@pytest.mark.parametrize("backend", ["local", "processes"])
@pytest.mark.slow
def test_first_signal_stops_new_calls_keeps_finished_ones_and_exits_130(tmp_path, backend):
    hold = Hold(after=4)
    with FakeServer(responder=hold) as server:
        spec = write_spec(tmp_path / "stop.yaml", server.url, name="stop", cases_per_cell=6)
        child = start_run(tmp_path, spec, "--backend", backend)
        try:
            assert hold.holding.wait(timeout=300), "the run never sent its fifth request"
            assert child.poll() is None
            started = descendants(child.pid)  # the worker processes (and their zygote) it started
            assert started if backend == "processes" else not started
            child.send_signal(signal.SIGINT)
            at_signal = server.counts["total"]
            # The held calls stay held until the run has exited (it abandons them after its grace). Released
            # as soon as the signal was sent, a worker process could start a unit queued before the run had
            # taken the signal, which on a loaded machine takes seconds: a race, not what the run does once
            # it has taken it (3 calls after the signal at load 20, for at most JOBS).
            _, stderr = child.communicate(timeout=300)
        finally:
            hold.release()
        # Nothing the run started (a worker process, say) outlived it: then nothing more can be sent.
        wait_for(lambda: not any(Path(f"/proc/{pid}").exists() for pid in started))
        wait_for(lambda: server.in_flight == 0)
        made = server.counts["total"]

    assert child.returncode == 130, stderr
    line = one_line(stderr)
    assert line.startswith("interrupted:") and "rerun to resume" in line
    # 24 draft calls were queued; only those already sent (at most JOBS) came after the signal.
    assert made - at_signal <= JOBS, (at_signal, made)
    assert made < 24
    # Every call that was answered before the run ended is stored: nothing paid for is lost.
    assert count(tmp_path / "store", "case") == hold.after
    assert_store_consistent(tmp_path / "store")
    assert not (tmp_path / "run" / "manifest.json").exists()  # no tables of a half run


def test_sigterm_mid_rollout_starts_no_next_turn_and_a_rerun_resumes(tmp_path):
    with FakeServer(responder=audit_responder) as server:
        spec_path = write_spec(tmp_path / "turns.yaml", server.url, name="turns", cases_per_cell=1)
        spec = load_spec(spec_path)
        drafts = plan(spec, store=tmp_path / "store").stages["draft"].calls
        # Past the drafts, two transcripts (4 calls each) in flight.
        hold = Hold(after=drafts + 2)
        server.responder = hold
        child = start_run(tmp_path, spec_path)
        try:
            assert hold.holding.wait(timeout=300), "the run never reached its rollouts"
            child.send_signal(signal.SIGTERM)
            at_signal = server.counts["total"]
        finally:
            hold.release()
        _, stderr = child.communicate(timeout=300)
        after = server.counts["total"] - at_signal
        assert child.returncode == 130, stderr
        one_line(stderr)
        assert after <= JOBS, after
        assert_store_consistent(tmp_path / "store")

        # The rerun finishes, sending only what was never answered: the turns the stopped run paid
        # for are served from the request store (plan counts them, per unit, as calls to make).
        need = sum(s.calls_to_make for s in plan(spec, store=tmp_path / "store").stages.values())
        before = server.counts["total"]
        again = run(spec, store=tmp_path / "store", out=tmp_path / "run", jobs=4, progress=False)
        assert 0 < server.counts["total"] - before <= need - 3
        bodies = [json.dumps(body, sort_keys=True) for body in server.requests]
        assert len(set(bodies)) == len(bodies)  # across both runs, no request was sent twice
    assert again.manifest.statuses["rollout_failed"] == 0 and again.manifest.statuses["judge_failed"] == 0
    assert_store_consistent(tmp_path / "store")


@pytest.mark.parametrize("backend", ["local", "processes"])
def test_second_signal_exits_at_once_without_traceback_or_claims(tmp_path, backend):
    # The calls are held until the test ends: the first signal's grace would wait for them, the second must not.
    hold = Hold(after=0)
    with FakeServer(responder=hold) as server:
        spec = write_spec(tmp_path / "twice.yaml", server.url, name="twice")
        child = start_run(tmp_path, spec, "--backend", backend)
        try:
            wait_for(lambda: server.in_flight >= JOBS or child.poll() is not None)
            assert claims(tmp_path / "store")  # the units in flight are claimed
            # Two signals of two kinds, as both ask for a stop: two SIGINTs sent before the child's main thread
            # runs Python's handler would be taken as one (its flag is set twice), and waiting "a moment" for
            # the first to be taken is a guess a loaded machine outlasts. Python runs SIGINT's handler first.
            child.send_signal(signal.SIGINT)
            child.send_signal(signal.SIGTERM)
            _, stderr = child.communicate(timeout=300)
            in_flight_at_exit = server.in_flight
        finally:
            hold.release()
        made = server.counts["total"]
    assert child.returncode == 130, stderr
    assert "stopped at once" in one_line(stderr)
    # Its calls were still held at the server when it exited: it did not wait for them.
    assert in_flight_at_exit == JOBS
    assert made == JOBS
    assert_store_consistent(tmp_path / "store")


# -- the Python API -------------------------------------------------------------


def signal_after(hold: Hold, times: int = 1) -> threading.Thread:
    """Send this process SIGINT ``times`` times once ``hold`` holds a request, then let the requests go."""

    def send():
        try:
            assert hold.holding.wait(timeout=300), "the run never reached the held request"
            for n in range(times):
                if n:
                    # The next one once the run has taken the first, and while it waits for its calls in
                    # flight (held): a signal after the run's end would be the test's own.
                    wait_for(interrupt.requested)
                os.kill(os.getpid(), signal.SIGINT)
        finally:
            if times == 1:
                hold.release()  # the calls in flight end, and are kept

    thread = threading.Thread(target=send, daemon=True)
    thread.start()
    return thread


@pytest.mark.parametrize("times", [1, 2])
def test_ctrl_c_in_the_python_api_raises_keyboardinterrupt_and_leaves_the_store_consistent(tmp_path, times):
    hold = Hold(after=3)
    with FakeServer(responder=hold) as server:
        spec = load_spec(write_spec(tmp_path / "api.yaml", server.url, name="api", cases_per_cell=4))
        # What it was: a process started in the background by a shell without job control ignores SIGINT.
        before = signal.getsignal(signal.SIGINT)
        sender = signal_after(hold, times)
        try:
            with pytest.raises(KeyboardInterrupt):
                run(spec, store=tmp_path / "store", out=tmp_path / "run", jobs=JOBS, progress=False)
        finally:
            hold.release()  # the second signal abandoned the held calls: they may land now, whole or not at all
        sender.join()
        assert signal.getsignal(signal.SIGINT) is before  # restored
        assert not interrupt.requested()  # the next run starts clean
        wait_for(lambda: server.in_flight == 0 and not claims(tmp_path / "store"))  # abandoned calls have landed
        stopped_at = server.counts["total"]
        assert stopped_at < 16
        assert_store_consistent(tmp_path / "store")
        assert not (tmp_path / "run").exists()

        again = run(spec, store=tmp_path / "store", out=tmp_path / "run", jobs=JOBS, progress=False)
    assert again.manifest.stages["draft"].stored >= 1
    assert set(again.verdicts["status"]) <= {"ok", "excluded"}
    assert_store_consistent(tmp_path / "store")


class SlowClient:
    """A model client whose every call takes ``seconds`` (counted as it starts); ``all_started`` is set
    once ``threads`` calls are under way."""

    def __init__(self, seconds: float, threads: int):
        self.seconds, self.started, self.threads = seconds, 0, threads
        self.all_started = threading.Event()
        self._lock = threading.Lock()

    def complete(self, *args, **kwargs):
        interrupt.check()
        with self._lock:
            self.started += 1
            if self.started >= self.threads:
                self.all_started.set()
        time.sleep(self.seconds)
        raise AssertionError("never answers within the test")


def stop_when(event: threading.Event) -> threading.Thread:
    """Ask for a stop once ``event`` is set (or after a generous wait, when the test has failed anyway)."""
    thread = threading.Thread(target=lambda: (event.wait(timeout=300), interrupt.request()), daemon=True)
    thread.start()
    return thread


def slow_stage(tmp_path: Path, threads: int, slow: float) -> tuple[list, Store, SlowClient, Executor]:
    """A draft stage's units, a store, a client whose calls take ``slow`` seconds, and an executor of
    ``threads`` threads whose grace after a stop is half a second."""
    from multiverse.work._units import build_work

    with FakeServer(responder=audit_responder) as server:
        spec = load_spec(write_spec(tmp_path / "slow.yaml", server.url, name="slow", cases_per_cell=3))
    units = [c for c in build_work(spec).cases.values() if c.given is None]
    store = Store(tmp_path / "store").open()
    client = SlowClient(slow, threads=threads)
    executor = Executor(store, LocalThreads(client, jobs=threads, attempt=_attempt), progress=False, grace=0.5)
    return units, store, client, executor


def test_units_still_running_after_the_grace_are_abandoned_and_unclaimed(tmp_path):
    slow = 300.0
    units, store, client, executor = slow_stage(tmp_path, threads=3, slow=slow)
    stop_when(client.all_started)  # each thread in its call: the stop comes mid-call, however slow the machine
    started = time.monotonic()
    with interrupt.stopping_on_signals(), pytest.raises(RunInterrupted, match="3 unit"):
        executor.run("case", units)
    assert time.monotonic() - started < slow  # the grace ended the wait, not the calls
    assert client.started == 3  # one per thread; the 9 queued units never started
    assert claims(store) == []
    assert not interrupt.requested()


def test_a_signal_another_thread_takes_still_stops_the_run(tmp_path):
    """The kernel may hand the run's signal to any thread (to another one when the main thread already
    has one pending: two signals sent back to back). Its C handler then runs there, and Python's handler
    only once the main thread executes bytecode again: a main thread blocked on its results queue for
    good never stopped (the second-signal CLI test hung, about one run in six)."""
    slow = 120.0
    units, store, client, executor = slow_stage(tmp_path, threads=2, slow=slow)

    def from_another_thread() -> None:  # this thread takes the signal, not the main one
        client.all_started.wait(timeout=300)
        signal.pthread_kill(threading.get_ident(), signal.SIGINT)

    sender = threading.Thread(target=from_another_thread, daemon=True)
    started = time.monotonic()
    with interrupt.stopping_on_signals(), pytest.raises(RunInterrupted, match="2 unit"):
        sender.start()
        executor.run("case", units)
    assert time.monotonic() - started < slow  # the signal ended the stage, not the calls
    assert client.started == 2
    assert claims(store) == []


def test_a_retry_backoff_ends_when_a_stop_is_asked_for(tmp_path):
    from multiverse.model._llm import LiteLLMClient as ModelClient
    from multiverse.spec import ModelConfig

    retry_after = 300
    answered = threading.Event()

    def after_the_429(body: dict) -> str | None:
        answered.set()  # the client is sent the 429 next, and waits Retry-After before another try
        return "rate_limit"

    with FakeServer(fault_for=after_the_429, retry_after=retry_after) as server:
        client = ModelClient(jobs=1, max_retries=5, retry_after_cap=retry_after)
        config = ModelConfig(model="openai/fake", api_base=server.url)
        stop_when(answered)
        started = time.monotonic()
        with interrupt.stopping_on_signals(), pytest.raises(RunInterrupted):
            client.complete(config, [{"role": "user", "content": "hi"}])
        assert time.monotonic() - started < retry_after  # the stop ended the wait the server asked for
        assert server.counts["total"] == 1  # no retry was sent after the stop


# -- Dask: stop submitting, cancel what is queued ------------------------------------------------

DASK_STARTED: list[str] = []
DASK_RUNNING = threading.Event()  # two units are running on the worker's two threads
DASK_RELEASE = threading.Event()  # the test has seen the stop: running units may end


def held_remote(stage, unit, upstream, root, jobs):
    DASK_STARTED.append(unit.key)
    if len(DASK_STARTED) >= 2:
        DASK_RUNNING.set()
    DASK_RELEASE.wait(timeout=300)
    return unit.key, None


def _worker_task_states(dask_worker) -> tuple[str, ...]:
    return tuple(sorted(task.state for task in dask_worker.state.tasks.values()))


def test_dask_stops_submitting_and_cancels_queued_units(tmp_path):
    from types import SimpleNamespace

    distributed = pytest.importorskip("distributed")
    DASK_STARTED.clear()
    DASK_RUNNING.clear()
    DASK_RELEASE.clear()
    units = [SimpleNamespace(key=f"k{i:04d}") for i in range(300)]
    store = Store(tmp_path / "store").open()
    # processes=False: the worker's threads run in this process, where the events are.
    with distributed.LocalCluster(n_workers=1, threads_per_worker=2, processes=False, dashboard_address=None) as cluster, \
            distributed.Client(cluster) as dask_client:
        executor = Executor(store, Dask(dask_client, jobs=2, remote=held_remote), progress=False)
        stop_when(DASK_RUNNING)
        try:
            with interrupt.stopping_on_signals(), pytest.raises(RunInterrupted, match="cancelled"):
                executor.run("case", units)
            # Until the scheduler and the worker hold no task but the two running: every queued one
            # was cancelled and forgotten, so none can start once the running ones end.
            wait_for(lambda: dask_client.run_on_scheduler(lambda dask_scheduler: len(dask_scheduler.tasks)) == 0)
            wait_for(lambda: set(dask_client.run(_worker_task_states).values()) <= {(), ("cancelled", "cancelled")})
        finally:
            DASK_RELEASE.set()  # the two running when the stop came finish
        wait_for(lambda: set(dask_client.run(_worker_task_states).values()) == {()})
        started = len(DASK_STARTED)
    assert started == 2, DASK_STARTED  # the two running at the stop; nothing queued started after it
    assert len(executor.computed["case"]) <= started


def test_a_stop_while_waiting_for_another_runs_claim_ends_the_wait(tmp_path):
    import socket
    from types import SimpleNamespace

    store = Store(tmp_path / "store").open()
    unit = SimpleNamespace(key="ab12cd")
    # A live claim of another process on this host (our parent is alive).
    with connect(store) as conn:
        conn.execute("INSERT INTO claim VALUES ('case', 'ab12cd', ?, ?, ?)", (socket.gethostname(), os.getppid(), time.time()))
    executor = Executor(store, LocalThreads(None, jobs=1, attempt=_attempt), progress=False)
    timer = threading.Timer(0.5, interrupt.request)
    timer.start()
    try:
        # The other run's claim lives as long as our parent: only the stop can end this
        # wait, and the error says that it did.
        with interrupt.stopping_on_signals(), pytest.raises(RunInterrupted, match="waiting"):
            executor.run("case", [unit])
    finally:
        timer.cancel()
    assert len(claims(store)) == 1  # someone else's claim is left alone


@pytest.mark.parametrize(("call_seconds", "grace"), [(0.6, 5.0), (5.0, 0.5)])
def test_a_workers_error_surfaces_after_the_calls_in_flight_end_or_the_grace(tmp_path, call_seconds, grace):
    """A lost store (any error a worker hands up) ends the stage; the threads still in a call
    are not abandoned mid-call at once, which can leave an import lock held when the process
    exits (a CLI that printed its one-line error then hung), but get the grace to end."""
    from multiverse.work._units import build_work

    with FakeServer(responder=audit_responder) as server:
        spec = load_spec(write_spec(tmp_path / "lost.yaml", server.url, name="lost", cases_per_cell=3))
    units = [c for c in build_work(spec).cases.values() if c.given is None][:3]
    first = units[0].key
    in_call, release = threading.Event(), threading.Event()

    def attempt(stage, unit, upstream, client, budget_hit):
        if unit.key == first:
            in_call.wait(300)  # the others are in their call
            raise OSError("the store was deleted")
        in_call.set()
        # A call in flight, which no stop ends (a cancelled thread's next one would not start): it
        # takes call_seconds, or (longer than the grace) until the test has seen the grace end.
        release.wait(call_seconds if call_seconds < grace else 300)
        return None, "failed"

    executor = Executor(Store(tmp_path / "store").open(), LocalThreads(None, jobs=3, attempt=attempt), progress=False,
                        grace=grace)
    started = time.monotonic()
    try:
        with pytest.raises(OSError, match="deleted"):
            executor.run("case", units)
        waited = time.monotonic() - started
        alive = [t for t in executor.backend.threads if t.is_alive()]
    finally:
        release.set()
    if call_seconds < grace:
        assert waited >= call_seconds - 0.1 and not alive  # every call in flight ended first
    else:
        assert grace - 0.1 <= waited < 300 and alive  # the grace bounds the wait: the calls were still held


def test_a_signal_the_process_ignores_stays_ignored_inside_a_run():
    """Started with SIGINT ignored (nohup, a shell's background job), a run neither stops on it nor leaves a
    handler behind; SIGTERM, not ignored, still asks for a stop."""
    code = (
        "import signal\n"
        "signal.signal(signal.SIGINT, signal.SIG_IGN)\n"
        "from multiverse.core import interrupt\n"
        "with interrupt.stopping_on_signals():\n"
        "    assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN\n"
        "    signal.raise_signal(signal.SIGINT)\n"
        "    print('after SIGINT', interrupt.requested())\n"
        "    signal.raise_signal(signal.SIGTERM)\n"
        "    print('after SIGTERM', interrupt.requested())\n"
        "print('restored', signal.getsignal(signal.SIGINT) is signal.SIG_IGN, signal.getsignal(signal.SIGTERM) is signal.SIG_DFL)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["after SIGINT False", "after SIGTERM True", "restored True True"]
