"""Stopping a run on Ctrl-C or SIGTERM: no new call starts, nothing finished is lost.

The first SIGINT or SIGTERM sets one process-wide flag. From then on:

- the executor starts no new unit (a rollout, a judge call);
- the model client starts no new request, not even a retry of a failed one,
  and a backoff sleep ends at once (:func:`check`, :func:`sleep`);
- units still in flight get :data:`GRACE` seconds to finish and be stored;
  after that the run releases its claims and raises :class:`RunInterrupted`.

A second signal raises ``KeyboardInterrupt`` at once; the executor still
releases its claims on the way out. The flag is process-wide because a
signal is: every run in the process stops spending. It is cleared when the
outermost :func:`stopping_on_signals` block ends, so a notebook can run again.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

__all__ = ["GRACE", "WAKE", "RunInterrupted", "cancel", "check", "forget", "request", "requested", "signals_held", "sleep",
           "stopping_on_signals", "waking"]

#: seconds the calls in flight get to finish after the first signal
GRACE = 10.0

#: the longest a run's main thread blocks without running Python's signal handlers. A signal's C-level
#: handler may run in any thread: the kernel hands a process's signal to another one when the main thread
#: already has one pending (two sent back to back), or the main thread takes it just before it blocks.
#: Python runs the handler only when the main thread executes bytecode again, so a wait without a timeout
#: can outlast any number of signals (a run that ignored SIGINT then SIGTERM until its calls ended).
WAKE = 1.0

_STOP = threading.Event()
_DEPTH = 0
_LOCK = threading.Lock()
# Worker threads of a run that has ended (interrupted): they stop at their next call even
# after the process-wide flag is cleared for the next run.
_CANCELLED: set[int] = set()
# What to wake when a stop is asked for (a run's main thread blocked on its results queue). A tuple,
# replaced whole, so the signal handler reads it without a lock.
_WAKE: tuple[Any, ...] = ()


class RunInterrupted(KeyboardInterrupt):
    """A run stopped on a signal. What finished is stored; rerunning resumes.

    A ``KeyboardInterrupt``, so no ``except Exception`` on the way records it
    as a failed unit.
    """


def requested() -> bool:
    """Whether a stop was asked for (process-wide, or for this thread's run)."""
    return _STOP.is_set() or threading.get_ident() in _CANCELLED


def cancel(threads: Iterable[threading.Thread]) -> None:
    """Stop these worker threads at their next call, whatever happens to the flag."""
    with _LOCK:
        _CANCELLED.update(t.ident for t in threads if t.ident is not None and t.is_alive())


def forget(thread: threading.Thread) -> None:
    """A worker thread is ending: its id may be reused."""
    with _LOCK:
        _CANCELLED.discard(thread.ident)


def request() -> None:
    """Ask every run in this process to stop scheduling calls."""
    _STOP.set()
    _wake()


@contextmanager
def waking(wake: Callable[[], object]) -> Iterator[None]:
    """Within the block, a stop request also calls ``wake()`` (from the signal handler, so it must be
    reentrant: ``queue.SimpleQueue.put`` is), so a thread blocked waiting for results need not poll."""
    global _WAKE
    with _LOCK:
        _WAKE = (*_WAKE, wake)
    try:
        if requested():
            wake()
        yield
    finally:
        with _LOCK:
            left = list(_WAKE)
            left.remove(wake)
            _WAKE = tuple(left)


def _wake() -> None:
    for wake in _WAKE:
        wake()


def check(where: str = "before the next call") -> None:
    """Raise :class:`RunInterrupted` if a stop was asked for (call before starting any work)."""
    if requested():
        raise RunInterrupted(f"stopped {where}")


def sleep(seconds: float) -> None:
    """Sleep, but raise :class:`RunInterrupted` as soon as a stop is asked for."""
    deadline = time.monotonic() + max(0.0, seconds)
    while not requested():
        left = deadline - time.monotonic()
        if left <= 0:
            return
        _STOP.wait(min(left, 0.5))
    raise RunInterrupted("stopped while waiting (for a retry or for another run's unit)")


@contextmanager
def stopping_on_signals() -> Iterator[None]:
    """Within the block, the first SIGINT/SIGTERM asks for a stop and the second
    raises ``KeyboardInterrupt``. Signal handlers are only installed from the
    main thread; elsewhere the block just scopes the flag. A signal the process
    ignores (``nohup``, a shell's background job) stays ignored: whoever started
    it chose that."""
    global _DEPTH
    installed = {}
    with _LOCK:
        _DEPTH += 1
        outermost = _DEPTH == 1
    if outermost and threading.current_thread() is threading.main_thread():
        for signum in (signal.SIGINT, signal.SIGTERM):
            if signal.getsignal(signum) is signal.SIG_IGN:
                continue
            try:
                installed[signum] = signal.signal(signum, _on_signal)
            except (ValueError, OSError):  # not allowed here (embedded interpreters)
                pass
    try:
        yield
    finally:
        for signum, previous in installed.items():
            if previous is not None:  # None: a handler installed from C, which cannot be restored
                signal.signal(signum, previous)
        with _LOCK:
            _DEPTH -= 1
            if _DEPTH == 0:
                _STOP.clear()


@contextmanager
def signals_held() -> Iterator[None]:
    """Within the block, SIGINT and SIGTERM wait (main thread): a second Ctrl-C cannot
    cut short the release of a run's claims."""
    blocked = threading.current_thread() is threading.main_thread() and hasattr(signal, "pthread_sigmask")
    if blocked:
        previous = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
    try:
        yield
    finally:
        if blocked:
            signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def _on_signal(signum: int, frame: FrameType | None) -> None:
    if _STOP.is_set():
        raise KeyboardInterrupt
    _STOP.set()
    _wake()
