"""Open and build a campaign: the one wiring of ledger, forge, executor, agent and registry.

``attune tune`` and GitHub mode both call ``open_campaign`` (validate the request, write
``campaign_opened``) and ``build_campaign`` (everything a ``Campaign`` needs, from the ledger
alone, so building again after a restart gives the same campaign). The agents and the campaign
defaults are defined here and nowhere else.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bot.agents.model_guided import ModelGuidedAgent
from bot.agents.random_search import RandomSearchAgent
from bot.agents.rules import RulesAgent
from bot.campaign.context import Progress
from bot.campaign.loop import Campaign
from bot.interfaces import Agent, Executor, Forge
from bot.lessons.campaign import lessons_for
from bot.state.fold import campaign_state
from bot.state.model import CampaignParams
from gate import sequential
from gate.budget import check_budget_hours
from gate.errors import AttuneError
from gate.ledger import Ledger
from gate.recipe import parse_recipe
from gate.registry import Registry, load_registry
from runners.adapters import get_adapter
from runners.bench import DEFAULT_STEPS, DEFAULT_WARMUP


@dataclass(frozen=True)
class AgentContext:
    """What an agent may need besides its view: the campaign's ledger (the Claude agent
    records its model calls there), its name, registry and framework version."""

    ledger: Ledger
    campaign: str
    registry: Registry
    framework: str
    framework_version: str


def _claude(context: AgentContext) -> Agent:
    from bot.agents.claude.factory import claude_agent  # anthropic only when asked for

    return claude_agent(
        context.ledger,
        context.campaign,
        context.registry,
        context.framework,
        context.framework_version,
    )


def _tpe() -> Agent:
    from bot.agents.tpe import TPEAgent  # optuna only when asked for

    return TPEAgent()


AGENTS: dict[str, Callable[[AgentContext], Agent]] = {
    "rules": lambda context: RulesAgent(),
    "claude": _claude,
    "random": lambda *_: RandomSearchAgent(),  # baselines: docs/tuner-bench.md
    "tpe": lambda *_: _tpe(),
    "model": lambda *_: ModelGuidedAgent(),  # the calibrated step-time model's search
}
"""``--agent`` / ``agent=`` names and how each agent is made."""


def agent_problem(agent: str) -> str | None:
    """Why ``agent`` cannot tune here (unknown, or the Claude agent without its key)."""
    if agent not in AGENTS:
        return f"unknown agent {agent!r} (known: {', '.join(AGENTS)})"
    if agent == "claude":
        from bot.agents.claude.settings import load_settings

        try:
            load_settings()
        except AttuneError as exc:
            return str(exc)
    return None


CALIBRATION_RUNS = 5
MAX_TRIALS = 20

__all__ = ["AGENTS", "CALIBRATION_RUNS", "DEFAULT_STEPS", "DEFAULT_WARMUP", "MAX_TRIALS"]

ExecutorFactory = Callable[[Registry, CampaignParams], Executor]
"""(the registry of the recipe's framework, the campaign's parameters) -> its executor."""


def check_pairs(max_pairs: int, confirm_pairs: int) -> None:
    """The judgement's caps: A/B off (0) or at least the paired test's smallest sample."""
    if max_pairs != 0 and max_pairs < sequential.MIN_PAIRS:
        raise AttuneError(
            f"--max-pairs must be 0 (no A/B re-measurement) or at least {sequential.MIN_PAIRS}"
            f" (the paired test's smallest sample), got {max_pairs}"
        )
    if confirm_pairs < 0:
        raise AttuneError(f"--confirm-pairs must be 0 or more, got {confirm_pairs}")


def check_request(budget_hours: float, steps: int, warmup: int) -> None:
    """A campaign's budget and run length; bad ones raise AttuneError (called before the work
    directory is made, so a refused request leaves nothing behind)."""
    check_budget_hours(budget_hours, what="the budget")
    if steps < 2 or not 0 <= warmup < steps:
        raise AttuneError(
            f"--steps must exceed --warmup (at least one scored step), --steps at least 2 and "
            f"--warmup 0 or more, got --steps {steps} and --warmup {warmup}"
        )


def open_campaign(
    ledger: Ledger,
    name: str,
    *,
    recipe_text: str,
    recipe_path: str,
    budget_hours: float,
    steps: int = DEFAULT_STEPS,
    warmup: int = DEFAULT_WARMUP,
    agent: str = "rules",
    calibration_runs: int = CALIBRATION_RUNS,
    max_trials: int = MAX_TRIALS,
    origin: dict[str, Any] | None = None,
    backend: str | None = None,
    lessons: bool = True,
    max_pairs: int = sequential.MAX_PAIRS,
    confirm_pairs: int = sequential.CONFIRM_PAIRS,
) -> CampaignParams:
    """Validate a request and write ``campaign_opened``; bad input raises AttuneError and
    writes nothing. ``origin`` holds GitHub mode's fields (repo, pr, head_sha, by, ...)."""
    check_request(budget_hours, steps, warmup)
    problem = agent_problem(agent)
    if problem:
        raise AttuneError(problem)
    check_pairs(max_pairs, confirm_pairs)
    if ledger.events(name):
        raise AttuneError(f"campaign {name} exists already; resume it instead")
    recipe = parse_recipe(recipe_text, path=recipe_path)
    get_adapter(recipe.framework, path=recipe_path).resolve(recipe)  # bad input fails here
    params = CampaignParams(
        baseline=recipe.name,
        recipe_path=recipe_path,
        recipe_text=recipe_text,
        framework=recipe.framework,
        budget_device_hours=budget_hours,
        steps=steps,
        warmup=warmup,
        agent=agent,
        calibration_runs=calibration_runs,
        max_trials=max_trials,
        backend=backend,
        lessons=lessons,
        max_pairs=max_pairs,
        confirm_pairs=confirm_pairs,
        **(origin or {}),
    )
    ledger.append(name, "campaign_opened", params.model_dump(exclude_none=True))
    return params


def build_campaign(
    ledger: Ledger,
    name: str,
    *,
    forge: Forge,
    executor: ExecutorFactory,
    progress: Progress | None = None,
    stop_requested: Callable[[], bool] | None = None,
    agent: Agent | None = None,
    lessons_dir: Path | None = None,
) -> Campaign:
    """The campaign ``name`` of ``ledger`` with the agent it was opened with (or ``agent``)."""
    params = campaign_state(ledger, name).params
    if params is None:
        raise AttuneError(f"no campaign {name} in the ledger")
    recipe = parse_recipe(params.recipe_text, path=params.recipe_path)
    effective = get_adapter(recipe.framework).resolve(recipe)
    registry = load_registry(effective.framework, effective.framework_version)
    if agent is None and params.agent not in AGENTS:
        raise AttuneError(f"campaign {name} asks for agent {params.agent!r}, which is not here")
    return Campaign(
        name=name,
        ledger=ledger,
        forge=forge,
        executor=executor(registry, params),
        agent=agent
        or AGENTS[params.agent](
            AgentContext(ledger, name, registry, effective.framework, effective.framework_version)
        ),
        registry=registry,
        progress=progress,
        stop_requested=stop_requested,
        lessons=lessons_for(params, effective, recipe, lessons_dir),
    )
