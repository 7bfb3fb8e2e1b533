"""The four interfaces the campaign is written against: Forge, Executor, Backend, Agent.

The embedded default implements each locally (git + SQLite forge, in-process gate and local
subprocess runner, local backend, rules agent); GitHub mode plugs in other implementations
without touching ``bot/campaign/loop.py``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Literal, Protocol

from pydantic import BaseModel, Field

from bot.lessons.view import LessonView
from bot.probe import ModelView as ModelView  # re-exported: what agents are given
from bot.probe import Probe as Probe
from gate.budget import LaunchRefusal
from gate.errors import AttuneError
from gate.events import Role as Role  # re-exported: why a trial runs
from gate.models import EffectiveConfig, GateReport, ProfileBreakdown, Recipe, TrialResult
from runners.bench import Launch
from runners.local import Backend as Backend  # defined beside the backends

PRState = Literal["open", "merged", "closed"]


class CheckResult(BaseModel):
    """A check run on a pull request (e.g. ``attune/gate``)."""

    name: str
    conclusion: Literal["success", "failure", "neutral"]
    summary: str


class PullRequest(BaseModel):
    """A pull request record as a forge shows it."""

    number: int
    title: str
    body: str
    base: str
    """Branch it merges into."""
    head: str
    """Branch it brings."""
    state: PRState
    labels: list[str] = Field(default_factory=list)
    checks: list[CheckResult] = Field(default_factory=list)
    head_sha: str
    merged_sha: str | None = None


class Comment(BaseModel):
    id: int
    pr: int
    body: str
    marker: str | None = None
    """Hidden marker of a comment the bot edits in place (``<!-- attune:... -->``)."""


def marker_tag(name: str) -> str:
    """The hidden first line of a marked comment."""
    return f"<!-- {name} -->"


def split_marker(text: str) -> tuple[str | None, str]:
    """(marker name, body) of a comment's stored text: a first line ``<!-- name -->`` is the
    marker, and the body is what follows it. Every forge returns comments this way."""
    first, _, rest = text.partition("\n")
    if first.startswith("<!-- ") and first.endswith(" -->"):
        return marker_name(first), rest
    return None, text


class ForgeError(AttuneError):
    """A forge operation that cannot be done: git failed, a PR is missing, the base moved."""


class HeadMoved(ForgeError):
    """A branch the campaign pinned (the tuned head, a candidate's head) moved under it: what
    would run or be merged is no longer what was screened or benchmarked."""


def marker_name(marker: str) -> str:
    """``attune:cost`` from ``attune:cost`` or ``<!-- attune:cost -->``."""
    inner = re.fullmatch(r"\s*<!--\s*(.*?)\s*-->\s*", marker)
    return inner.group(1) if inner else marker.strip()


class Forge(Protocol):
    """Pull requests, comments, checks and merges. Every write is idempotent, so a resumed
    campaign can repeat the last action safely."""

    def open_tuned(self, recipe_path: str, recipe_text: str, title: str, body: str) -> PullRequest:
        """The pull request being tuned: its head branch holds the recipe. Returns the
        existing one when called again."""

    def head_sha(self, branch: str) -> str:
        """Current commit of ``branch``."""

    def open_candidate(
        self,
        *,
        branch: str,
        base: str,
        base_sha: str,
        recipe_path: str,
        recipe_text: str,
        title: str,
        body: str,
        labels: list[str],
    ) -> PullRequest:
        """Branch ``branch`` from ``base_sha`` (the campaign's pinned head of ``base``) with one
        commit writing the recipe, and a pull request into ``base``. Refuses (ForgeError) when
        ``base`` no longer points at ``base_sha``. Returns the existing pull request when the
        branch already has one."""

    def get(self, number: int) -> PullRequest: ...

    def pulls(self) -> list[PullRequest]:
        """Every pull request, by number."""

    def set_check(self, number: int, check: CheckResult) -> None:
        """Add or replace the check of that name."""

    def merge(self, number: int, *, expected_base_sha: str, expected_head_sha: str) -> str:
        """Squash-merge the commit ``expected_head_sha`` (the one benchmarked) into the base
        branch and return the new base head. Refuses (ForgeError) when the base head is not
        ``expected_base_sha`` or the pull request's head moved; no-op when already merged."""

    def close(self, number: int) -> None:
        """Close without merging; no-op when already closed."""

    def comment(self, number: int, body: str, *, marker: str | None = None) -> Comment:
        """Post a comment; with a marker, edit the existing comment carrying it instead."""

    def comments(self, number: int) -> list[Comment]: ...

    def diff(self, number: int) -> str:
        """Unified diff of the pull request (base...head)."""


class Executor(Protocol):
    """Gate and bench trials, writing each transition to the ledger before acting on it."""

    workdir: Path
    """Where trial directories (logs, results, launch handles) live."""

    def resolve(self, recipe: Recipe) -> EffectiveConfig: ...

    def forecast(self, effective: EffectiveConfig) -> float:
        """Device-seconds a run of ``effective`` is expected to cost (its devices and, with a
        step-time prediction, its predicted step time against the runs measured)."""

    def memory_verdict(self, effective: EffectiveConfig) -> tuple[bool, str] | None:
        """(fits, why) from the memory model; None without a model or a known capacity."""

    def admit(self, trial: str, effective: EffectiveConfig) -> LaunchRefusal | None:
        """Budget and failed-rerun checks; a refusal is recorded."""

    def gate(
        self, trial: str, candidate: Recipe, *, baseline: EffectiveConfig
    ) -> tuple[EffectiveConfig | None, GateReport]:
        """The pre-launch gate, recorded as ``gate_checked``; no config for a candidate the
        framework refuses (rejected with an ``invalid`` finding)."""

    def launch(
        self,
        trial: str,
        role: Role,
        recipe: Recipe,
        effective: EffectiveConfig,
        *,
        profile: bool = False,
    ) -> Launch:
        """Record ``trial_started``, start the run, record its handle."""

    def finish(self, trial: str, launch: Launch, *, reconciled: bool = False) -> TrialResult:
        """Wait for the run (even one an earlier bot started) and charge it."""


class Proposal(BaseModel):
    """One candidate: one lever (or one coupled parallel split) and why."""

    lever: list[str]
    """Registry keys changed: one, or several for a coupled split."""
    changes: dict[str, tuple[object, object]]
    """key -> (incumbent value, candidate value)."""
    coupled: bool = False
    """True when several keys move together as one parallel split."""
    bottleneck: str
    """compute, communication, cpu or idle: what the profile says limits the step."""
    mechanism: str
    """Why this change should relieve that bottleneck."""
    expected_gain_pct: float
    """Expected speedup of tokens/s/device, in percent."""
    sources: list[str]
    """``path:line`` the agent read for each lever (from the registry)."""
    lessons_used: list[str] = Field(default_factory=list)
    """Ids of the ``AgentView.lessons`` the hypothesis relies on."""

    @property
    def title(self) -> str:
        moves = ", ".join(
            f"{k}: {json.dumps(a)} -> {json.dumps(b)}" for k, (a, b) in self.changes.items()
        )
        return f"attune: {moves}"


class ProfileRequest(BaseModel):
    reason: str


class Stop(BaseModel):
    reason: Literal[
        "budget", "exhausted", "max_trials", "agent_error", "agent_spend_cap", "requested"
    ]
    """``agent_*``: the LLM agent's API failed past its retries or its spend cap is reached;
    ``requested``: ``attune stop`` interrupted the agent's tool call."""
    evidence: list[str]
    """What was considered and why nothing is left (one line per lever option)."""


class HistoryItem(BaseModel):
    """What became of one earlier proposal."""

    trial: str
    changes: dict[str, tuple[object, object]]
    status: str | None
    """Run status (ok, failed, oom, timeout, nan); None when never launched."""
    decision: str | None
    """merge or close."""
    gain: float | None
    """Relative score change vs the incumbent of its time: the mean of its A/B pairs when it
    was re-measured, else its one run's."""
    reason: str = ""


class AgentView(BaseModel):
    """What an agent sees: the incumbent, its profile, the history, the budget."""

    framework: str
    incumbent: str
    incumbent_values: dict[str, object]
    """The incumbent's effective configuration."""
    profile: ProfileBreakdown | None
    """Latest profile of the incumbent, if any."""
    history: list[HistoryItem]
    layout_sources: dict[str, str]
    """Registry layout keys -> the source line that consumes them."""
    threshold: float
    budget_left_s: float
    forecast_s: float
    """Device-seconds the next trial is expected to cost."""
    cores: int
    """CPU cores (or devices) the machine offers to one trial."""
    lessons: list[LessonView] = Field(default_factory=list)
    """Accepted lessons of the experience bank whose scope matches the campaign; empty with
    ``--no-lessons``."""
    model: ModelView | None = None
    """The calibrated step-time model; None where the campaign has none."""


ProbeOf = Callable[[dict[str, object]], "Probe | None"]
"""The incumbent with these changes, probed: None when the framework's validation rejects it."""


class Agent(Protocol):
    """Proposes the next step of a campaign."""

    name: str

    def decide(
        self, view: AgentView, probe_of: ProbeOf, tried: set[str]
    ) -> Proposal | ProfileRequest | Stop:
        """One lever (or coupled split), a profile request, or a stop with evidence.
        ``tried`` holds the fingerprints of every configuration already launched."""
