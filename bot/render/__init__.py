"""All user-facing text: terminal tables, PR bodies, comments and check summaries
(``bot/render/text.py``), and every reply the GitHub App posts (``bot/render/replies.py``)."""

from bot.render.text import (
    CAMPAIGN_COMMENT,
    CAMPAIGN_MARKER,
    CANDIDATE_BODY,
    CLASS_STYLE,
    CLOSING_MARKER,
    COST_COMMENT,
    COST_MARKER,
    VERDICT_STYLE,
    campaign_comment,
    candidate_body,
    cost_comment,
    cost_line,
    gate_summary,
    gate_table,
    ledger_table,
    noise_line,
    trial_line,
    verdict_line,
)

__all__ = [
    "CAMPAIGN_COMMENT",
    "CAMPAIGN_MARKER",
    "CANDIDATE_BODY",
    "CLASS_STYLE",
    "CLOSING_MARKER",
    "COST_COMMENT",
    "COST_MARKER",
    "VERDICT_STYLE",
    "campaign_comment",
    "candidate_body",
    "cost_comment",
    "cost_line",
    "gate_summary",
    "gate_table",
    "ledger_table",
    "noise_line",
    "trial_line",
    "verdict_line",
]
