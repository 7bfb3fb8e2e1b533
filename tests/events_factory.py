"""Valid ledger payloads for tests: every kind with plausible defaults, any field overridden."""

from __future__ import annotations

from typing import Any

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
}


def payload(kind: str, **over: Any) -> dict[str, Any]:
    """A valid ``kind`` payload with ``over`` applied."""
    return {**DEFAULTS[kind], **over}
