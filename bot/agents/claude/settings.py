"""The Claude agent's settings, from the environment (read once, when a campaign builds it).

ANTHROPIC_API_KEY            required for ``--agent claude``; nothing else needs it
ANTHROPIC_BASE_URL           another endpoint speaking the Messages API (tests: a local one)
ATTUNE_AGENT_MODEL           model id (default below)
ATTUNE_AGENT_MAX_TOKENS      output tokens per call
ATTUNE_AGENT_SPEND_CAP_USD   LLM dollars a campaign may spend; past it the campaign stops
ATTUNE_AGENT_PRICE_USD       "input,output" USD per million tokens, for a model not in PRICES
ATTUNE_AGENT_TIMEOUT_S       seconds one HTTP attempt may take
ATTUNE_AGENT_RETRIES         attempts after the first on 429, 5xx, 529 and timeouts
ATTUNE_AGENT_TOOL_TIMEOUT_S  seconds a tool call that resolves candidates may take (reads: 15)
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from pydantic import BaseModel, Field, ValidationError

from bot.agents.claude.prices import PRICES, Price
from gate.errors import AttuneError

DEFAULT_MODEL = "claude-sonnet-4-6"
NO_KEY = (
    "the claude agent needs an Anthropic API key: export ANTHROPIC_API_KEY=<key> (create one "
    "at https://console.anthropic.com/settings/keys), or tune with the default agent "
    "(--agent rules), which needs none"
)


class ClaudeSettings(BaseModel):
    api_key: str = Field(min_length=1, repr=False)
    base_url: str | None = None
    model: str = DEFAULT_MODEL
    max_tokens: int = Field(4096, ge=256, le=64_000)
    spend_cap_usd: float = Field(5.0, gt=0)
    price: Price
    timeout_s: float = Field(120.0, gt=0)
    retries: int = Field(6, ge=0, le=20)
    backoff_s: float = Field(1.0, ge=0)
    """First backoff; doubled per attempt, jittered, capped at ``backoff_cap_s``."""
    backoff_cap_s: float = Field(60.0, ge=0)
    tool_timeout_s: float = Field(300.0, gt=0, le=3600)
    """Deadline of get_memory, propose and stop (they resolve candidates); reads have 15 s."""


_VARS = {
    "ANTHROPIC_BASE_URL": "base_url",
    "ATTUNE_AGENT_MODEL": "model",
    "ATTUNE_AGENT_MAX_TOKENS": "max_tokens",
    "ATTUNE_AGENT_SPEND_CAP_USD": "spend_cap_usd",
    "ATTUNE_AGENT_TIMEOUT_S": "timeout_s",
    "ATTUNE_AGENT_RETRIES": "retries",
    "ATTUNE_AGENT_BACKOFF_S": "backoff_s",
    "ATTUNE_AGENT_TOOL_TIMEOUT_S": "tool_timeout_s",
}


def load_settings(env: Mapping[str, str] | None = None) -> ClaudeSettings:
    """The settings, or an AttuneError naming the variable to fix."""
    env = os.environ if env is None else env
    key = env.get("ANTHROPIC_API_KEY", "").strip()
    if not key:
        raise AttuneError(NO_KEY)
    values: dict[str, object] = {"api_key": key}
    values.update({field: env[var] for var, field in _VARS.items() if env.get(var)})
    model = str(values.get("model", DEFAULT_MODEL))
    values["price"] = _price(model, env.get("ATTUNE_AGENT_PRICE_USD", ""))
    try:
        return ClaudeSettings.model_validate(values)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = str(first["loc"][0]) if first["loc"] else ""
        var = next((v for v, f in _VARS.items() if f == field), field)
        raise AttuneError(f"{var}: {first['msg']}") from None


def _price(model: str, override: str) -> Price:
    if override:
        try:
            inp, out = (float(x) for x in override.split(","))
        except ValueError:
            raise AttuneError(
                f"ATTUNE_AGENT_PRICE_USD must be 'input,output' USD per million tokens, "
                f"got {override!r}"
            ) from None
        return Price(input=inp, output=out)
    if model not in PRICES:
        raise AttuneError(
            f"no price for model {model!r} (known: {', '.join(PRICES)}): set "
            "ATTUNE_AGENT_PRICE_USD='input,output' (USD per million tokens) so the spend cap "
            "can be kept"
        )
    return PRICES[model]
