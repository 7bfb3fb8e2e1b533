"""``campaign_opened``: what a campaign was asked to do, the first event of every campaign;
``proposal_refused``: a move refused before it became a candidate."""

from __future__ import annotations

from typing import Any

from gate.event_base import Event
from gate.sequential import CONFIRM_PAIRS, MAX_PAIRS


class CampaignOpened(Event):
    """What a campaign was asked to do (``CampaignParams`` in the fold)."""

    KIND = "campaign_opened"
    baseline: str
    """The baseline recipe's name."""
    recipe_path: str
    """Path of the recipe inside the forge repository."""
    recipe_text: str
    """The recipe as written (YAML)."""
    framework: str
    budget_device_hours: float
    steps: int
    """Steps per trial, warm-up included."""
    warmup: int
    """Leading steps not scored."""
    agent: str
    calibration_runs: int
    max_trials: int
    """Candidates at most."""
    repo: str | None = None
    """GitHub mode: ``owner/name`` of the repository."""
    pr: int | None = None
    """GitHub mode: the tuned pull request."""
    installation: int | None = None
    """GitHub mode: the App installation that acts on the repository."""
    by: str | None = None
    """GitHub mode: who commented ``/attune tune``."""
    head_sha: str | None = None
    """GitHub mode: the tuned pull request's head when the command was screened."""
    comment_id: int | None = None
    """GitHub mode: the comment that started the campaign (a command runs once per comment)."""
    backend: str | None = None
    """Where its trials run (``attune tune --backend``: ``slurm``, ``sim``); None: this machine."""
    simulation: dict[str, Any] | None = None
    """``--backend sim``: the SIMULATED cluster's parameters (seed, spread, cv, hang and crash
    rates, memory factor; ``runners.sim.truth.SimParams``). Its results are not measurements."""
    lessons: bool = True
    """Whether the agent reads the experience bank (``--no-lessons``: False, for ablation)."""
    max_pairs: int = MAX_PAIRS
    """A/B re-measurement's per-candidate cap on pairs (``--max-pairs``); 0: no re-measurement,
    a first run within the one-run bar closes."""
    confirm_pairs: int = CONFIRM_PAIRS
    """Pairs of the winner's final confirmation against the baseline (``--confirm-pairs``);
    0: none."""


class ProposalRefused(Event):
    """An agent's proposal refused before it became a candidate: it takes no candidate id (no
    ``c<n>``, no pull request), launches nothing and is charged nothing. Its fingerprint
    counts as tried, so the same move is not proposed again."""

    KIND = "proposal_refused"
    title: str
    changes: dict[str, tuple[Any, Any]]
    """Key -> (incumbent value, proposed value), as the agent proposed them."""
    fingerprint: str
    """The proposed recipe's effective-config fingerprint."""
    reason: str
    """``resources``: the run needs more cores or memory than the machine has;
    ``predicted_oom``: the memory model predicts it does not fit the device."""
    message: str
