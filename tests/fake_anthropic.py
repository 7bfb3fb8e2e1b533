"""A test double of the Messages API: a real HTTP server on 127.0.0.1 that validates each
``POST /v1/messages`` the way the API does (headers, roles, content blocks, every tool_use
answered by a tool_result), and replays a script of answers and errors.

A step of the script is a ``Turn`` (content blocks, stop reason; usage is computed from the
sizes), a ``Fail`` (status code, the API's error body ``{"type": "error", "error": {...}}``
and ``retry-after``), or a function of the request returning a ``Turn`` (a script that reads
what the agent sent, e.g. the line a grep found). ``expect`` checks a request; a failed check
is kept in ``failures`` and answered 400, so the test sees it.
"""

from __future__ import annotations

import itertools
import json
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Request = dict[str, Any]


@dataclass
class Turn:
    content: list[dict[str, Any]]
    stop_reason: str = "tool_use"
    expect: Callable[[Request], None] | None = None
    hold: threading.Event | None = None
    """Answer only once this is set (a client killed while waiting never gets it)."""
    usage: dict[str, Any] | None = None
    """Usage fields to report instead of the computed ones (a hostile server's numbers)."""
    model: str | None = None
    """The model the answer claims (default: the one asked for)."""


@dataclass
class Fail:
    status: int
    kind: str
    message: str
    retry_after: str | None = None


Step = Turn | Fail | Callable[[Request], Turn]
_ids = itertools.count(1)


def tool(name: str, **args: Any) -> dict[str, Any]:
    """A tool_use block with a fresh id."""
    return {"type": "tool_use", "id": f"toolu_{next(_ids):05d}", "name": name, "input": args}


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


def tool_results(request: Request) -> list[dict[str, Any]]:
    """The tool_result blocks of the request's last (user) message."""
    content = request["messages"][-1]["content"]
    return [b for b in content if isinstance(b, dict) and b.get("type") == "tool_result"]


def _blocks(content: Any) -> list[dict[str, Any]]:
    return [{"type": "text", "text": content}] if isinstance(content, str) else list(content)


def invalid(body: Any) -> str | None:
    """Why the API would refuse this body (400 invalid_request_error), or None."""
    if not isinstance(body, dict):
        return "body: expected an object"
    if not isinstance(body.get("model"), str) or not body["model"]:
        return "model: Field required"
    if not isinstance(body.get("max_tokens"), int) or body["max_tokens"] < 1:
        return "max_tokens: Field required"
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return "messages: at least one message is required"
    for tool_def in body.get("tools", []):
        if (
            not {"name", "input_schema"} <= set(tool_def)
            or tool_def["input_schema"].get("type") != "object"
        ):
            return f"tools: {tool_def.get('name')}: name and an object input_schema required"
    system = body.get("system", "")
    if not isinstance(system, str) and any(b.get("type") != "text" for b in system):
        return "system: text blocks only"
    pending: set[str] = set()
    for i, message in enumerate(messages):
        role = message.get("role")
        if role != ("user" if i % 2 == 0 else "assistant"):
            return f"messages.{i}.role: roles must alternate, starting with user"
        blocks = _blocks(message.get("content"))
        if not blocks:
            return f"messages.{i}: content must not be empty"
        answered = [b["tool_use_id"] for b in blocks if b.get("type") == "tool_result"]
        if pending and (set(answered) != pending or blocks[0].get("type") != "tool_result"):
            return (
                f"messages.{i}: tool_use ids were found without tool_result blocks "
                f"immediately after: {', '.join(sorted(pending - set(answered)))}"
            )
        if answered and not pending:
            return f"messages.{i}: unexpected tool_use_id found in tool_result blocks"
        pending = set()
        for b in blocks:
            kind = b.get("type")
            if kind == "text" and not isinstance(b.get("text"), str):
                return f"messages.{i}: text block without text"
            if kind == "tool_use":
                if role != "assistant" or not isinstance(b.get("input"), dict):
                    return f"messages.{i}: tool_use needs role assistant and an object input"
                pending.add(b["id"])
            if kind == "tool_result" and role != "user":
                return f"messages.{i}: tool_result only in user messages"
            if kind not in ("text", "tool_use", "tool_result"):
                return f"messages.{i}: unknown block type {kind}"
    return None


@dataclass
class FakeAnthropic:
    script: list[Step]
    requests: list[Request] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    arrived: threading.Event = field(default_factory=threading.Event)
    """Set whenever a request arrives."""

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"

    @property
    def left(self) -> int:
        return len(self.script)

    def __enter__(self) -> FakeAnthropic:
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def answer(self, raw: bytes, headers: Any) -> tuple[int, dict[str, Any], dict[str, str]]:
        bearer = (headers.get("authorization") or "").removeprefix("Bearer ").strip()
        if not (headers.get("x-api-key") or bearer):
            return _error(401, "authentication_error", "x-api-key header is required")
        if not headers.get("anthropic-version"):
            return _error(400, "invalid_request_error", "anthropic-version header is required")
        try:
            body = json.loads(raw)
        except ValueError:
            return _error(400, "invalid_request_error", "the body is not JSON")
        problem = invalid(body)
        with self._lock:
            self.requests.append(body)
            step = self.script.pop(0) if self.script and not problem else None
        self.arrived.set()
        if problem:
            self.failures.append(problem)
            return _error(400, "invalid_request_error", problem)
        if step is None:
            self.failures.append("a request after the script ended")
            return _error(500, "api_error", "the script has no more answers")
        if isinstance(step, Fail):
            extra = {"retry-after": step.retry_after} if step.retry_after else {}
            status, payload, _ = _error(step.status, step.kind, step.message)
            return status, payload, extra
        try:
            turn = step if isinstance(step, Turn) else step(body)
            if turn.expect is not None:
                turn.expect(body)
        except Exception as exc:  # a failed check, or a script that could not answer
            self.failures.append(f"request {len(self.requests)}: {type(exc).__name__}: {exc}")
            return _error(400, "invalid_request_error", f"script check failed: {exc}")
        if turn.hold is not None:
            turn.hold.wait()
        return 200, _message(body, turn), {}

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("content-length") or 0))
                if self.path.split("?")[0] != "/v1/messages":
                    status, payload, extra = _error(404, "not_found_error", self.path)
                else:
                    status, payload, extra = fake.answer(raw, self.headers)
                data = json.dumps(payload).encode()
                try:
                    self.send_response(status)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(data)))
                    self.send_header("request-id", f"req_{len(fake.requests):05d}")
                    for k, v in extra.items():
                        self.send_header(k, v)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    return  # the client left: it timed out, or was killed

            def log_message(self, format: str, *args: Any) -> None:
                return None

        return Handler


def _error(status: int, kind: str, message: str) -> tuple[int, dict[str, Any], dict[str, str]]:
    return status, {"type": "error", "error": {"type": kind, "message": message}}, {}


def _message(body: Request, turn: Turn) -> dict[str, Any]:
    content = [b if b.get("type") != "tool_use" else {**b} for b in turn.content]
    return {
        "id": f"msg_{next(_ids):08d}",
        "type": "message",
        "role": "assistant",
        "model": turn.model or body["model"],
        "content": content,
        "stop_reason": turn.stop_reason,
        "stop_sequence": None,
        "usage": {
            "input_tokens": len(json.dumps(body)) // 4,
            "output_tokens": len(json.dumps(content)) // 4 + 8,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
            **(turn.usage or {}),
        },
    }


def serve(script: list[Step]) -> Iterator[FakeAnthropic]:
    """For a fixture: the server running ``script`` until the test ends."""
    with FakeAnthropic(script) as server:
        yield server
