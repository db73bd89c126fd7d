"""A loopback server that plays OpenAI's chat, files and batches endpoints, for the batch tests only.

litellm reaches it as it reaches OpenAI: ``openai/<model>`` with ``api_base=server.url``.

- ``POST /v1/chat/completions``: a direct call, answered by ``responder(body)``;
- ``POST /v1/files`` (multipart, ``purpose=batch``): keeps the JSONL file;
- ``POST /v1/batches``: a batch of that file, ``validating``;
- ``GET /v1/batches/{id}``: the batch as it stands; what it does is the batch's
  ``ending`` (``complete``, ``expire``, ``partial``), reached at its first look
  unless ``hold`` is set (then ``in_progress`` until :meth:`release`);
- ``GET /v1/files/{id}/content``: the output and error files of an ended batch.

``ending``: ``complete`` answers every line; ``fail`` answers none and ends
``failed`` with the provider's reason; ``expire`` answers the first
``answered`` lines and ends ``expired`` with the rest in the error file
(``batch_expired``); ``partial`` ends ``completed`` with every line whose
custom id ``fails(custom_id)``, or whose body ``fails_body(body)``, answered with a 500 in the
output file (their ids in ``failed_ids``).
``batch_responder`` (default: ``responder``) answers the lines of a batch.

Hostile providers: ``rewrite(kind, data)`` replaces an ended batch's
``output`` or ``error`` file as it is served (bytes, or an iterable of chunks
sent until the client hangs up, for a file without end); ``status`` is a
status every look answers instead of ending; ``silent`` answers no look at all
(the connection is held until the server closes).

Every request is counted (``counts``: chat, files, batches, polls, contents,
and ``lines[custom_id]``: how many times a request was answered in a batch),
and every header and body it was sent is kept (``seen``; ``chats``: the direct
requests' bodies), so a test can grep them for a key. Events: ``submitted`` is set when a batch is created,
``polled`` at each look at a batch.
"""

from __future__ import annotations

import email.parser
import itertools
import json
import threading
from collections import Counter
from collections.abc import Callable, Iterable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["BatchServer"]

Responder = Callable[[dict], str]


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _body(self) -> bytes:
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def do_POST(self) -> None:
        raw = self._body()
        fake = self.server.fake
        fake.saw(self, raw)
        path = self.path.rstrip("/")
        if path.endswith("/chat/completions"):
            self._json(200, fake.chat(json.loads(raw)))
        elif path.endswith("/files"):
            self._json(200, fake.upload(self.headers.get("Content-Type") or "", raw))
        elif path.endswith("/batches"):
            self._json(200, fake.create(json.loads(raw)))
        else:
            self._json(404, {"error": {"message": f"no route {self.path}"}})

    def do_GET(self) -> None:
        fake = self.server.fake
        fake.saw(self, b"")
        parts = self.path.rstrip("/").split("/")
        if len(parts) >= 2 and parts[-2] == "batches":
            self._json(200, fake.look(parts[-1]))
        elif parts[-1] == "content" and parts[-3] == "files":
            data = fake.content(parts[-2])
            if not isinstance(data, bytes):  # a stream: no length, sent until the reader hangs up
                self.send_response(200)
                self.send_header("Content-Type", "application/octet-stream")
                self.send_header("Connection", "close")
                self.end_headers()
                self.close_connection = True
                try:
                    for chunk in data:
                        self.wfile.write(chunk)
                except (BrokenPipeError, ConnectionResetError):
                    pass
                return
            self.send_response(200)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        else:
            self._json(404, {"error": {"message": f"no route {self.path}"}})

    def _json(self, status: int, payload: Any) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    fake: BatchServer


def _completion(body: dict, text: str, n: int) -> dict:
    prompt = sum(len(str(m.get("content") or "")) for m in body.get("messages", [])) // 4 + 1
    return {"id": f"chatcmpl-{n}", "object": "chat.completion", "created": 0, "model": body.get("model", "fake"),
            "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": text}}],
            "usage": {"prompt_tokens": prompt, "completion_tokens": 20, "total_tokens": prompt + 20}}


