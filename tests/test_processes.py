"""backend="processes": worker processes give a threaded run's tables, pay for each unit
once, keep declared caps across workers, and stop cleanly on Ctrl-C.

The provider is ``tests/fakeserver.py`` on loopback playing every role
(``tests/audit_server.py``), reached through litellm from the worker processes;
every request is counted at the server, where the money would be spent.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from itertools import pairwise
from pathlib import Path

import pandas as pd
import pytest
import yaml
from store_rows import claims, count, delete

from multiverse.core import _interrupt as interrupt
from multiverse.engine._pipeline import plan, run
from multiverse.engine._processes import WorkerLost, WorkerPool, shares, split_limits, worker_count
from multiverse.errors import InputError
from multiverse.spec import load_spec
from multiverse.store._store import Store

sys.path.insert(0, str(Path(__file__).parent))
from audit_server import audit_responder, fake_spec_document
from fakeserver import FakeServer
from test_interrupt import Hold, assert_store_consistent, signal_after, wait_for

JOBS = 2


def _spec(tmp_path: Path, url: str, name: str, **kwargs):
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(fake_spec_document(url, name=name, **kwargs), sort_keys=False))
    return load_spec(path)


def _sorted(frame: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    return frame.sort_values(keys).reset_index(drop=True)


def _children(of: int | None = None) -> set[int]:
    """Live (not reaped) child processes of this process (or of process ``of``)."""
    me, found = str(os.getpid() if of is None else of), set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            if stat.rsplit(")", 1)[1].split()[1] == me:
                found.add(int(entry))
    return found


@pytest.fixture
def no_child_left():
    """Asserts that the test leaves no child process of its own (an earlier test's may still run)."""
    before = _children()
    yield
    assert _children() - before == set()


def _answers(store: Store) -> int:
    return count(store, "request")


@pytest.mark.slow
def test_a_process_run_gives_a_threaded_runs_tables_and_pays_each_unit_once(tmp_path, no_child_left):
    from multiverse.work._units import build_work

    with FakeServer(responder=audit_responder, latency=0.02) as server:
        spec = _spec(tmp_path, server.url, "same", cases_per_cell=2)
        threaded = run(spec, store=tmp_path / "threads", out=tmp_path / "t", jobs=4, progress=False)
        made_threaded = server.counts["total"]
        need = sum(s.calls_to_make for s in plan(spec, store=tmp_path / "procs").stages.values())
        procs = run(spec, store=tmp_path / "procs", out=tmp_path / "p", jobs=4, progress=False, backend="processes")
        made_procs = server.counts["total"] - made_threaded
        assert all(s.calls_to_make == 0 for s in plan(spec, store=tmp_path / "procs").stages.values())

        # The store lost half the rollouts and every judgment: the workers rebuild them from the
        # request answers kept in the store, sending nothing...
        work, store = build_work(spec), Store(tmp_path / "procs")
        redo = list(work.transcripts)[::2]

        def lose_units() -> None:
            for stage, keys in (("transcript", redo), ("judgment", list(work.judge_calls))):
                assert delete(store, stage, keys) == len(keys)

        lose_units()
        before = server.counts["total"]
        rebuilt = run(spec, store=tmp_path / "procs", out=tmp_path / "p1", jobs=4, progress=False, backend="processes")
        assert server.counts["total"] == before
        # ...and when the answers are lost too, only those units are computed again.
        lose_units()
        delete(store, "request")
        need_again = sum(s.calls_to_make for s in plan(spec, store=tmp_path / "procs").stages.values())
        again = run(spec, store=tmp_path / "procs", out=tmp_path / "p2", jobs=4, progress=False, backend="processes")
        # At most the plan's calls (identical requests among them are sent once), each answer stored.
        assert 0 < server.counts["total"] - before == _answers(store) <= need_again
    keys = ["universe_id", "system", "case_id", "replicate"]
    ckeys = ["judgment_key", "sample", "criterion"]
    for result in (procs, rebuilt, again):
        pd.testing.assert_frame_equal(_sorted(threaded.verdicts, keys), _sorted(result.verdicts, keys))
        pd.testing.assert_frame_equal(_sorted(threaded.criteria, ckeys), _sorted(result.criteria, ckeys))
    assert set(procs.verdicts.status) == {"ok"}
    # Each request once: as many as the threaded run made, one stored answer each, at most the plan's calls.
    assert made_procs == made_threaded == _answers(Store(tmp_path / "threads")) <= need
    for stage, store_stage in (("draft", "case"), ("rollout", "transcript"), ("judge", "judgment")):
        computed = procs.manifest.stages[stage].computed
        assert computed == threaded.manifest.stages[stage].computed > 0
        assert sum(1 for _ in Store(tmp_path / "procs").keys(store_stage)) == computed
    assert again.manifest.stages["draft"].computed == 0
    assert again.manifest.stages["rollout"].computed == len(redo)
    assert again.manifest.stages["judge"].computed == len(work.judge_calls)
    assert_store_consistent(tmp_path / "procs")


def test_two_ctrl_c_in_the_python_api_end_every_worker(tmp_path, no_child_left):
    """The CLI tests take the grace path (and test_interrupt's second signal, with both backends);
    here the second signal cuts the Python API's grace short."""
    hold = Hold(after=3)  # the signals come while the run's calls are held at the server
    children = _children()
    with FakeServer(responder=hold) as server:
        spec = _spec(tmp_path, server.url, "api", cases_per_cell=4)
        # What it was: a process started in the background by a shell without job control ignores SIGINT.
        before = signal.getsignal(signal.SIGINT)
        sender = signal_after(hold, 2)
        try:
            with pytest.raises(KeyboardInterrupt):
                run(spec, store=tmp_path / "store", out=tmp_path / "run", jobs=JOBS, progress=False,
                    backend="processes")
            sender.join()
            # Every worker has ended (none is left to send anything) while its calls were still held.
            wait_for(lambda: _children() <= children)
            stopped_at = server.counts["total"]
        finally:
            hold.release()
        assert signal.getsignal(signal.SIGINT) is before  # restored
        assert not interrupt.requested()
        wait_for(lambda: server.in_flight == 0)
        assert server.counts["total"] == stopped_at
        assert_store_consistent(tmp_path / "store")


def test_a_worker_that_dies_stops_the_run_with_one_error_and_no_claims(tmp_path, no_child_left):
    hold = Hold(after=0)  # every call waits at the server until the worker has been killed
    with FakeServer(responder=hold) as server:
        spec = _spec(tmp_path, server.url, "dies", cases_per_cell=3)
        store = Store(tmp_path / "store").open()
        from multiverse.engine._backend_processes import Processes
        from multiverse.engine._executor import Executor
        from multiverse.work._units import build_work

        units = [c for c in build_work(spec).cases.values() if c.given is None]
        with WorkerPool(str(store.root), 4, workers=1) as pool, interrupt.stopping_on_signals():
            executor = Executor(store, Processes(pool), progress=False)
            def kill_one():
                try:
                    wait_for(lambda: server.in_flight >= 2 and pool.pids[0] is not None)
                    os.kill(pool.pids[0], signal.SIGKILL)
                finally:
                    hold.release()

            threading.Thread(target=kill_one, daemon=True).start()
            with pytest.raises(WorkerLost) as lost:
                executor.run("case", units)
            pid = pool.pids[0]
        message = str(lost.value)
        assert f"worker process {pid} (worker 0 of 1) died with " in message, message
        assert "draft unit " in message and "rerun to resume" in message and "\n" not in message
        assert claims(store) == []


def test_a_worker_that_dies_after_its_last_unit_is_noticed_when_the_pool_closes(tmp_path, no_child_left):
    # Nothing is in flight, so no pipe read fails during the run: the missing goodbye gives it away.
    store = Store(tmp_path / "store").open()
    with pytest.raises(WorkerLost, match="died before the run ended") as lost, \
            WorkerPool(str(store.root), 2, workers=2) as pool:
        _wait_for_hellos(pool)
        victim = pool.pids[1]
        os.kill(victim, signal.SIGKILL)
    assert f"worker process {victim} (worker 1 of 2)" in str(lost.value)


def test_a_pool_that_ends_as_told_raises_nothing(tmp_path, no_child_left):
    store = Store(tmp_path / "store").open()
    with WorkerPool(str(store.root), 2, workers=2) as pool:
        _wait_for_hellos(pool)
        assert None not in pool.pids


def _wait_for_hellos(pool: WorkerPool) -> None:
    def said_hello() -> bool:
        assert list(pool.finished(timeout=0.1)) == []  # no unit was handed out
        return None not in pool.pids

    wait_for(said_hello)


def _workers_of(run: subprocess.Popen) -> set[int]:
    """The run's worker processes: the children of its zygote, its one child."""
    return {pid for zygote in _children(run.pid) for pid in _children(zygote)}


@pytest.mark.slow
def test_a_worker_killed_mid_run_stops_the_cli_with_one_line_and_a_rerun_resumes(tmp_path):
    from cli_runner import spawn_cli, start_cli

    # Once a transcript is stored, the run's calls wait at the server until a worker has been killed.
    store = tmp_path / "store"
    stored, release = threading.Event(), threading.Event()

    def hold_after_a_transcript(body: dict) -> object:
        if not release.is_set() and count(store, "transcript") > 0:
            stored.set()
            release.wait(timeout=900)
        return audit_responder(body)

    with FakeServer(responder=hold_after_a_transcript) as server:
        spec = tmp_path / "spec.yaml"
        spec.write_text(yaml.safe_dump(fake_spec_document(server.url, name="killed"), sort_keys=False))
        argv = ["run", spec, "--backend", "processes", "--jobs", 4, "--store", store, "--out", tmp_path / "run"]
        run_process = start_cli(argv)
        try:
            assert stored.wait(timeout=600), "the run stored no transcript"
            wait_for(lambda: len(_workers_of(run_process)) == 2 or run_process.poll() is not None)
            victim = min(_workers_of(run_process))
            os.kill(victim, signal.SIGKILL)
            release.set()
            _out, err = run_process.communicate(timeout=600)
        finally:
            release.set()
            if run_process.poll() is None:
                run_process.kill()
                run_process.communicate()
        assert run_process.returncode == 1, err
        lines = err.replace("\r", "\n").strip().splitlines()
        errors = [line for line in lines if line.startswith("error:")]
        assert len(errors) == 1 and "Traceback" not in err, err
        assert f"worker process {victim} " in errors[0] and "rerun to resume" in errors[0], errors[0]
        assert not (tmp_path / "run" / "manifest.json").exists()  # no run folder for a run that did not finish
        assert claims(store) == []
        # Nothing lost: the rerun finds what the first run stored and computes only the rest.
        rerun = spawn_cli(argv, timeout=600)
    assert rerun.returncode == 0, rerun.stderr
    rollout = next(line for line in rerun.stdout.splitlines() if line.strip().startswith("rollout"))
    stored_count = int(rollout.split(" stored")[0].rsplit(" ", 1)[1])
    assert stored_count > 0, rollout


# -- shares of the run's caps ---------------------------------------------------------


@pytest.mark.parametrize("workers", [1, 2, 3, 7])
def test_split_limits_never_add_up_to_more_than_declared(workers):
    declared = {"openai/": {"rpm": 500, "tpm": 90_000, "max_concurrency": 10},
                "anthropic/claude-haiku": {"rpm": 7},
                "openai/gemma": {"max_concurrency": 7}}
    split = split_limits(declared, workers)
    assert len(split) == workers
    for prefix, limit in declared.items():
        for field in ("rpm", "tpm"):
            parts = [s[prefix][field] for s in split]
            if field not in limit:
                assert parts == [None] * workers
            else:
                assert sum(parts) <= limit[field] * (1 + 1e-12) and min(parts) > 0
        if "max_concurrency" in limit:
            parts = [s[prefix]["max_concurrency"] for s in split]
            assert sum(parts) == limit["max_concurrency"] and max(parts) - min(parts) <= 1


def test_a_pool_never_has_more_workers_than_a_declared_concurrency_or_the_jobs():
    assert worker_count(64, cores=8) == 8
    assert worker_count(3, cores=8) == 3
    assert worker_count(64, {"openai/": {"max_concurrency": 2}, "x/": {"rpm": 5}}, cores=8) == 2
    assert worker_count(64, {"openai/": {"max_concurrency": 1}}, cores=8) == 1
    assert shares(7, 3) == [3, 2, 2] and sum(shares(64, 5)) == 64


def test_a_client_of_ones_own_cannot_go_to_worker_processes(tmp_path):
    with FakeServer(responder=audit_responder) as server:
        spec = _spec(tmp_path, server.url, "own")
        with pytest.raises(InputError) as caught:
            run(spec, store=tmp_path / "store", out=tmp_path / "run", client=object(), backend="processes")
        assert server.counts["total"] == 0
    assert caught.value.param == "client"


@pytest.mark.slow
def test_an_unguarded_script_is_not_run_again_by_the_workers(tmp_path):
    """multiprocessing's spawn re-imports the caller's __main__ in every child; our workers must not."""
    with FakeServer(responder=audit_responder) as server:
        spec = tmp_path / "script.yaml"
        spec.write_text(yaml.safe_dump(fake_spec_document(server.url, name="script"), sort_keys=False))
        marker = tmp_path / "ran"
        script = tmp_path / "audit.py"
        script.write_text(
            "import multiverse\n"
            f"open({str(marker)!r}, 'a').write('x')\n"
            f"multiverse.run(multiverse.load_spec({str(spec)!r}), store={str(tmp_path / 'store')!r}, "
            f"out={str(tmp_path / 'run')!r}, jobs=1, progress=False, backend='processes')\n"
        )
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
        done = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert marker.read_text() == "x"


#: ``sitecustomize`` of the worker processes (put first on their PYTHONPATH; the venv has none of its own)
_LEDGER = '''\
"""Loaded by the worker processes (PYTHONPATH): each pacer lane writes what it enforces and each
start it grants, on its own clock, to a file of its process, for the test to read."""
import json, os
from multiverse.model import _pacing

_init, _original_begin = _pacing._Lane.__init__, _pacing._Lane._begin


def _write(record):
    with open(os.path.join(os.environ["MV_PACER_LEDGER"], f"{os.getpid()}.jsonl"), "a") as out:
        out.write(json.dumps(record) + "\\n")


def __init__(self, *args, **kwargs):
    _init(self, *args, **kwargs)
    _write({"lane": self.name, "rpm": self.ceiling * _pacing.PERIOD, "cap": self.cap})


def _begin(self, slot, now, tokens):
    _original_begin(self, slot, now, tokens)
    _write({"lane": self.name, "start": now})


_pacing._Lane.__init__, _pacing._Lane._begin = __init__, _begin
'''


class _Rounds:
    """The server's responder: holds every answer, so the requests the workers admit at once are
    all in flight together and the server counts them exactly. A round ends (every held answer
    goes) when more than ``cap`` are held, the limit broken, or when none has come for ``quiet``
    seconds, the workers having admitted all they may. ``quiet`` only bounds how long a round waits
    for a late request: a slow machine makes rounds longer, never more requests in flight, so a
    held limit is never seen broken (and the workers' ledgers check the shares whatever the speed)."""

    def __init__(self, cap: int, quiet: float):
        self.cap, self.quiet = cap, quiet
        self._changed = threading.Condition()
        self._held, self._round = 0, 0

    def __call__(self, body: dict) -> object:
        with self._changed:
            self._held += 1
            mine = self._round
            self._changed.notify_all()
            while self._round == mine:
                if self._held > self.cap:
                    self._end_round()
                elif not self._changed.wait(self.quiet) and self._round == mine:
                    self._end_round()
        return audit_responder(body)

    def _end_round(self) -> None:
        self._round += 1
        self._held = 0
        self._changed.notify_all()


@pytest.mark.slow
def test_declared_limits_hold_at_the_server_across_worker_processes(tmp_path, monkeypatch):
    """The declared limits are shared by the worker processes, not each given whole: at the
    server, answers held so that every request the workers admit is in flight at once never
    number more than ``max_concurrency``; in the workers, each process's pacer enforces its share
    (the shares sum to the declared limits) and spaces the starts it grants by its own clock."""
    rpm, concurrency = 600, 3
    ledger = tmp_path / "ledger"
    ledger.mkdir()
    (tmp_path / "hook").mkdir()
    (tmp_path / "hook" / "sitecustomize.py").write_text(_LEDGER)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(tmp_path / "hook"), *sys.path]))
    monkeypatch.setenv("MV_PACER_LEDGER", str(ledger))
    with FakeServer(responder=_Rounds(concurrency, quiet=0.3)) as server:
        document = fake_spec_document(server.url, name="paced", cases_per_cell=2)
        document["rate_limits"] = {"openai/": {"rpm": rpm, "max_concurrency": concurrency}}
        path = tmp_path / "paced.yaml"
        path.write_text(yaml.safe_dump(document, sort_keys=False))
        spec = load_spec(path)
        workers = worker_count(8, spec.rate_limits, cores=2)
        assert workers == 2  # so the limits are really split
        result = run(spec, store=tmp_path / "store", out=tmp_path / "run", jobs=8, progress=False, backend="processes")
        peak, sent = server.max_in_flight, server.counts["total"]
    assert set(result.verdicts.status) == {"ok"}
    assert peak <= concurrency, peak
    records = {int(f.stem): [json.loads(line) for line in f.read_text().splitlines()] for f in ledger.glob("*.jsonl")}
    assert len(records) == workers
    lanes = [r for rs in records.values() for r in rs if "cap" in r]
    assert len(lanes) == workers and {lane["lane"] for lane in lanes} == {"openai/"}  # one lane a process
    assert sum(lane["cap"] for lane in lanes) == concurrency
    assert sum(lane["rpm"] for lane in lanes) == pytest.approx(rpm)
    starts = {pid: [r["start"] for r in rs if "start" in r] for pid, rs in records.items()}
    assert sum(map(len, starts.values())) == sent
    # Each process's starts, on its own clock, are 60 / (rpm / workers) apart or more, so any
    # window holds at most the declared rate's share per process plus one start each.
    for share in starts.values():
        assert all(b - a >= workers * 60 / rpm - 1e-9 for a, b in pairwise(share)), share
    every = sorted(t for share in starts.values() for t in share)
    window = 2.0
    for i, start in enumerate(every):
        assert sum(1 for t in every[i:] if t - start <= window) <= rpm / 60 * window + workers
