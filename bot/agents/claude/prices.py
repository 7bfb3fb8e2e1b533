"""What a model call costs, in US dollars, from the usage the API returns.

Prices are USD per million tokens, from Anthropic's pricing page
(https://platform.claude.com/docs/en/about-claude/pricing, read 2026): base input, output;
a 5-minute cache write costs 1.25x the base input and a cache hit 0.1x.
"""

from __future__ import annotations

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
