"""A fault-injecting OpenAI-compatible chat server on loopback, for tests only.

It plays the provider for the model client's reliability tests and benchmarks:
``openai/<anything>`` with ``api_base=server.url`` reaches it through litellm
exactly as a real OpenAI-compatible server (llama.cpp, vLLM) would be reached.

Each request gets one outcome. Scripted outcomes (``script=[...]``) are used
first, in arrival order; after that an outcome is drawn from ``faults``
(probability per kind) with a seeded RNG, so a run's sequence of outcomes is
reproducible. Outcomes:

=============  =================================================================
``ok``         200 with a normal answer (a minimal instance of the requested
               JSON schema, a tool call when ``call_tools``, else echo text)
``rate_limit`` 429 with a ``Retry-After: <retry_after>`` header
``server_error`` 500
``unavailable`` 503
``reset``      the connection is closed without any response
``slow``       sleeps ``slow_seconds`` (longer than the client's timeout), then answers
``truncated``  200 whose body is cut-off JSON
``off_schema`` 200, valid JSON envelope, content that ignores the schema
``prose``      200, valid JSON envelope, content that is not JSON at all
``bad_request`` 400 (not retryable)
``auth``       401 (not retryable)
=============  =================================================================

``fault_for(request_json)`` can force an outcome for particular requests by their
content (a persistent outage of one request, say), before any draw. With
``content_faults_need_schema`` the content faults (``off_schema``, ``prose``) only
hit requests that ask for JSON (a ``response_format``): a free-text answer that
"ignores the schema" is just another answer, which no client could tell apart.
With ``echo_key`` a 401 quotes the key it was sent, as some providers do.
With ``echo_headers`` every answer quotes every request header it received
(``Authorization`` included): in the text of ``ok`` answers (and in every
string of an answer that is JSON, so a judge's rationale or a drafted case
carries it too), in tool-call arguments, in the message of every error, and in an ``X-Echo-Headers``
response header, the way a careless proxy or a prompt-injected model would.

A responder may return ``bytes``: they become the answer's content verbatim,
inside the JSON string, so a test can send what no JSON encoder would (invalid
UTF-8, a lone surrogate escape, NUL bytes, 10 MB).

Usage::

    with FakeServer(latency=0.1, faults={"rate_limit": 0.1}, seed=1) as server:
        litellm.completion(model="openai/fake", api_base=server.url, api_key="sk-local", ...)
        server.counts["rate_limit"]

Run as a script (``python tests/fakeserver.py --latency 0.1``) it serves in the
foreground and prints its URL, so a benchmark can keep it out of the client's
process (and out of the client's GIL).
"""

from __future__ import annotations

import argparse
import json
import random
import socket
import struct
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["OUTCOMES", "FakeServer", "schema_instance"]

OUTCOMES = (
    "ok",
    "rate_limit",
    "server_error",
    "unavailable",
    "reset",
    "slow",
    "truncated",
    "off_schema",
    "prose",
    "bad_request",
    "auth",
)

Responder = Callable[[dict], "str | dict | bytes"]
_RAW = "\u0000raw-content\u0000"  # stands for a bytes answer until the body is encoded