class BatchServer:
    """The fake provider; use as a context manager (``url`` is its ``api_base``)."""

    def __init__(self, responder: Responder, *, ending: str = "complete", answered: int = 0,
                 fails: Callable[[str], bool] = lambda custom_id: False, hold: bool = False,
                 batch_responder: Responder | None = None,
                 rewrite: Callable[[str, bytes], bytes | Iterable[bytes]] | None = None, status: str | None = None,
                 silent: bool = False, fails_body: Callable[[dict], bool] = lambda body: False):
        self.responder, self.ending, self.answered, self.fails = responder, ending, answered, fails
        self.rewrite, self.status, self.silent, self.fails_body = rewrite, status, silent, fails_body
        self.failed_ids: set[str] = set()
        self._closing = threading.Event()
        self._kinds: dict[str, str] = {}  # file id -> output or error
        self.batch_responder = batch_responder or responder
        self.counts: Counter = Counter()
        self.lines: Counter = Counter()
        self.seen: list[bytes] = []
        self.chats: list[dict] = []  # every direct request's body
        self.submitted = threading.Event()
        self.polled = threading.Event()
        self._held = threading.Event()
        if not hold:
            self._held.set()
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._files: dict[str, bytes] = {}
        self._batches: dict[str, dict] = {}
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.fake = self
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def __enter__(self) -> BatchServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._closing.set()
        self._server.shutdown()
        self._server.server_close()

    def release(self) -> None:
        """Let held batches end at their next look."""
        self._held.set()

    def hold(self) -> None:
        self._held.clear()

    # -- the endpoints ------------------------------------------------------------

    def saw(self, handler: BaseHTTPRequestHandler, raw: bytes) -> None:
        with self._lock:
            self.seen.append(str(handler.headers).encode() + b"\n" + raw)

    def chat(self, body: dict) -> dict:
        with self._lock:
            self.counts["chat"] += 1
            self.chats.append(body)
        return _completion(body, self.responder(body), next(self._ids))

    def upload(self, content_type: str, raw: bytes) -> dict:
        message = email.parser.BytesParser().parsebytes(b"Content-Type: " + content_type.encode() + b"\r\n\r\n" + raw)
        data = b""
        for part in message.walk():
            if part.get_param("name", header="content-disposition") == "file":
                data = part.get_payload(decode=True) or b""
        file_id = f"file-{next(self._ids)}"
        with self._lock:
            self.counts["files"] += 1
            self._files[file_id] = data
        return {"id": file_id, "object": "file", "bytes": len(data), "created_at": 0, "filename": "batch.jsonl",
                "purpose": "batch", "status": "processed"}

    def create(self, body: dict) -> dict:
        batch_id = f"batch_{next(self._ids)}"
        batch = {"id": batch_id, "object": "batch", "endpoint": body["endpoint"], "input_file_id": body["input_file_id"],
                 "completion_window": body["completion_window"], "status": "validating", "created_at": 0,
                 "output_file_id": None, "error_file_id": None,
                 "request_counts": {"total": 0, "completed": 0, "failed": 0}}
        with self._lock:
            self.counts["batches"] += 1
            self._batches[batch_id] = batch
        self.submitted.set()
        return batch

    def look(self, batch_id: str) -> dict:
        with self._lock:
            self.counts["polls"] += 1
            batch = self._batches[batch_id]
        self.polled.set()
        if self.silent:
            self._closing.wait()
            return batch
        if self.status is not None:
            return {**batch, "status": self.status}
        if batch["status"] in ("validating", "in_progress") and self._held.is_set():
            self._end(batch)
        elif batch["status"] == "validating":
            batch["status"] = "in_progress"
        return batch

    def content(self, file_id: str) -> bytes | Iterable[bytes]:
        with self._lock:
            self.counts["contents"] += 1
            data, kind = self._files[file_id], self._kinds.get(file_id)
        return self.rewrite(kind, data) if self.rewrite is not None and kind is not None else data

    def _end(self, batch: dict) -> None:
        lines = [json.loads(line) for line in self._files[batch["input_file_id"]].splitlines() if line.strip()]
        if self.ending == "fail":  # refused as a whole: no line answered
            batch["status"] = "failed"
            batch["errors"] = {"object": "list", "data": [{"code": "invalid_file", "message": "the file was refused"}]}
            batch["request_counts"] = {"total": len(lines), "completed": 0, "failed": len(lines)}
            return
        out, errors = [], []
        for i, line in enumerate(lines):
            custom_id = line["custom_id"]
            if self.ending == "expire" and i >= self.answered:
                errors.append({"id": f"req-{i}", "custom_id": custom_id, "response": None,
                               "error": {"code": "batch_expired", "message": "not done in the window"}})
                continue
            with self._lock:
                self.lines[custom_id] += 1
            if self.ending == "partial" and (self.fails(custom_id) or self.fails_body(line["body"])):
                self.failed_ids.add(custom_id)
                out.append({"id": f"req-{i}", "custom_id": custom_id, "error": None,
                            "response": {"status_code": 500, "request_id": f"r{i}",
                                         "body": {"error": {"message": "server error", "type": "server_error"}}}})
                continue
            answer = _completion(line["body"], self.batch_responder(line["body"]), i)
            out.append({"id": f"req-{i}", "custom_id": custom_id, "error": None,
                        "response": {"status_code": 200, "request_id": f"r{i}", "body": answer}})
        with self._lock:
            if out:
                batch["output_file_id"] = f"file-{next(self._ids)}"
                self._files[batch["output_file_id"]] = "".join(json.dumps(o) + "\n" for o in out).encode()
                self._kinds[batch["output_file_id"]] = "output"
            if errors:
                batch["error_file_id"] = f"file-{next(self._ids)}"
                self._files[batch["error_file_id"]] = "".join(json.dumps(e) + "\n" for e in errors).encode()
                self._kinds[batch["error_file_id"]] = "error"
        failed = len(errors) + sum(1 for o in out if o["response"]["status_code"] != 200)
        batch["request_counts"] = {"total": len(lines), "completed": len(lines) - failed, "failed": failed}
        batch["status"] = "expired" if self.ending == "expire" else "completed"
