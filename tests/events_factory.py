"""Valid ledger payloads for tests: every kind with plausible defaults, any field overridden
(``payload``), and ``EventLog``, a campaign's events as the ledger hands them back, for the
pure functions that read events without a ledger file."""

from __future__ import annotations

from typing import Any

from gate.ledger import EventKind, LedgerEvent

T0 = 1_700_000_000.0
"""When an ``EventLog``'s campaign starts (Unix time): its n-th event is at T0 + n."""

DEFAULTS: dict[str, dict[str, Any]] = {
    "campaign_opened": {
        "baseline": "base",
        "recipe_path": "recipes/base.yaml",
        "recipe_text": "framework: embedded\nname: base\nconfig: {}\n",
        "framework": "embedded",
        "budget_device_hours": 0.05,
        "steps": 12,
        "warmup": 3,
        "agent": "rules",
        "calibration_runs": 5,
        "max_trials": 20,
    },
    "forge_ready": {"tuned_pr": 1, "tuned_branch": "tune/base", "base_sha": "0" * 40},
    "noise_calibrated": {
        "runs": 5,
        "mean": 1000.0,
        "std": 10.0,
        "cv": 0.01,
        "threshold": 0.03,
        "scores": [990.0, 1000.0, 1010.0, 995.0, 1005.0],
    },
    "checks_calibrated": {
        "step1_loss": 5.5,
        "step1_grad_norm": 1.2,
        "grad_norm_tolerance": 0.02,
        "losses": [5.5, 5.3, 5.1],
        "loss_band": [0.002, 0.002, 0.003],
        "runs": ["baseline-1", "baseline-2", "layout-1"],
        "variants": ["micro_batch_size 1 -> 2"],
        "notes": [],
    },
    "profile_requested": {"trial": "profile-1", "reason": "unclear", "incumbent": "baseline"},
    "candidate_proposed": {
        "trial": "c1",
        "n": 1,
        "title": "attune: threads: 1 -> 2",
        "lever": ["threads"],
        "changes": {"threads": [1, 2]},
        "coupled": False,
        "bottleneck": "compute",
        "mechanism": "more intra-op threads",
        "expected_gain_pct": 40.0,
        "sources": ["runners/embedded/config.py:1"],
        "recipe_text": "framework: embedded\nname: base\nconfig: {threads: 2}\n",
    },
    "pr_opened": {"trial": "c1", "pr": 2, "branch": "attune/x/1", "head_sha": "1" * 40},
    "gate_checked": {
        "trial": "c1",
        "recipe": "base@c1",
        "fingerprint": "f" * 16,
        "verdict": "allow",
        "findings": [],
    },
    "launch_refused": {
        "trial": "c1",
        "fingerprint": "f" * 16,
        "reason": "budget",
        "message": "the budget cannot cover it",
    },
    "trial_started": {
        "trial": "baseline-1",
        "role": "calibration",
        "recipe": "base",
        "fingerprint": "f" * 16,
        "devices": 1,
        "forecast_device_seconds": 60.0,
        "profile": False,
    },
    "trial_launched": {
        "trial": "baseline-1",
        "recipe": "base",
        "framework": "embedded",
        "fingerprint": "f" * 16,
        "steps": 12,
        "warmup": 3,
        "devices": 1,
        "profile_trace": None,
        "handle": {"backend": "local", "pid": 1, "workdir": "trials/baseline-1", "allocated_at": 0},
    },
    "trial_finished": {
        "trial": "baseline-1",
        "recipe": "base",
        "fingerprint": "f" * 16,
        "status": "ok",
        "score": 1000.0,
        "step1_loss": 5.0,
        "error": None,
        "allocated_at": 100.0,
        "released_at": 110.0,
        "devices": 1,
        "device_seconds": 10.0,
    },
    "trial_abandoned": {"trial": "baseline-1", "reason": "the bot stopped before launching it"},
    "trial_judged": {"trial": "c1", "decision": "close", "reason": "+1.0% does not beat 3.0%"},
    "pr_merged": {"trial": "c1", "pr": 2, "sha": "2" * 40},
    "pr_closed": {"trial": "c1", "pr": 2},
    "campaign_stopped": {"reason": "exhausted", "evidence": []},
    "campaign_resumed": {"by": "maintainer"},
    "lessons_proposed": {"lessons": ["embedded-threads-up"], "pr": 9, "branch": "attune/x/lessons"},
    "model_called": {
        "conversation": "d0",
        "call": 0,
        "model": "claude-sonnet-4-6",
        "input_tokens": 1200,
        "output_tokens": 300,
        "stop_reason": "tool_use",
        "tool_calls": ["get_history"],
        "cost_usd": 0.0081,
        "content": [{"type": "tool_use", "id": "toolu_1", "name": "get_history", "input": {}}],
    },
    "agent_assumption": {
        "conversation": "d0",
        "call": 1,
        "question": "Should I optimise for memory or speed?",
        "answer": "Take the default and record the assumption.",
    },
    "tool_started": {
        "conversation": "d0",
        "call": 0,
        "tool_use_id": "toolu_1",
        "name": "get_history",
    },
    "tool_finished": {
        "conversation": "d0",
        "call": 0,
        "tool_use_id": "toolu_1",
        "name": "get_history",
        "outcome": "ok",
        "seconds": 0.01,
    },
    "proposal_refused": {
        "title": "attune: data_parallel_size: 1 -> 8",
        "changes": {"data_parallel_size": [1, 8]},
        "fingerprint": "f" * 24,
        "reason": "resources",
        "message": "too big for this machine: needs 8 ranks x 1 thread = 8 cores",
    },
    "prediction_made": {
        "trial": "c1",
        "hardware": "h100-sxm",
        "model_version": "perfmodel-1",
        "tokens_per_s_per_device": 7000.0,
        "step_time_s": 9.36,
        "breakdown": {"compute": 8.0, "tp": 1.0, "other": 0.36},
        "tokens_per_step": 524288,
        "world": 8,
        "peak_memory_bytes": 60000000000,
        "fits": True,
        "calibrated_tokens_per_s_per_device": 6500.0,
        "factors": {"compute": 1.08, "communication": 1.0, "bubble": 1.0},
        "band": 0.08,
        "calibration_runs": 3,
    },
    "conversation_trimmed": {
        "conversation": "d0",
        "call": 5,
        "blocks": 3,
        "chars_before": 400000,
        "chars_after": 150000,
    },
    "run_requested": {
        "trial": "c1-a1",
        "phase": "remeasure",
        "of": "c1",
        "arm": "incumbent",
        "recipe_of": "baseline",
        "pair": 1,
    },
    "noise_recalibrated": {
        "incumbent": "c1",
        "keys": ["threads"],
        "runs": 5,
        "mean": 1500.0,
        "std": 15.0,
        "cv": 0.01,
        "threshold": 0.03,
        "scores": [1485.0, 1500.0, 1515.0, 1490.0, 1510.0],
        "trials": ["c1", "recal-c1-1", "recal-c1-2", "recal-c1-3", "recal-c1-4"],
    },
    "confirmation_requested": {
        "winner": "c1",
        "pairs": 3,
        "reason": "exhausted",
        "evidence": ["no lever left"],
    },
    "confirmation_finished": {
        "winner": "c1",
        "pairs": 3,
        "speedup": 1.5,
        "low": 1.4,
        "high": 1.6,
        "level": 0.95,
        "trials": ["confirm-a1", "confirm-b1", "confirm-a2", "confirm-b2", "confirm-a3"],
    },
}


def payload(kind: str, **over: Any) -> dict[str, Any]:
    """A valid ``kind`` payload with ``over`` applied."""
    return {**DEFAULTS[kind], **over}


class EventLog:
    """One campaign's events in order, each a ``payload`` with seq and time as the ledger would
    give them (the hash chain is not computed: nothing here verifies it)."""

    def __init__(self, campaign: str = "c1") -> None:
        self.campaign = campaign
        self.events: list[LedgerEvent] = []

    def add(self, kind: EventKind, **over: Any) -> EventLog:
        """Append a ``kind`` event: its defaults with ``over`` applied."""
        seq = len(self.events) + 1
        event = LedgerEvent(
            seq=seq,
            time=T0 + seq,
            campaign=self.campaign,
            kind=kind,
            payload=payload(kind, **over),
            prev_hash="0" * 64,
            hash="0" * 64,
        )
        self.events.append(event)
        return self

    def run(self, seconds: float, *, devices: int = 1, **over: Any) -> EventLog:
        """Append the ``trial_finished`` of a run that held ``devices`` for ``seconds`` from T0."""
        return self.add(
            "trial_finished",
            allocated_at=T0,
            released_at=T0 + seconds,
            devices=devices,
            device_seconds=seconds * devices,
            **over,
        )
