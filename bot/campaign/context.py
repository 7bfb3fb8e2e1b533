"""What every step of a campaign is written with: its collaborators, its state (folded from the
ledger at every read, never kept), its recipes, one benchmark run, and how it stops. The loop
(``bot/campaign/loop.py``) holds one ``CampaignContext`` and passes it to the step functions of
``candidates.py``, ``extra_runs.py`` and ``check_calibration.py``."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Protocol

from bot import render
from bot.interfaces import Agent, Executor, Forge, Role
from bot.lessons.view import LessonView
from bot.state.fold import campaign_state, fold
from bot.state.model import CampaignParams, CampaignState
from gate.errors import AttuneError
from gate.events import StopReason
from gate.ledger import Ledger, LedgerEvent
from gate.models import EffectiveConfig, Recipe
from gate.recipe import parse_recipe
from gate.registry import Registry


def anchor_line(events: list[LedgerEvent]) -> str:
    """The ledger's head as the campaign last wrote it, to keep outside the ledger file: the
    campaign comment and the report carry it, and ``attune ledger verify --anchor SEQ:HASH``
    catches a ledger cut off before it or rewritten and re-hashed at or before it."""
    if not events:
        return "Ledger anchor: none yet (the campaign has no event)."
    head = events[-1]
    anchor = f"{head.seq}:{head.hash}"
    return f"Ledger anchor: `{anchor}` (check with `attune ledger verify --anchor {anchor}`)."


class Progress(Protocol):
    """Where the campaign reports what it is doing (a live display, a log, nothing)."""

    def update(self, state: CampaignState, phase: str, detail: str = "") -> None: ...


class QuietProgress:
    def update(self, state: CampaignState, phase: str, detail: str = "") -> None:
        return None


class CampaignContext:
    """The collaborators and the primitives the campaign's steps are written with."""

    def __init__(
        self,
        *,
        name: str,
        ledger: Ledger,
        forge: Forge,
        executor: Executor,
        agent: Agent,
        registry: Registry,
        progress: Progress | None = None,
        cores: int | None = None,
        stop_requested: Callable[[], bool] | None = None,
        lessons: list[LessonView] | None = None,
    ) -> None:
        self.name = name
        self.ledger = ledger
        self.forge = forge
        self.executor = executor
        self.agent = agent
        self.registry = registry
        self.progress = progress or QuietProgress()
        self.cores = cores or os.cpu_count() or 1
        self.stop_requested = stop_requested or (lambda: False)
        """Polled between steps: True stops the campaign (``/attune stop``)."""
        self.lessons = lessons or []
        """The experience bank's accepted lessons that match the campaign (``bot.lessons.bank``)."""

    # --- state ---

    def state(self) -> CampaignState:
        return campaign_state(self.ledger, self.name)

    def params(self, state: CampaignState) -> CampaignParams:
        if state.params is None:
            raise AttuneError(f"campaign {self.name!r} has no campaign_opened event")
        return state.params

    def recipe(self, text: str, trial: str) -> Recipe:
        params = self.params(self.state())
        recipe = parse_recipe(text, path=f"{params.recipe_path}@{trial}")
        return recipe.model_copy(update={"name": f"{params.baseline}@{trial}"})

    def baseline_effective(self, state: CampaignState) -> EffectiveConfig:
        return self.executor.resolve(self.recipe(self.params(state).recipe_text, "baseline"))

    def bench(self, trial: str, role: Role, recipe: Recipe, *, profile: bool = False) -> bool:
        """Admit, launch and finish one non-candidate run; False when refused."""
        effective = self.executor.resolve(recipe)
        if self.executor.admit(trial, effective) is not None:
            return False
        launch = self.executor.launch(trial, role, recipe, effective, profile=profile)
        self.executor.finish(trial, launch)
        return True

    def stop_if_requested(self) -> bool:
        if not self.stop_requested():
            return False
        self.stop("requested", ["stopped on request; /attune resume continues it"])
        return True

    def stop(self, reason: StopReason, evidence: list[str]) -> None:
        self.ledger.append(self.name, "campaign_stopped", {"reason": reason, "evidence": evidence})
        self.update_campaign_comment()

    def update_campaign_comment(self) -> None:
        """The ONE campaign comment on the tuned pull request, edited in place."""
        events = self.ledger.events(self.name)
        state = fold(self.name, events)
        params = self.params(state)
        if state.tuned_pr is None:
            return
        body = render.campaign_comment(state, budget_h=params.budget_device_hours)
        self.forge.comment(
            state.tuned_pr, f"{body}\n\n{anchor_line(events)}", marker=render.CAMPAIGN_MARKER
        )
