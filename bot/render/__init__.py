"""All user-facing text: terminal tables and lines (``bot/render/text.py``), pull-request
bodies, comments and check summaries (``bot/render/pull_request.py``), and every reply the
GitHub App posts (``bot/render/replies.py``)."""

from bot.render.pull_request import (
    CAMPAIGN_COMMENT,
    CAMPAIGN_MARKER,
    CANDIDATE_BODY,
    CLOSING_MARKER,
    COST_COMMENT,
    COST_MARKER,
    campaign_comment,
    candidate_body,
    cost_comment,
    gate_summary,
    harness_note,
    simulated_note,
)
from bot.render.text import (
    CLASS_STYLE,
    VERDICT_STYLE,
    GateTable,
    cost_line,
    gate_table,
    ledger_table,
    llm_line,
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
    "GateTable",
    "campaign_comment",
    "candidate_body",
    "cost_comment",
    "cost_line",
    "gate_summary",
    "gate_table",
    "harness_note",
    "ledger_table",
    "llm_line",
    "noise_line",
    "simulated_note",
    "trial_line",
    "verdict_line",
]
