"""What a model call costs, in US dollars, from the usage the API returns.

Prices are USD per million tokens, from Anthropic's pricing page
(https://platform.claude.com/docs/en/about-claude/pricing, read 2026): base input, output;
a 5-minute cache write costs 1.25x the base input and a cache hit 0.1x.
"""

from __future__ import annotations

import math
from typing import Any

from pydantic import BaseModel

CACHE_WRITE = 1.25
CACHE_READ = 0.1


class Price(BaseModel):
    """USD per million tokens."""

    input: float
    output: float


PRICES: dict[str, Price] = {
    "claude-opus-4-6": Price(input=5.0, output=25.0),
    "claude-opus-4-5": Price(input=5.0, output=25.0),
    "claude-opus-4-5-20251101": Price(input=5.0, output=25.0),
    "claude-sonnet-4-6": Price(input=3.0, output=15.0),
    "claude-sonnet-4-5": Price(input=3.0, output=15.0),
    "claude-haiku-4-5": Price(input=1.0, output=5.0),
    "claude-haiku-4-5-20251001": Price(input=1.0, output=5.0),
}


class Usage(BaseModel):
    """The token counts of one response (the API's ``usage``)."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_creation_input_tokens: int = 0
    cache_read_input_tokens: int = 0


def cost_usd(price: Price, usage: Usage) -> float:
    """Dollars one call cost."""
    per = 1_000_000
    return (
        usage.input_tokens * price.input / per
        + usage.cache_creation_input_tokens * price.input * CACHE_WRITE / per
        + usage.cache_read_input_tokens * price.input * CACHE_READ / per
        + usage.output_tokens * price.output / per
    )


INPUT_FIELDS = ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")


def validated_usage(raw: Any, *, request_chars: int, max_tokens: int) -> tuple[Usage, str | None]:
    """The usage to charge for a response, and why the API's numbers were not believed.

    Each count must be a whole number from 0; the input counts together at most the
    characters sent (a token is at least one character of the request's JSON), the output at
    most ``max_tokens``. A count that is missing or not a number, negative or past its bound
    is charged at its bound instead: a server can make the agent pay for at most what it
    could have used, never less than nothing."""
    problems: list[str] = []
    counts: dict[str, int] = {}

    def take(name: str, bound: int) -> int:
        value = getattr(raw, name, None) if not isinstance(raw, dict) else raw.get(name)
        if value is None and name not in ("input_tokens", "output_tokens"):
            return 0  # the cache counts are absent when caching was not used
        if not isinstance(value, int | float) or isinstance(value, bool):
            problems.append(f"{name} {value!r} is not a count")
            return bound
        if not math.isfinite(value) or value < 0 or value != int(value):
            problems.append(f"{name} {value!r} is not a count")
            return bound
        if value > bound:
            problems.append(f"{name} {value!r} is over its bound {bound:,}")
            return bound
        return int(value)

    for name in INPUT_FIELDS:
        counts[name] = take(name, request_chars)
    counts["output_tokens"] = take("output_tokens", max_tokens)
    total_in = sum(counts[n] for n in INPUT_FIELDS)
    if total_in > request_chars:
        problems.append(f"input counts total {total_in:,}, over the {request_chars:,} sent")
        scale = request_chars / total_in
        for name in INPUT_FIELDS:
            counts[name] = math.ceil(counts[name] * scale)
    usage = Usage(**counts)
    return usage, "; ".join(problems) or None
