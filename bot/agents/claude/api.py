"""One Messages API call with attune's own retries: the SDK's are off (``max_retries=0``) so
every attempt is counted in the ledger and the limit is ours.

429, 5xx, 529 (overloaded), timeouts and dropped connections are retried with exponential
backoff and full jitter, honouring ``retry-after``; past ``settings.retries`` the call raises
``AgentUnavailable`` and the campaign stops, resumable. Other errors (a bad key, a bad
request) are not retried.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from typing import Any

import anthropic
from anthropic.types import Message

from bot.agents.claude.settings import ClaudeSettings
from gate.errors import AttuneError

log = logging.getLogger("attune.agent")


class AgentUnavailable(AttuneError):
    """The API could not answer within the retries, or refused for good. The agent turns it
    into a ``Stop`` (``agent_error``): a resumed campaign asks again."""


def make_client(settings: ClaudeSettings) -> anthropic.Anthropic:
    return anthropic.Anthropic(
        api_key=settings.api_key,
        base_url=settings.base_url,
        max_retries=0,
        timeout=settings.timeout_s,
    )


def backoff_s(
    attempt: int, retry_after: float | None, *, base: float, cap: float, rand: float
) -> float:
    """Seconds to wait before attempt ``attempt + 1``: the server's ``retry-after`` when it
    gave one, else full jitter over ``base * 2**attempt``; never above ``cap``."""
    if retry_after is not None and retry_after >= 0:
        return float(min(retry_after, cap))
    return float(min(cap, base * 2**attempt) * rand)


def _retry_after(exc: anthropic.APIStatusError) -> float | None:
    value = exc.response.headers.get("retry-after")
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


def _retryable(exc: Exception) -> bool:
    if isinstance(exc, anthropic.APIConnectionError):  # timeouts included
        return True
    if isinstance(exc, anthropic.APIStatusError):
        return exc.status_code in (408, 409, 429) or exc.status_code >= 500
    return False


def _describe(exc: Exception) -> str:
    if isinstance(exc, anthropic.APIStatusError):
        body = exc.body if isinstance(exc.body, dict) else {}
        error = body.get("error") if isinstance(body.get("error"), dict) else {}
        kind = (error or {}).get("type", "error")
        message = (error or {}).get("message", str(exc))
        return f"HTTP {exc.status_code} {kind}: {message}"
    return f"{type(exc).__name__}: {exc}"


def create_message(
    client: anthropic.Anthropic,
    settings: ClaudeSettings,
    request: dict[str, Any],
    *,
    sleep: Callable[[float], None] = time.sleep,
) -> tuple[Message, int]:
    """The model's answer and the attempts it took."""
    attempt = 0
    while True:
        try:
            return client.messages.create(**request), attempt + 1
        except (anthropic.APIStatusError, anthropic.APIConnectionError) as exc:
            what = _describe(exc)
            if not _retryable(exc):
                raise AgentUnavailable(f"the Messages API refused the call: {what}") from None
            if attempt >= settings.retries:
                raise AgentUnavailable(
                    f"the Messages API failed {attempt + 1} times; last: {what}"
                ) from None
            after = _retry_after(exc) if isinstance(exc, anthropic.APIStatusError) else None
            wait = backoff_s(
                attempt,
                after,
                base=settings.backoff_s,
                cap=settings.backoff_cap_s,
                rand=random.random(),
            )
            log.warning("model call failed (%s); retry %d in %.1fs", what, attempt + 1, wait)
            sleep(wait)
            attempt += 1