def schema_instance(schema: Mapping[str, Any], root: Mapping[str, Any] | None = None) -> Any:
    """A small valid instance of a JSON schema (object/array/string/boolean/
    integer/number/null, enum, const, anyOf/oneOf, type unions, local $ref)."""
    root = schema if root is None else root
    if "$ref" in schema:
        target: Any = root
        for part in schema["$ref"].lstrip("#/").split("/"):
            target = target[part]
        return schema_instance(target, root)
    if "const" in schema:
        return schema["const"]
    if "enum" in schema:
        return schema["enum"][0]
    for key in ("anyOf", "oneOf"):
        if key in schema:
            # Prefer a non-null branch: a judge schema "boolean|null" should
            # produce a boolean, which exercises more of the caller.
            branches = [b for b in schema[key] if b.get("type") != "null"] or schema[key]
            return schema_instance(branches[0], root)
    if "allOf" in schema:
        merged: dict = {}
        for branch in schema["allOf"]:
            merged.update(branch)
        return schema_instance(merged, root)
    kind = schema.get("type", "object" if "properties" in schema else "string")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind == "object":
        properties = schema.get("properties", {})
        return {name: schema_instance(sub, root) for name, sub in properties.items()}
    if kind == "array":
        count = max(int(schema.get("minItems", 1)), 1)
        count = min(count, int(schema.get("maxItems", count)))
        return [schema_instance(schema.get("items", {}), root) for _ in range(count)]
    if kind == "string":
        return "x" * int(schema.get("minLength", 0)) or "text"
    if kind == "boolean":
        return True
    if kind == "integer":
        return int(schema.get("minimum", 0))
    if kind == "number":
        return float(schema.get("minimum", 0.0))
    return None


def _message_text(body: dict) -> str:
    parts = []
    for message in body.get("messages", []):
        content = message.get("content")
        if isinstance(content, str):
            parts.append(content)
        elif isinstance(content, list):
            parts.extend(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return "\n".join(parts)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as real providers do
    # Headers and body go out as separate writes; with Nagle's algorithm the
    # body waits for the client's delayed ACK (~40 ms a request).
    disable_nagle_algorithm = True
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        pass  # the test output stays clean

    def do_GET(self) -> None:
        if self.path.rstrip("/") in ("/v1/stats", "/stats"):
            # For a server running in another process (the benchmark).
            self._send_json(200, self.server.fake.snapshot(reset=True))
        elif self.path.rstrip("/") in ("/v1/models", "/models"):
            self._send_json(200, {"object": "list", "data": [{"id": "fake", "object": "model"}]})
        else:
            self._send_json(404, {"error": {"message": "not found", "type": "not_found"}})

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length)
        if len(raw) < length:  # the client died mid-request (a killed run): no request arrived, none is counted
            self.close_connection = True
            return
        if self.path.rstrip("/") not in ("/v1/chat/completions", "/chat/completions"):
            self._send_json(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})
            return
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            self._send_json(400, {"error": {"message": "request is not JSON", "type": "invalid_request_error"}})
            return
        self.server.fake._serve(self, body)

    def _send_json(self, status: int, payload: Any, headers: Mapping[str, str] | None = None) -> None:
        self._send_bytes(status, json.dumps(payload).encode(), headers)

    def _send_bytes(self, status: int, data: bytes, headers: Mapping[str, str] | None = None) -> None:
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)
            self.wfile.flush()
        except OSError:
            # The client gave up (timeout) and closed its end: nothing to answer.
            self.close_connection = True

    def _reset(self) -> None:
        # SO_LINGER 0 turns close() into a TCP RST: the client sees a dropped
        # connection with no response at all.
        try:
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        except OSError:
            pass
        self.close_connection = True
        self.connection.close()


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 256  # the benchmark opens 64+ connections at once
    fake: FakeServer

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client killed mid-request (the crash tests kill -9 theirs) resets its
        # connections: that is the test working, not a server error to print.
        if isinstance(sys.exc_info()[1], (ConnectionError, TimeoutError)):
            return
        super().handle_error(request, client_address)


