"""A rate-limited OpenAI-compatible chat server on loopback, for the pacing tests.

It answers ``POST /v1/chat/completions`` the way a hosted provider with a
requests-per-second limit does: a request that arrives when ``per_second``
requests were already accepted in the last ``window`` seconds gets a 429 at
once (no latency, as providers answer it), with ``Retry-After`` (whole
seconds, rounded up) and ``retry-after-ms`` (as OpenAI sends both) saying when
the window has room again. Accepted requests are answered after ``latency``
seconds. Every arrival is logged (``log``: monotonic time, status, model), and
the peak of accepted requests in flight is kept, so a test measures the limits
at the server, where a provider measures them.

The server runs in a process of its own, so its clock is not held up by the
client's threads: in the test's process, 64 threads building litellm requests
would hold the GIL while a request waited to be stamped, and starts paced
100 ms apart could show as two at once.

``per_second=None`` accepts everything (the test then checks the log against
the limits the client declared). ``usage_tokens`` fixes the tokens each
answer reports, so a test can make the client's estimate wrong on purpose.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
import threading
import time
from collections import deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, NamedTuple, Self

__all__ = ["Arrival", "RateLimitedServer"]


class Arrival(NamedTuple):
    at: float  # time.monotonic() when the request body was read
    status: int
    model: str


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # else the body waits for the client's delayed ACK
    server: _HTTPServer

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
        self.server.owner._serve(self, body)

    def send(self, status: int, payload: dict, headers: dict | None = None) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 256
    owner: _Server


class RateLimitedServer:
    """See the module docstring. Use as a context manager; ``url`` is the ``api_base``.

    ``log``, ``max_in_flight``, ``statuses()`` and ``reset()`` ask the server's process.
    """

    def __init__(self, *, per_second: float | None = None, window: float = 1.0, latency: float = 0.05,
                 usage_tokens: int | None = None):
        self._options = {"per_second": per_second, "window": window, "latency": latency, "usage_tokens": usage_tokens}
        self._process: subprocess.Popen | None = None
        self._final: dict[str, Any] | None = None
        self.url = ""

    def __enter__(self) -> Self:
        here = str(Path(__file__).resolve().parent)
        boot = f"import sys; sys.path.insert(0, {here!r}); from ratelimited_server import _serve_stdio; _serve_stdio()"
        self._process = subprocess.Popen([sys.executable, "-c", boot], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         text=True, bufsize=1)
        self.url = self._ask(json.dumps(self._options))
        return self

    def __exit__(self, *exc: object) -> None:
        # What the server saw stays readable after it stops.
        final = {command: self._ask(command) for command in ("log", "max_in_flight")}
        assert self._process is not None and self._process.stdin is not None
        self._process.stdin.close()
        self._process.wait(timeout=10)
        if self._process.stdout is not None:
            self._process.stdout.close()
        self._final = final

    def _ask(self, command: str) -> Any:
        if self._final is not None:
            return self._final[command]
        assert self._process is not None and self._process.stdin is not None and self._process.stdout is not None
        self._process.stdin.write(command + "\n")
        answer = self._process.stdout.readline()
        if not answer:
            raise RuntimeError(f"the rate-limited server's process ended (exit {self._process.poll()})")
        return json.loads(answer)

    @property
    def log(self) -> list[Arrival]:
        return [Arrival(*a) for a in self._ask("log")]

    @property
    def max_in_flight(self) -> int:
        return self._ask("max_in_flight")

    def statuses(self) -> list[int]:
        return [a.status for a in self.log]

    def reset(self) -> None:
        """Forget the log and the accepted requests (after a warm-up call)."""
        self._ask("reset")

    def hold(self) -> None:
        """Accepted requests wait, unanswered, until :meth:`release`: the test decides when they end."""
        self._ask("hold")

    def release(self) -> None:
        self._ask("release")

    def accepted(self, count: int) -> int:
        """Blocks until the server has accepted ``count`` requests (or 300 s passed); returns how many it has."""
        return self._ask(f"accepted {count}")


def _serve_stdio() -> None:
    """The server's process: options on the first line of stdin, then one command a line until stdin closes."""
    with _Server(**json.loads(sys.stdin.readline())) as server:
        print(json.dumps(server.url), flush=True)
        for line in sys.stdin:
            command = line.strip()
            if command == "log":
                with server._lock:
                    answer: Any = [list(a) for a in server.log]
            elif command == "max_in_flight":
                answer = server.max_in_flight
            elif command in ("hold", "release"):
                (server._open.clear if command == "hold" else server._open.set)()
                answer = None
            elif command.startswith("accepted "):
                answer = server.accepted(int(command.split()[1]))
            elif command == "reset":
                server.reset()
                answer = None
            print(json.dumps(answer), flush=True)


class _Server:
    """The server itself, in the process that serves."""

    def __init__(self, *, per_second: float | None = None, window: float = 1.0, latency: float = 0.05,
                 usage_tokens: int | None = None):
        self.per_second, self.window, self.latency = per_second, window, latency
        self.usage_tokens = usage_tokens
        self.log: list[Arrival] = []
        self.in_flight = self.max_in_flight = 0
        self._accepted: deque[float] = deque()
        self._lock = threading.Lock()
        self._arrived = threading.Condition(self._lock)
        self._open = threading.Event()  # cleared: accepted requests wait for it before they are answered
        self._open.set()
        self._httpd = _HTTPServer(("127.0.0.1", 0), _Handler)
        self._httpd.owner = self
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="ratelimited-server", daemon=True)

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}/v1"

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

    def reset(self) -> None:
        """Forget the log and the accepted requests (after a warm-up call)."""
        with self._lock:
            self.log.clear()
            self._accepted.clear()
            self.max_in_flight = self.in_flight

    def accepted(self, count: int) -> int:
        """Waits until ``count`` requests were accepted (at most 300 s, which only a failing test
        reaches); returns how many were."""
        with self._arrived:
            self._arrived.wait_for(lambda: sum(a.status == 200 for a in self.log) >= count, timeout=300)
            return sum(a.status == 200 for a in self.log)

    def _serve(self, handler: _Handler, body: dict) -> None:
        model = str(body.get("model", ""))
        with self._lock:
            now = time.monotonic()
            while self._accepted and self._accepted[0] <= now - self.window:
                self._accepted.popleft()
            if self.per_second is not None and len(self._accepted) >= self.per_second * self.window:
                wait = self._accepted[0] + self.window - now
                self.log.append(Arrival(now, 429, model))
                limited = True
            else:
                self._accepted.append(now)
                self.log.append(Arrival(now, 200, model))
                self.in_flight += 1
                self.max_in_flight = max(self.max_in_flight, self.in_flight)
                limited = False
                self._arrived.notify_all()
        if limited:
            error = {"error": {"message": "rate limit reached", "type": "requests", "code": "rate_limit_exceeded"}}
            handler.send(429, error, {"Retry-After": str(max(1, math.ceil(wait))),
                                      "retry-after-ms": str(max(1, round(wait * 1000)))})
            return
        try:
            self._open.wait()
            time.sleep(self.latency)
            prompt = sum(len(str(m.get("content", "")).split()) for m in body.get("messages", []))
            total = self.usage_tokens if self.usage_tokens is not None else prompt + 2
            handler.send(200, {
                "id": "chatcmpl-ratelimited", "object": "chat.completion", "created": int(time.time()), "model": model,
                "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok ok"}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": total - 2, "completion_tokens": 2, "total_tokens": total},
            })
        finally:
            with self._lock:
                self.in_flight -= 1
