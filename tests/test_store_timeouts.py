"""The store on a PostgreSQL server fails fast and quiet: a server that accepts
and never answers, answers garbage, or is stopped mid-run is one line naming its
address without credentials, within its timeout, exit 2.

Each silence is real: a loopback listener that accepts and says nothing
(``tests/silent_servers.py``) and a PostgreSQL cluster (``tests/pg_server.py``)
stopped with SIGSTOP. Times are measured from the event the test controls (the
stop, the start of the call) and checked against the timeout from below (it
did wait) and against the timeout plus a generous margin from above (it did
not hang), so a loaded machine cannot fail them.
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import pytest
import yaml
from cli_runner import run_cli, start_cli
from conftest import tiny_spec_document
from silent_servers import MARGIN, SECRET, SilentListener, one_line, within

from multiverse.errors import InputError, StoreError, StoreUnavailable
from multiverse.store import Store

psycopg = pytest.importorskip("psycopg", reason="the postgres extra (psycopg) is not installed")



@pytest.mark.parametrize("garbage", [b"", b"HTTP/1.1 200 OK\r\n\r\n", b"\x00\xff" * 4096],
                         ids=["silent", "http", "binary"])
def test_a_listener_that_never_answers_as_postgres_is_one_line_within_the_connect_timeout(garbage):
    with SilentListener(garbage) as listener:
        url = f"postgresql://audit:{SECRET}@{listener.address}/mv?connect_timeout=2&sslmode=disable"
        started = time.monotonic()
        with pytest.raises(StoreUnavailable) as raised:
            Store(url).stats()
        if not garbage:
            within(started, 2)
        assert listener.accepted.is_set()  # it connected: the silence came after the accept
    message = one_line(str(raised.value), f"postgresql://audit:[redacted]@{listener.address}/mv", "could not connect")
    if not garbage:
        assert "2 s" in message and "connect_timeout" in message
    assert isinstance(raised.value, StoreError) and isinstance(raised.value, InputError)


def test_run_and_store_stats_on_a_silent_server_exit_2_with_one_line_before_any_call(tmp_path, write_spec):
    spec = write_spec(tiny_spec_document())
    for argv in (["store", "stats", "--store"], ["run", spec, "--out", tmp_path / "run", "--store"]):
        with SilentListener() as listener:  # one each: a server found silent is not asked again at once
            url = f"postgresql://audit@{listener.address}/mv?password={SECRET}&connect_timeout=2"
            started = time.monotonic()
            result = run_cli([*argv, url], cwd=tmp_path)
            within(started, 2)
            one_line(result.refused(f"{listener.address}/mv?password=[redacted]", "no answer within 2 s"))
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("url", [
    f"postgresql://audit:{SECRET}@127.0.0.1:notaport/mv", f"postgresql://audit:{SECRET}@[::1/mv",
    f"postgresql://audit:{SECRET}@127.0.0.1:1/mv?sslmode=bogus", f"postgresql://audit:{SECRET}@127.0.0.1:1/mv?nosuch=1",
    f"postgresql://audit:{SECRET}@127.0.0.1:1/mv?connect_timeout=soon", f"postgres://audit:{SECRET}@127.0.0.1:99999/mv",
    f"postgresql://audit:{SECRET}@no-such-host.invalid/mv", f"postgresql:///mv?host=/nonexistent&password={SECRET}",
    f"postgresql://audit:{SECRET}@127.0.0.1:1/mv",
])
def test_a_malformed_or_unreachable_url_is_one_line_naming_it_without_the_password(url, tmp_path):
    line = one_line(run_cli(["store", "stats", "--store", url], cwd=tmp_path).refused("--store postgres"))
    assert "[redacted]" in line


def test_the_timeouts_are_settings_that_refuse_what_they_cannot_keep(monkeypatch):
    from multiverse.store import _server as server

    monkeypatch.delenv("PGCONNECT_TIMEOUT", raising=False)
    monkeypatch.delenv(server.ANSWER_VARIABLE, raising=False)
    limits = server.timeouts("postgresql://h/db")
    assert (limits.connect, limits.answer) == (server.CONNECT_SECONDS, server.ANSWER_SECONDS)
    monkeypatch.setenv(server.ANSWER_VARIABLE, "2.5")
    monkeypatch.setenv("PGCONNECT_TIMEOUT", "7")
    limits = server.timeouts("postgresql://h/db")
    assert (limits.connect, limits.answer) == (7, 2.5) and "PGCONNECT_TIMEOUT" in limits.connect_words()
    assert server.timeouts("postgresql://h/db?connect_timeout=4").connect == 4  # the URL's own wins
    for bad in ("0", "-1", "nan", "inf", "soon", "1e9"):
        monkeypatch.setenv(server.ANSWER_VARIABLE, bad)
        with pytest.raises(InputError, match=server.ANSWER_VARIABLE):
            server.timeouts("postgresql://h/db")
    monkeypatch.setenv(server.ANSWER_VARIABLE, "5")
    with pytest.raises(InputError, match="connect_timeout"):
        server.timeouts("postgresql://h/db?connect_timeout=0")  # libpq's "wait for ever"


@pytest.fixture(scope="module")
def pg():
    from pg_server import PostgresServer, binaries

    found = binaries()
    if found is None:
        pytest.skip("PostgreSQL is not installed (no initdb and pg_ctl); CI installs Debian's postgresql package")
    with PostgresServer(found) as server:
        yield server


def _database(pg, url: str) -> str:
    """A new database on the cluster; ``url`` (the cluster's unix-socket or TCP URL) naming it."""
    name = "t" + uuid.uuid4().hex[:12]
    with psycopg.connect(pg.url, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    return url.replace("/postgres", f"/{name}", 1)


@pytest.mark.parametrize("over", ["unix socket", "tcp"])
def test_a_stopped_server_ends_a_statement_within_the_timeout_and_its_threads_do_not_each_wait(pg, over, monkeypatch):
    from multiverse.store import _server as server

    monkeypatch.setenv("MULTIVERSE_STORE_TIMEOUT", "3")
    # The failure is remembered for the timeout's length (3 s here); the test makes it 300 s, so that a
    # loaded machine's pause between two statements cannot outlast it, and counts the statements it ended.
    mark_down, down = server.mark_down, server.down
    answered_at_once: list[str] = []
    monkeypatch.setattr(server, "mark_down", lambda url, message, seconds: mark_down(url, message, 300))
    monkeypatch.setattr(server, "down", lambda url: (lambda m: (m and answered_at_once.append(m)) or m)(down(url)))
    url = _database(pg, pg.url if over == "unix socket" else pg.tcp_url)
    store = Store(url)
    store.put("judgment", "ab12", {"status": "ok", "reason": "", "criteria": []})
    with pg.silenced():
        started = time.monotonic()
        with pytest.raises(StoreUnavailable) as raised:
            store.get("judgment", "ab12")
        within(started, 3)
        # Said once: the next statements (another thread's, the run's teardown) fail at once, not after 3 s more.
        assert answered_at_once == []
        with pytest.raises(StoreUnavailable) as again:
            store.put("judgment", "cd34", {"status": "ok", "reason": "", "criteria": []})
        assert answered_at_once == [str(raised.value)] and str(again.value) == str(raised.value)
        fresh = time.monotonic()
        with pytest.raises(StoreUnavailable) as unconnected:  # a new connection to the stopped server
            Store(url + ("&" if "?" in url else "?") + "connect_timeout=2").stats()
        within(fresh, 2)
    one_line(str(raised.value), "did not answer within 3 s", "MULTIVERSE_STORE_TIMEOUT")
    one_line(str(unconnected.value), "could not connect", "no answer within 2 s")


def test_a_statement_a_live_server_cannot_finish_in_time_is_one_line_and_leaves_no_lock(pg, monkeypatch):
    monkeypatch.setenv("MULTIVERSE_STORE_TIMEOUT", "2")
    url = _database(pg, pg.url)
    store = Store(url)
    store.put("judgment", "ab12", {"status": "ok", "reason": "", "criteria": []})
    with psycopg.connect(url) as other, other.transaction():
        other.execute("LOCK TABLE entry IN ACCESS EXCLUSIVE MODE")  # held until this block ends
        started = time.monotonic()
        with pytest.raises(StoreUnavailable) as raised:
            store.get("judgment", "ab12")
        within(started, 2)
    # The server's statement_timeout or the client's deadline, whichever came first: one line, either way.
    one_line(str(raised.value), url.split("?")[0], "2 s")
    monkeypatch.setenv("MULTIVERSE_STORE_TIMEOUT", "60")
    # Nothing was left locked (asked under another name: a server found silent is not asked again at once).
    assert Store(url + "&application_name=after").get("judgment", "ab12")["status"] == "ok"


def test_a_restarted_server_is_one_line_and_the_next_statement_connects_again(pg):
    url = _database(pg, pg.url)
    store = Store(url)
    store.put("judgment", "ab12", {"status": "ok", "reason": "", "criteria": []})
    with psycopg.connect(pg.url, autocommit=True) as admin:  # ends every other connection, as a restart does
        admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()",
                      (url.split("/")[3].split("?")[0],))
    with pytest.raises(StoreUnavailable) as raised:
        store.get("judgment", "ab12")
    one_line(str(raised.value), "connection to the server failed")
    assert store.get("judgment", "ab12")["status"] == "ok"  # a new connection, without a new Store


@pytest.mark.slow
def test_a_server_stopped_mid_run_ends_the_run_in_one_line_within_the_timeout(pg, tmp_path):
    from audit_server import audit_responder, fake_spec_document
    from fakeserver import FakeServer

    url = _database(pg, pg.tcp_url) + f"?password={SECRET}"
    stopped: list[float] = []
    silence = pg.silenced()

    def answer_then_stop(body: dict) -> object:
        if len(stopped) == 0 and len(fake.requests) >= 3:  # the run is well under way: its store has rows
            silence.__enter__()
            stopped.append(time.monotonic())
        return audit_responder(body)

    try:
        with FakeServer(responder=answer_then_stop) as fake:
            spec = tmp_path / "spec.yaml"
            spec.write_text(yaml.safe_dump(fake_spec_document(fake.url, name="pg-stop"), sort_keys=False))
            child = start_cli(["run", spec, "--store", url, "--out", tmp_path / "run", "--quiet", "--jobs", "2"],
                              cwd=tmp_path, env={"MULTIVERSE_STORE_TIMEOUT": "3"})
            _, stderr = child.communicate(timeout=600)
            ended = time.monotonic()
    finally:
        if stopped:
            silence.__exit__(None, None, None)
    assert stopped, "the run ended before its third request"
    assert 3 - 0.5 <= ended - stopped[0] <= 3 + MARGIN
    assert child.returncode == 2, stderr
    one_line(stderr, "postgresql://multiverse@127.0.0.1", "password=[redacted]", "did not answer within 3 s")
    assert not (tmp_path / "run" / "verdicts.csv").exists()


def test_what_a_message_or_manifest_names_is_the_address_without_any_password():
    label = Store(f"postgresql://audit:{SECRET}@db.example:5432/mv?sslpassword={SECRET}x&sslmode=require").db.label
    assert label == "postgresql://audit:[redacted]@db.example:5432/mv?sslpassword=[redacted]&sslmode=require"


# -- a resolver that never answers -----------------------------------------------------------------

#: Run inside a network and mount namespace of its own (unshare): the only resolver is a loopback UDP
#: socket that takes every question and answers none; prints what the command did, as JSON.
_SILENT_RESOLVER = r"""
import json, socket, subprocess, sys, time
resolver = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
resolver.bind(("127.0.0.1", 53))
started = time.monotonic()
done = subprocess.run([sys.executable, "-m", "multiverse.cli", "store", "stats", "--store", sys.argv[1]],
                      capture_output=True, text=True, timeout=900)
seconds = time.monotonic() - started
resolver.setblocking(False)
try:
    asked = bool(resolver.recv(512))
except BlockingIOError:
    asked = False
print(json.dumps({"code": done.returncode, "stderr": done.stderr, "seconds": seconds, "asked": asked}))
"""


def _namespaces_work() -> bool:
    import shutil
    import subprocess

    if not (shutil.which("unshare") and shutil.which("ip")):
        return False
    probe = subprocess.run(["unshare", "-rmn", "sh", "-c", "ip link set lo up && mount --bind /dev/null /dev/null"],
                           capture_output=True, check=False, timeout=60)
    return probe.returncode == 0


def test_a_host_name_no_resolver_answers_is_one_line_within_the_connect_timeout(tmp_path):
    """Real: glibc's resolver asks a nameserver on loopback that never answers (told to wait 30 s a
    try, 5 tries), in namespaces of the test's own so the machine's resolver is left alone."""
    import json
    import subprocess
    import sys

    if not _namespaces_work():
        pytest.skip("no unprivileged network and mount namespaces here (unshare -rmn)")
    resolv = tmp_path / "resolv.conf"
    resolv.write_text("nameserver 127.0.0.1\noptions timeout:30 attempts:5\n")
    url = f"postgresql://audit:{SECRET}@db.example.internal/mv?connect_timeout=2"
    inside = f"ip link set lo up && mount --bind {resolv} /etc/resolv.conf && exec \"$0\" -c \"$1\" \"$2\""
    done = subprocess.run(["unshare", "-rmn", "sh", "-c", inside, sys.executable, _SILENT_RESOLVER, url],
                          capture_output=True, text=True, check=True, timeout=900, cwd=Path(__file__).parents[1])
    seen = json.loads(done.stdout)
    assert seen["asked"], seen  # the lookup reached the silent resolver
    assert seen["code"] == 2, seen
    line = one_line(seen["stderr"], "postgresql://audit:[redacted]@db.example.internal/mv",
                    "no address for db.example.internal within 2 s", "connect_timeout")
    assert len(seen["stderr"].strip().splitlines()) == 1, line
    assert seen["seconds"] <= 2 + MARGIN, seen


def test_a_lookup_that_never_returns_is_one_line_within_the_connect_timeout(monkeypatch):
    """The same through the lookup's one door (``socket.getaddrinfo``), for machines without namespaces:
    it blocks until the test ends."""
    import socket
    import threading

    asked, ended = threading.Event(), threading.Event()
    real = socket.getaddrinfo

    def never(host, *args, **kwargs):
        if host != "db.example.internal":
            return real(host, *args, **kwargs)
        asked.set()
        ended.wait(2 + MARGIN + 10)  # past what the test allows: a lookup nobody bounds fails it, not hangs it
        raise socket.gaierror(socket.EAI_AGAIN, "ended by the test")

    monkeypatch.setattr(socket, "getaddrinfo", never)
    try:
        started = time.monotonic()
        with pytest.raises(StoreUnavailable) as raised:
            Store(f"postgresql://audit:{SECRET}@db.example.internal:5432,127.0.0.1:1/mv?connect_timeout=2").stats()
        within(started, 2)
    finally:
        ended.set()
    assert asked.is_set()
    one_line(str(raised.value), "no address for db.example.internal within 2 s", "connect_timeout in the store's URL")


def test_looked_up_hosts_reach_libpq_as_addresses_one_attempt_each(monkeypatch):
    from multiverse.store import _server as server

    monkeypatch.delenv("PGHOSTADDR", raising=False)
    answers = {"db": ["10.0.0.1", "10.0.0.2"], "replica": ["fd00::5"]}
    monkeypatch.setattr(server.socket, "getaddrinfo",
                        lambda host, port, **_: [(0, 0, 0, "", (a, int(port))) for a in answers[host]])
    assert server._looked_up({"host": "db,/run/pg,replica,127.0.0.1", "port": "5432,5433,5434,5435"}, 2) == {
        "host": "db,db,/run/pg,replica,127.0.0.1", "hostaddr": "10.0.0.1,10.0.0.2,,fd00::5,",
        "port": "5432,5432,5433,5434,5435"}
    assert server._looked_up({"host": "127.0.0.1"}, 2) == {}  # nothing to look up: psycopg's own params
    assert server._looked_up({"host": "db", "hostaddr": "10.0.0.9"}, 2) == {}