class FakeServer:
    """An OpenAI-compatible chat-completions server with injected faults.

    Args:
        latency: seconds every request waits before its outcome is served.
        faults: probability per outcome kind (see module docstring); the rest is ``ok``.
        seed: seeds the RNG that draws outcomes.
        script: outcomes forced for the first requests, in arrival order.
        retry_after: value of the Retry-After header on 429s (seconds).
        slow_seconds: how long a ``slow`` request stalls.
        responder: ``callable(request_json) -> content str | message dict`` for ``ok`` answers.
        call_tools: on ``ok`` with ``tools`` in the request, answer with a call of the first tool.
        response_formats: the ``response_format`` types accepted; another type gets the
            500 llama-cpp-python answers (it takes only "text" and "json_object" + "schema").
        model_reported: the ``model`` field of answers (default: the requested model).
        port: 0 picks a free port.
        fault_for: ``callable(request_json) -> outcome | None``, consulted before the draw.
        content_faults_need_schema: serve ``off_schema``/``prose`` draws as ``ok`` when the
            request has no ``response_format``.
        echo_key: ``auth`` answers quote the Authorization header they received.
        echo_headers: every answer and error quotes all request headers (see module docstring).
        error_prefix: text every error message starts with (to move what follows it).
    """

    def __init__(
        self,
        *,
        latency: float = 0.0,
        faults: Mapping[str, float] | None = None,
        seed: int = 0,
        script: Sequence[str] = (),
        retry_after: float | str = 1,
        slow_seconds: float = 2.0,
        responder: Responder | None = None,
        call_tools: bool = False,
        response_formats: Sequence[str] = ("text", "json_object", "json_schema"),
        model_reported: str | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        fault_for: Callable[[dict], str | None] | None = None,
        content_faults_need_schema: bool = False,
        echo_key: bool = False,
        echo_headers: bool = False,
        error_prefix: str = "",
    ):
        unknown = set(faults or {}) - set(OUTCOMES) | set(script) - set(OUTCOMES)
        if unknown:
            raise ValueError(f"unknown fault kinds {sorted(unknown)}; expected some of {OUTCOMES}")
        self.latency = latency
        self.faults = dict(faults or {})
        if sum(self.faults.values()) > 1:
            raise ValueError("fault probabilities add up to more than 1")
        self.retry_after = retry_after
        self.slow_seconds = slow_seconds
        self.responder = responder
        self.call_tools = call_tools
        self.response_formats = tuple(response_formats)
        self.model_reported = model_reported
        self.fault_for = fault_for
        self.content_faults_need_schema = content_faults_need_schema
        self.echo_key = echo_key
        self.echo_headers = echo_headers
        self.error_prefix = error_prefix
        self._rng = random.Random(seed)
        self._script = list(script)
        self._lock = threading.Lock()
        self.counts: Counter[str] = Counter()  # "total" and one entry per outcome
        self.requests: list[dict] = []  # request bodies, in arrival order
        self.headers: list[dict] = []  # request headers, in arrival order
        self.in_flight = 0
        self.max_in_flight = 0
        self._httpd = _Server((host, port), _Handler)
        self._httpd.fake = self
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """Base URL to pass as ``api_base`` (it ends in ``/v1``)."""
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}/v1"

    def start(self) -> FakeServer:
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="fakeserver", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> FakeServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def snapshot(self, *, reset: bool = False) -> dict:
        """Counts and the peak of requests in flight; ``reset`` restarts the peak."""
        with self._lock:
            result = {"counts": dict(self.counts), "in_flight": self.in_flight, "max_in_flight": self.max_in_flight}
            if reset:
                self.max_in_flight = self.in_flight
        return result

    def queue(self, *outcomes: str) -> None:
        """Force the next requests' outcomes, in arrival order (like ``script``, mid-run)."""
        unknown = set(outcomes) - set(OUTCOMES)
        if unknown:
            raise ValueError(f"unknown fault kinds {sorted(unknown)}; expected some of {OUTCOMES}")
        with self._lock:
            self._script.extend(outcomes)

    def reset_counts(self) -> None:
        with self._lock:
            self.counts.clear()
            self.requests.clear()
            self.headers.clear()
            self.max_in_flight = self.in_flight

    # -- serving -----------------------------------------------------------

    def _draw(self) -> str:
        if self._script:
            return self._script.pop(0)
        roll = self._rng.random()
        for kind, probability in self.faults.items():
            if roll < probability:
                return kind
            roll -= probability
        return "ok"

    def _serve(self, handler: _Handler, body: dict) -> None:
        forced = self.fault_for(body) if self.fault_for is not None else None
        if forced is not None and forced not in OUTCOMES:
            raise ValueError(f"fault_for returned {forced!r}; expected one of {OUTCOMES}")
        with self._lock:
            outcome = forced or self._draw()
            if (
                outcome in ("off_schema", "prose")
                and self.content_faults_need_schema
                and not body.get("response_format")
            ):
                outcome = "ok"
            self.counts["total"] += 1
            self.counts[outcome] += 1
            self.requests.append(body)
            self.headers.append(dict(handler.headers.items()))
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            if self.latency:
                time.sleep(self.latency)
            self._respond(handler, body, outcome)
        finally:
            with self._lock:
                self.in_flight -= 1

    def _respond(self, handler: _Handler, body: dict, outcome: str) -> None:
        if self.echo_headers:
            handler = _EchoingHandler(handler)
        if self.error_prefix:
            handler = _PrefixingHandler(handler, self.error_prefix)
        kind = (body.get("response_format") or {}).get("type", "text")
        if kind not in self.response_formats:
            detail = f"response_format.type: Input should be {' or '.join(map(repr, self.response_formats))}"
            handler._send_json(500, {"error": {"message": detail, "type": "internal_server_error"}})
        elif outcome == "rate_limit":
            error = {"error": {"message": "rate limited", "type": "rate_limit_error", "code": "rate_limit_exceeded"}}
            handler._send_json(429, error, {"Retry-After": str(self.retry_after)})
        elif outcome == "server_error":
            handler._send_json(500, {"error": {"message": "internal error", "type": "server_error"}})
        elif outcome == "unavailable":
            handler._send_json(503, {"error": {"message": "overloaded", "type": "server_error"}})
        elif outcome == "bad_request":
            handler._send_json(400, {"error": {"message": "bad request", "type": "invalid_request_error"}})
        elif outcome == "auth":
            message = "invalid api key"
            if self.echo_key:
                sent = {k.lower(): v for k, v in handler.headers.items()}.get("authorization", "")
                message = f"invalid api key: {sent.removeprefix('Bearer ')}"
            handler._send_json(401, {"error": {"message": message, "type": "invalid_request_error"}})
        elif outcome == "reset":
            handler._reset()
        elif outcome == "truncated":
            whole = json.dumps(self._completion(body, self._answer(body)))
            handler._send_bytes(200, whole[: len(whole) // 2].encode())
        else:
            if outcome == "slow":
                time.sleep(self.slow_seconds)
            if outcome == "off_schema":
                message: dict = {"role": "assistant", "content": json.dumps({"unexpected": "shape"})}
            elif outcome == "prose":
                message = {"role": "assistant", "content": "I think the answer is probably yes."}
            else:
                message = self._answer(body)
            raw = message.get("content") if isinstance(message.get("content"), bytes) else None
            if raw is None:
                handler._send_json(200, self._completion(body, message))
            else:
                encoded = json.dumps(self._completion(body, {**message, "content": _RAW})).encode()
                handler._send_bytes(200, encoded.replace(json.dumps(_RAW).encode(), b'"' + raw + b'"'))

    def _answer(self, body: dict) -> dict:
        """The assistant message of a normal (``ok``) answer."""
        if self.responder is not None:
            answer = self.responder(body)
            return answer if isinstance(answer, dict) else {"role": "assistant", "content": answer}
        tools = body.get("tools") or []
        if self.call_tools and tools:
            function = tools[0].get("function", {})
            arguments = schema_instance(function.get("parameters", {"type": "object"}))
            call = {
                "id": f"call_{self.counts['total']}",
                "type": "function",
                "function": {"name": function.get("name", "tool"), "arguments": json.dumps(arguments)},
            }
            return {"role": "assistant", "content": None, "tool_calls": [call]}
        response_format = body.get("response_format") or {}
        if response_format.get("type") == "json_schema":
            schema = response_format.get("json_schema", {}).get("schema", {})
            return {"role": "assistant", "content": json.dumps(schema_instance(schema))}
        if response_format.get("type") == "json_object":
            schema = response_format.get("schema", {"type": "object"})
            return {"role": "assistant", "content": json.dumps(schema_instance(schema))}
        last = _message_text({"messages": body.get("messages", [])[-1:]})
        return {"role": "assistant", "content": f"echo: {last[:200]}"}

    def _completion(self, body: dict, message: dict) -> dict:
        prompt_tokens = len(_message_text(body).split())
        completion_tokens = len(str(message.get("content") or message.get("tool_calls") or "").split())
        return {
            "id": f"chatcmpl-fake-{self.counts['total']}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": self.model_reported or body.get("model", "fake"),
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "finish_reason": "tool_calls" if message.get("tool_calls") else "stop",
                }
            ],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
            },
        }


