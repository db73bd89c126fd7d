"""A Dask scheduler named by its address fails fast and quiet: one that accepts
and never answers, answers garbage, or is stopped mid-stage is one line naming
its address without credentials, within its timeout, exit 2; so is a malformed
address or one holding a password.

Each silence is real: a loopback listener that accepts and says nothing or
garbage, and a real scheduler process stopped with SIGSTOP
(``tests/silent_servers.py``). Times are measured from the event the test
controls and checked against the timeout plus a generous margin.
"""

from __future__ import annotations

import time

import pytest
import yaml
from cli_runner import run_cli
from conftest import tiny_spec_document
from hypothesis import given, settings
from hypothesis import strategies as st
from silent_servers import MARGIN, SECRET, DaskScheduler, SilentListener, one_line, within

from multiverse.errors import InputError

distributed = pytest.importorskip("distributed")



@pytest.mark.parametrize("garbage", [b"", b"\x00" * 64, b"\xff" * 64, b"SSH-2.0-OpenSSH_9.6\r\n"],
                         ids=["silent", "zeros", "huge frame", "ssh"])
def test_a_listener_that_is_not_a_scheduler_is_one_line_within_the_timeout(garbage):
    from multiverse.engine._backend_dask import Dask

    with SilentListener(garbage) as listener:
        started = time.monotonic()
        with pytest.raises(InputError) as raised:
            with Dask(f"tcp://{listener.address}", jobs=1, timeout=2):
                pass
        within(started, 2, waited=not garbage)
        assert listener.accepted.is_set()
    assert raised.value.param == "scheduler"
    one_line(str(raised.value), f"tcp://{listener.address}")


@pytest.mark.slow
def test_a_stopped_scheduler_is_one_line_within_the_timeout_from_the_library_and_the_command(tmp_path, write_spec):
    from multiverse.engine._backend_dask import Dask

    spec = write_spec(tiny_spec_document())
    with DaskScheduler() as scheduler, scheduler.silenced():
        started = time.monotonic()
        with pytest.raises(InputError) as raised:
            with Dask(scheduler.address, jobs=1, timeout=2):
                pass
        within(started, 2)
        started = time.monotonic()
        result = run_cli(["run", spec, "--backend", "dask", "--scheduler", scheduler.address, "--store",
                          tmp_path / "store", "--out", tmp_path / "run"], cwd=tmp_path,
                         env={"MULTIVERSE_SCHEDULER_TIMEOUT": "2"})
        within(started, 2)
    one_line(str(raised.value), scheduler.address, "within 2 s")
    one_line(result.refused("--scheduler", scheduler.address, "within 2 s", "MULTIVERSE_SCHEDULER_TIMEOUT"))
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("address", [
    f"tcp://audit:{SECRET}@127.0.0.1:8786", f"audit:{SECRET}@10.0.0.5:8786", f"tcp://:{SECRET}@[::1]:8786",
    f"tcp://127.0.0.1:8786?token={SECRET}", "tcp://[::1", "tcp://10.0.0.5", "tcp://10.0.0.5:port", "tcp://10.0.0.5:99999",
    "nosuch://10.0.0.5:8786", ":::", "", "tcp://10.0.0.5:8786\n--store=/etc", "tcp://:8786", ":8786",
    "tcp://a b:8786", "tcp://10.0.0.5:+80", "tcp://[zz::1]:8786", "tcp://300.1.1.1:8786",
])
def test_a_malformed_or_credentialed_address_is_one_line_without_the_password(address, tmp_path, write_spec):
    spec = write_spec(tiny_spec_document())
    result = run_cli(["run", spec, "--backend", "dask", "--scheduler", address, "--store", tmp_path / "store",
                      "--out", tmp_path / "run"], cwd=tmp_path, env={"MULTIVERSE_SCHEDULER_TIMEOUT": "2"})
    line = one_line(result.refused("--scheduler"))
    if SECRET in address:
        assert "[redacted]" in line
    assert not (tmp_path / "run").exists()


HOSTS = st.sampled_from(["10.0.0.5", "scheduler", "dask-0.cluster.local", "[::1]", "[fe80::1]"])
PORTS = st.integers(1, 65535).map(str)


