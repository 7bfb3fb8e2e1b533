"""The webhook cannot be starved: bodies are capped and budgeted, requests have a read deadline,
connections are limited, and a signed but malformed body is a 400, never a 500.

Every test drives the real app under uvicorn, configured as ``attune serve`` configures it
(``bot/github/http_limits.py``), over raw sockets where the client must misbehave.
"""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from bot.github.signature import sign
from tests.github_harness import SECRET, github_mode, ledger_events, replies

LIMITS: dict[str, Any] = {
    "read_timeout_s": 1.5,
    "max_body_bytes": 256 * 1024,
    "max_buffered_bytes": 1024 * 1024,
}


def _connect(url: str) -> socket.socket:
    host, port = url.removeprefix("http://").split(":")
    sock = socket.create_connection((host, int(port)), timeout=10)
    return sock


def _head(length: int | None, signature: str = "sha256=" + "0" * 64, **extra: str) -> bytes:
    lines = ["POST /webhook HTTP/1.1", "Host: 127.0.0.1", "Content-Type: application/json"]
    lines += ["X-GitHub-Event: issue_comment", "X-GitHub-Delivery: raw-1"]
    lines += [f"X-Hub-Signature-256: {signature}"]
    lines += [f"Content-Length: {length}"] if length is not None else []
    lines += [f"{k}: {v}" for k, v in extra.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def _answer(sock: socket.socket) -> tuple[int, bytes]:
    """The status and body of the response on ``sock`` (read until the server closes)."""
    data = b""
    while chunk := sock.recv(65536):
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), body


def _closed_after(sock: socket.socket, limit: float) -> float:
    """Seconds until the server closes ``sock`` (nothing answered); fails past ``limit``."""
    start = time.monotonic()
    sock.settimeout(limit)
    try:
        while sock.recv(65536):
            pass
    except ConnectionResetError:
        pass
    return time.monotonic() - start


def _signed(event: str, body: bytes, delivery: str = "d-1") -> dict[str, str]:
    return {
        "X-GitHub-Event": event,
        "X-GitHub-Delivery": delivery,
        "X-Hub-Signature-256": sign(body, SECRET),
        "Content-Type": "application/json",
    }


def test_no_openapi_schema_and_no_docs_pages(tmp_path: Path) -> None:
    with github_mode(tmp_path) as (_fake, app, _n):
        for path in ("/openapi.json", "/docs", "/redoc", "/docs/oauth2-redirect"):
            assert httpx.get(f"{app.url}{path}").status_code == 404, path


def test_a_declared_body_over_the_cap_is_413_before_it_is_sent(tmp_path: Path) -> None:
    with github_mode(tmp_path, **LIMITS) as (_fake, app, _n):
        with _connect(app.url) as sock:
            sock.sendall(
                _head(2 * 1024 * 1024)
            )  # 2 MiB announced (under GitHub's 25 MB), none sent
            start = time.monotonic()
            status, body = _answer(sock)
        assert status == 413 and b"262144 bytes" in body
        assert time.monotonic() - start < 1.0  # at once, not at the read deadline


def test_a_streamed_body_over_the_cap_is_413_and_the_rest_is_not_read(tmp_path: Path) -> None:
    with github_mode(tmp_path, **LIMITS) as (_fake, app, _n):
        with _connect(app.url) as sock:
            sock.sendall(_head(None, **{"Transfer-Encoding": "chunked"}))
            chunk = b"x" * 65536
            sent = 0
            try:
                for _ in range(64):  # up to 4 MiB: the server must stop well before
                    sock.sendall(b"%x\r\n" % len(chunk) + chunk + b"\r\n")
                    sent += len(chunk)
            except (BrokenPipeError, ConnectionResetError):
                pass
            try:
                status, _ = _answer(sock)
                assert status == 413
            except ConnectionResetError:
                pass  # closed with our unread bytes in its buffer: the kernel sent a reset
        assert sent < 4 * 1024 * 1024 - len(chunk)
        assert app.app.state.buffer_budget.held == 0


def test_slow_headers_are_closed_at_the_read_deadline(tmp_path: Path) -> None:
    with github_mode(tmp_path, **LIMITS) as (_fake, app, _n):
        with _connect(app.url) as sock:
            sock.sendall(b"POST /webhook HTTP/1.1\r\nHost: 127.0.0.1\r\n")
            start = time.monotonic()
            closed = False
            for _ in range(40):  # a header byte every 0.1 s, never finished
                try:
                    sock.sendall(b"X")
                except (BrokenPipeError, ConnectionResetError):
                    closed = True
                    break
                sock.settimeout(0.1)
                try:
                    if sock.recv(1024) == b"":
                        closed = True
                        break
                except TimeoutError:
                    pass
                except ConnectionResetError:
                    closed = True
                    break
            elapsed = time.monotonic() - start
        assert closed, "the connection was still open after 4 s of slow headers"
        assert 1.2 < elapsed < 3.0