class _EchoingHandler:
    """Wraps a handler so that everything it sends quotes the request's headers."""

    def __init__(self, handler: _Handler):
        self._handler = handler
        self._quoted = "; ".join(f"{k}: {v}" for k, v in handler.headers.items())

    def __getattr__(self, name: str) -> Any:
        return getattr(self._handler, name)

    def _send_json(self, status: int, payload: Any, headers: Mapping[str, str] | None = None) -> None:
        payload = json.loads(json.dumps(payload))
        error = payload.get("error") if isinstance(payload, dict) else None
        if isinstance(error, dict):
            error["message"] = f"{error.get('message', '')} (request headers: {self._quoted})"
        for choice in payload.get("choices", []) if isinstance(payload, dict) else []:
            message = choice.get("message") or {}
            if isinstance(message.get("content"), str):
                message["content"] = self._echo_content(message["content"])
            for call in message.get("tool_calls") or []:
                arguments = json.loads(call["function"]["arguments"] or "{}")
                if isinstance(arguments, dict):
                    arguments["echo"] = self._quoted
                    call["function"]["arguments"] = json.dumps(arguments)
        self._send_bytes(status, json.dumps(payload).encode(), headers)

    def _echo_content(self, content: str) -> str:
        try:
            decoded = json.loads(content)
        except ValueError:
            return f"{content} [request headers: {self._quoted}]"

        def echo(value: Any) -> Any:
            if isinstance(value, str):
                return f"{value} [request headers: {self._quoted}]"
            if isinstance(value, dict):
                return {k: echo(v) for k, v in value.items()}
            if isinstance(value, list):
                return [echo(v) for v in value]
            return value

        return json.dumps(echo(decoded))

    def _send_bytes(self, status: int, data: bytes, headers: Mapping[str, str] | None = None) -> None:
        # Header values must be latin-1 on the wire; a key is ASCII.
        echoed = {**(headers or {}), "X-Echo-Headers": self._quoted.encode("latin-1", "replace").decode("latin-1")}
        self._handler._send_bytes(status, data, echoed)


class _PrefixingHandler:
    """Wraps a handler so that every error message starts with a given text."""

    def __init__(self, handler: Any, prefix: str):
        self._handler, self._prefix = handler, prefix

    def __getattr__(self, name: str) -> Any:
        return getattr(self._handler, name)

    def _send_json(self, status: int, payload: Any, headers: Mapping[str, str] | None = None) -> None:
        if isinstance(payload, dict) and isinstance(payload.get("error"), dict):
            payload = {**payload, "error": {**payload["error"], "message": self._prefix + payload["error"].get("message", "")}}
        self._handler._send_json(status, payload, headers)


def _main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--latency", type=float, default=0.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--fault", action="append", default=[], metavar="KIND=P", help="e.g. rate_limit=0.1")
    args = parser.parse_args()
    faults = {kind: float(p) for kind, p in (f.split("=", 1) for f in args.fault)}
    serve_forever(FakeServer(latency=args.latency, faults=faults, seed=args.seed, port=args.port))


def serve_forever(server: FakeServer) -> None:
    """Print the server's URL, then serve in this process (its own, so a client's CPU is measured apart) until Ctrl-C."""
    print(server.url, flush=True)
    try:
        server._httpd.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server._httpd.server_close()


if __name__ == "__main__":
    _main()