@st.composite
def malformed_addresses(draw: st.DrawFn) -> str:
    """A well-formed tcp:// address with one part broken: no host, a bad host, no port, a bad port."""
    scheme = draw(st.sampled_from(["tcp://", "tls://", ""]))
    host, port = draw(HOSTS), draw(PORTS)
    bad_host = st.one_of(st.just(""), st.text(st.sampled_from(" \t/?#[]@!$%^&*(),;'\"<>\\|`~+=\x00\x7f\u00e9"),
                                             min_size=1, max_size=3).map(lambda junk: host.strip("[]") + junk),
                         st.sampled_from(["-x", "x-", "a..b", ".", "256.1.1.1", "1.2.3.4.5", "[::g]", "[1::2::3]", "a" * 64]))
    bad_port = st.one_of(st.just(""), st.integers(65536, 10**9).map(str), st.just("0"), st.just("-1"),
                         st.text(st.sampled_from(" +-.x\u0661"), min_size=1, max_size=2).map(lambda junk: junk + port))
    broken = draw(st.sampled_from(["host", "port", "no port"]))
    if broken == "host":
        return f"{scheme}{draw(bad_host)}:{port}"
    if broken == "port":
        return f"{scheme}{host}:{draw(bad_port)}"
    return f"{scheme}{host}"


@given(malformed_addresses())
@settings(max_examples=300, deadline=None)
def test_every_malformed_address_is_refused_before_any_connection(address):
    from multiverse.engine._backend_dask import _check_address

    with pytest.raises(InputError) as raised:
        _check_address(address, "the address")
    assert raised.value.param == "scheduler" and "expected an address such as" in str(raised.value)


@given(st.sampled_from(["tcp://", "tls://", ""]), HOSTS, PORTS)
def test_a_well_formed_address_is_not_refused(scheme, host, port):
    from multiverse.engine._backend_dask import _check_address

    _check_address(f"{scheme}{host}:{port}", "the address")


def test_a_bad_scheduler_timeout_setting_isone_line(tmp_path, write_spec):
    spec = write_spec(tiny_spec_document())
    for bad in ("0", "-3", "nan", "later"):
        result = run_cli(["run", spec, "--backend", "dask", "--scheduler", "tcp://127.0.0.1:1", "--store",
                          tmp_path / "store", "--out", tmp_path / "run"], cwd=tmp_path,
                         env={"MULTIVERSE_SCHEDULER_TIMEOUT": bad})
        result.refused("MULTIVERSE_SCHEDULER_TIMEOUT", repr(bad))


@pytest.mark.slow
def test_a_scheduler_stopped_mid_stage_ends_the_run_in_one_line_within_twice_the_timeout(tmp_path, monkeypatch):
    from audit_server import audit_responder, fake_spec_document
    from fakeserver import FakeServer

    from multiverse.engine._pipeline import run
    from multiverse.spec import load_spec

    monkeypatch.setenv("MULTIVERSE_SCHEDULER_TIMEOUT", "3")
    stopped: list[float] = []
    with DaskScheduler() as scheduler:
        scheduler.worker()
        silence = scheduler.silenced()

        def stop_then_answer(body: dict) -> object:
            if not stopped:  # a worker is computing a unit: stop the scheduler under it
                silence.__enter__()
                stopped.append(time.monotonic())
            return audit_responder(body)

        try:
            with FakeServer(responder=stop_then_answer) as fake:
                spec_path = tmp_path / "spec.yaml"
                spec_path.write_text(yaml.safe_dump(fake_spec_document(fake.url, name="dask-stop"), sort_keys=False))
                with pytest.raises(InputError) as raised:
                    run(load_spec(spec_path), store=tmp_path / "store", out=tmp_path / "run", progress=False,
                        backend="dask", scheduler=scheduler.address)
                ended = time.monotonic()
        finally:
            if stopped:
                silence.__exit__(None, None, None)
    assert stopped, "no unit reached the model"
    # No unit finishes for 3 s (counted from before the stop, at most), then the scheduler is asked and
    # says nothing for 3 s more.
    assert 3 - 0.5 <= ended - stopped[0] <= 6 + MARGIN
    one_line(str(raised.value), scheduler.address, "stopped answering", "within 3 s")
    assert not (tmp_path / "run" / "verdicts.csv").exists()