def test_a_slow_body_is_closed_at_the_read_deadline(tmp_path: Path) -> None:
    with github_mode(tmp_path, **LIMITS) as (_fake, app, _n):
        with _connect(app.url) as sock:
            sock.sendall(_head(1000))
            sock.sendall(b"{")  # then nothing more: the body never completes
            elapsed = _closed_after(sock, 5.0)
        assert 1.2 < elapsed < 3.0
        wait = time.monotonic() + 2
        while app.app.state.buffer_budget.held and time.monotonic() < wait:
            time.sleep(0.05)
        assert app.app.state.buffer_budget.held == 0  # the budget was given back


def test_a_kept_alive_connection_gets_a_deadline_for_its_next_request(tmp_path: Path) -> None:
    with github_mode(tmp_path, **LIMITS) as (_fake, app, _n):
        with _connect(app.url) as sock:
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            assert sock.recv(65536).startswith(b"HTTP/1.1 200")
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: 1")  # a second request, unfinished
            elapsed = _closed_after(sock, 5.0)
        assert 1.2 < elapsed < 3.0


def test_bodies_in_flight_share_one_buffer_budget(tmp_path: Path) -> None:
    """Three bodies of 400 kB with a 1 MiB budget: the third waits until one of the first two
    is done, and the bytes held never pass the budget."""
    limits = LIMITS | {"max_body_bytes": 512 * 1024}
    with github_mode(tmp_path, **limits) as (fake, app, number):
        budget = app.app.state.buffer_budget
        size = 400 * 1024
        holders = [_connect(app.url) for _ in range(2)]
        for sock in holders:
            sock.sendall(_head(size) + b"x" * 1024)  # announced, barely started
        deadline = time.monotonic() + 2
        while budget.held < 2 * size and time.monotonic() < deadline:
            time.sleep(0.02)
        assert budget.held == 2 * size
        payload = fake.webhooks.issue_comment(number, "reader", "/attune help")
        body = json.dumps(payload).encode()
        body += b" " * (size - len(body))  # padded to 400 kB: JSON still
        with httpx.Client(timeout=10) as client:
            start = time.monotonic()
            third = client.post(
                f"{app.url}/webhook", content=body, headers=_signed("issue_comment", body)
            )
            waited = time.monotonic() - start
        # it got room when the holders were closed at their read deadline (1.5 s)
        assert third.status_code == 202, third.text
        assert 0.8 < waited < 3.0
        assert budget.peak <= LIMITS["max_buffered_bytes"]
        for sock in holders:
            sock.close()


def test_connections_beyond_the_limit_get_503(tmp_path: Path) -> None:
    with github_mode(tmp_path, max_connections=4) as (_fake, app, _n):
        idle = [_connect(app.url) for _ in range(4)]
        time.sleep(0.2)
        assert httpx.get(f"{app.url}/healthz").status_code == 503
        for sock in idle:
            sock.close()
        time.sleep(0.2)
        assert httpx.get(f"{app.url}/healthz").status_code == 200


MALFORMED = [
    ("issue_comment", b"[" * 100_000 + b"]" * 100_000, "nested too deeply"),
    ("issue_comment", b'{"a":' * 50_000 + b"1" + b"}" * 50_000, "nested too deeply"),
    ("issue_comment", b'{"action": "created"}', "issue_comment payload: issue"),
    ("workflow_run", b'{"action": "completed", "repository": []}', "workflow_run payload"),
    ("check_run", b'{"repository": {"full_name": "o/r"}}', "check_run payload: action"),
    ("pull_request", b'{"repository": "o/r"}', "pull_request payload: repository"),
    ("issue_comment", b"\xff\xfe not json", "not JSON"),
    ("issue_comment", b"[1, 2]", "not a JSON object"),
]


@pytest.mark.parametrize(("event", "body", "reason"), MALFORMED)
def test_a_signed_but_malformed_body_is_400_with_a_short_reason(
    tmp_path: Path, event: str, body: bytes, reason: str
) -> None:
    with github_mode(tmp_path) as (fake, app, number):
        response = httpx.post(f"{app.url}/webhook", content=body, headers=_signed(event, body))
        assert response.status_code == 400, response.text
        detail = response.json()["detail"]
        assert reason in detail and len(detail) <= 200
        assert ledger_events(app) == [] and replies(fake, number) == []


def test_a_comment_with_wrong_types_is_400(tmp_path: Path) -> None:
    with github_mode(tmp_path) as (fake, app, number):
        good = fake.webhooks.issue_comment(number, "maintainer", "/attune help")
        broken: list[tuple[str, Any]] = [
            ("comment", {**good["comment"], "id": "not-a-number"}),
            ("comment", "a string"),
            ("repository", ["o", "r"]),
            ("installation", None),
            ("issue", {**good["issue"], "number": None}),
        ]
        for key, value in broken:
            body = json.dumps({**good, key: value}).encode()
            response = httpx.post(
                f"{app.url}/webhook", content=body, headers=_signed("issue_comment", body, key)
            )
            assert response.status_code == 400, (key, response.text)
            assert response.json()["detail"].startswith(f"issue_comment payload: {key}")
        time.sleep(0.5)
        assert replies(fake, number) == []
