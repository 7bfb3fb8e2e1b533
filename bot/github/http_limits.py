"""The webhook server's limits: what one connection, and all of them together, may hold.

The webhook is on the internet, and anyone can open connections to it before any signature is
checked (the signature covers the body, so a body must be read to be refused). Four limits keep
such connections from starving the server:

- a **read deadline** (``ATTUNE_READ_TIMEOUT_S``): a request's headers and body must arrive
  within it, counted from its first byte (from the connection's start for the first request);
  a client still sending at the deadline has its connection closed. uvicorn itself times out
  only idle keep-alive connections, so the deadline is kept by the HTTP protocol below;
- a **body cap** (``ATTUNE_MAX_BODY_BYTES``), checked by the app on the declared length and as
  the body streams in (``app.py``); a response sent before the request's body was all read
  closes the connection, so the rest is never read;
- a **global cap on buffered body bytes** (``ATTUNE_MAX_BUFFERED_BYTES``) across connections:
  a body waits for room up to its read deadline, then is answered 503;
- uvicorn's ``limit_concurrency`` (``ATTUNE_MAX_CONNECTIONS``: 503 beyond it), its keep-alive
  timeout and h11's cap on a request's head (16 KiB).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import h11
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from bot.github.settings import Settings

MAX_HEAD_BYTES = 16 * 1024
"""A request line and headers larger than this are refused by h11 (400)."""


class DeadlineH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with a deadline on reading each request (head and body).

    The timer runs while the client owes the server a request: from the connection's start,
    and again from the first byte of each later request on a kept-alive connection, until the
    request's body is complete. When it fires, the connection is closed (the app, if it was
    reading the body, sees a disconnect). A response sent while the request's body is still
    coming closes the connection instead of reading the rest and throwing it away.
    """

    read_timeout_s: float = 10.0

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        self._read_timer: asyncio.TimerHandle | None = None
        super().connection_made(transport)
        self._arm()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self.conn.their_state in (h11.IDLE, h11.SEND_BODY):
            if self.conn.their_state is h11.SEND_BODY or self.conn.trailing_data[0]:
                self._arm()  # a request has started: its head or body is arriving
        else:
            self._disarm()  # the request is in (or the connection is done)

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def on_response_complete(self) -> None:
        if self.conn.their_state is h11.SEND_BODY and not self.transport.is_closing():
            # answered before the body was read (413, 401 on an unsigned body, 503): the rest
            # of the body is never read; the connection closes once the response is written
            self._disarm()
            self.transport.close()
            return
        super().on_response_complete()

    def _arm(self) -> None:
        if self._read_timer is None and not self.transport.is_closing():
            self._read_timer = self.loop.call_later(self.read_timeout_s, self._expired)

    def _disarm(self) -> None:
        if self._read_timer is not None:
            self._read_timer.cancel()
            self._read_timer = None

    def _expired(self) -> None:
        self._read_timer = None
        if self.conn.their_state in (h11.IDLE, h11.SEND_BODY) and not self.transport.is_closing():
            self.logger.warning(
                "closed a connection still sending its request after %gs", self.read_timeout_s
            )
            self.transport.close()


def protocol_with_deadline(read_timeout_s: float) -> type[DeadlineH11Protocol]:
    """The protocol class uvicorn instantiates per connection, with this deadline."""
    return type("DeadlineH11", (DeadlineH11Protocol,), {"read_timeout_s": read_timeout_s})


class BufferBudget:
    """Bytes of request bodies held by the app across all connections, at most ``limit``.

    Used from the one event loop only. ``take`` waits for room until a deadline (a burst of
    large bodies delays the others rather than failing them) and says whether it got it.
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.held = 0
        self.peak = 0
        self._freed: asyncio.Condition | None = None

    def _condition(self) -> asyncio.Condition:
        if self._freed is None:  # made inside the running loop, on first use
            self._freed = asyncio.Condition()
        return self._freed

    async def take(self, n: int, deadline: float) -> bool:
        """Reserve ``n`` bytes, waiting for room until ``deadline`` (``time.monotonic()``)."""
        if n > self.limit:
            return False
        freed = self._condition()
        async with freed:
            while self.held + n > self.limit:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                try:
                    await asyncio.wait_for(freed.wait(), left)
                except TimeoutError:
                    return False
            self.held += n
            self.peak = max(self.peak, self.held)
            return True

    async def give(self, n: int) -> None:
        """Release ``n`` bytes taken before."""
        if n <= 0:
            return
        freed = self._condition()
        async with freed:
            self.held -= n
            freed.notify_all()


def uvicorn_config(app: Any, settings: Settings, *, host: str, port: int, **extra: Any) -> Any:
    """The uvicorn configuration ``attune serve`` runs the app under (tests and benchmarks
    use it too, so that they measure the limits that are deployed)."""
    return uvicorn.Config(
        app,
        host=host,
        port=port,
        http=protocol_with_deadline(settings.read_timeout_s),
        limit_concurrency=settings.max_connections,
        timeout_keep_alive=int(settings.keepalive_timeout_s),
        h11_max_incomplete_event_size=MAX_HEAD_BYTES,
        **extra,
    )
