"""The campaign state machine: calibrate, then propose -> PR -> gate -> bench -> judge ->
merge or close -> cost comments, until the agent stops; every transition is a ledger event
first. Written against Forge, Executor and Agent, so GitHub mode plugs in unchanged.

The campaign keeps no state of its own: each step folds the ledger (``bot.state.fold``) and
does the next missing thing, so a bot killed anywhere resumes by running again. ``run`` reads top
to bottom: open the tuned pull request, settle launches an earlier bot left, calibrate the noise
and the checks, then per turn advance the pending candidate (``candidates.advance``), run the
judgement's extra runs (``extra_runs``), or ask the agent for the next move. Every step is a
function of one ``CampaignContext`` (``context.py``): the collaborators and the primitives.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from bot.campaign.candidates import advance, propose
from bot.campaign.check_calibration import calibrate_checks
from bot.campaign.context import CampaignContext, Progress
from bot.campaign.extra_runs import confirm, end, recalibrate
from bot.campaign.predictions import model_view, move_prediction
from bot.campaign.recipe_edit import apply_changes
from bot.interfaces import Agent, AgentView, Executor, Forge, Probe, ProbeOf, ProfileRequest, Stop
from bot.lessons.campaign import propose_lessons
from bot.lessons.view import LessonView
from bot.state.model import CampaignState
from bot.state.views import agent_view
from gate import noise
from gate.errors import AttuneError
from gate.events import TrialLaunched
from gate.ledger import Ledger
from gate.models import EffectiveConfig
from gate.registry import Registry
from runners.bench import Launch

PROFILE_TRIES = 2
"""Profile runs of one incumbent that may come back without a profile before giving up."""


class Campaign:
    """Calibrate, then ask the agent for moves until it (or the budget) stops."""

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
        self.ctx = CampaignContext(
            name=name,
            ledger=ledger,
            forge=forge,
            executor=executor,
            agent=agent,
            registry=registry,
            progress=progress,
            cores=cores,
            stop_requested=stop_requested,
            lessons=lessons,
        )

    def state(self) -> CampaignState:
        return self.ctx.state()

    def run(self) -> CampaignState:
        """Run (or resume) until the campaign has stopped; returns the final state."""
        ctx = self.ctx
        state = ctx.state()
        params = ctx.params(state)
        if state.tuned_pr is None:
            pr = ctx.forge.open_tuned(
                params.recipe_path,
                params.recipe_text,
                f"Tune {params.baseline}",
                f"Recipe `{params.recipe_path}` as written; attune campaign `{ctx.name}`.",
            )
            ctx.ledger.append(
                ctx.name,
                "forge_ready",
                {"tuned_pr": pr.number, "tuned_branch": pr.head, "base_sha": pr.head_sha},
            )
        self.reconcile()
        self.calibrate()
        calibrate_checks(ctx)
        while True:
            state = ctx.state()
            if state.stopped is not None:
                break
            if ctx.stop_if_requested():
                continue
            pending = [t for t in state.candidates if not t.done]
            if pending:
                advance(ctx, pending[0].trial)
                continue
            if recalibrate(ctx, state) or confirm(ctx, state):
                continue
            self.step(state)
        ctx.update_campaign_comment()  # a bot killed right after stopping left it stale
        propose_lessons(ctx)  # once per campaign: the ledger records it
        return ctx.state()

    def reconcile(self) -> None:
        """Settle launches an earlier bot started and never saw finish."""
        ctx = self.ctx
        for record in ctx.state().trials.values():
            if not record.pending_launch:
                continue
            trial_dir = ctx.executor.workdir / "trials" / record.trial
            launched = record.launch
            if launched is None and (trial_dir / "launch.json").exists():
                # killed between the launch and its ledger record: record it now
                stored = json.loads((trial_dir / "launch.json").read_text())
                payload = {"trial": record.trial, **stored}
                ctx.ledger.append(ctx.name, "trial_launched", payload)
                launched = TrialLaunched.model_validate(payload)
            if launched is None:
                ctx.ledger.append(
                    ctx.name,
                    "trial_abandoned",
                    {"trial": record.trial, "reason": "the bot stopped before launching it"},
                )
                continue
            launch = Launch.model_validate(launched.model_dump(exclude={"trial", "v"}))
            ctx.progress.update(ctx.state(), "reconcile", f"waiting for {record.trial}")
            ctx.executor.finish(record.trial, launch, reconciled=True)

    def calibrate(self) -> None:
        ctx = self.ctx
        state = ctx.state()
        params = ctx.params(state)
        baseline = ctx.recipe(params.recipe_text, "baseline")
        while state.noise is None and state.stopped is None:
            if ctx.stop_if_requested():
                return
            done = [t for t in state.role_trials("calibration") if t.finished]
            # an interrupted run (stopped, its node lost) says nothing: another one replaces it
            counted = [t for t in done if t.finished and not t.finished.interrupted]
            failed = [t for t in counted if t.finished and t.finished.status != "ok"]
            if failed:
                error = (failed[0].finished.error if failed[0].finished else "") or ""
                ctx.stop("baseline_failed", [f"{failed[0].trial}: {error}"])
                raise AttuneError(f"the baseline does not run: {error}", path=params.recipe_path)
            if len(counted) >= params.calibration_runs:
                model = noise.calibrate(state.calibration_scores)
                ctx.ledger.append(
                    ctx.name,
                    "noise_calibrated",
                    {**model.model_dump(), "scores": state.calibration_scores},
                )
                ctx.update_campaign_comment()
                return
            trial = f"baseline-{len(done) + 1}"
            ctx.progress.update(state, "calibrate", f"{trial} of {params.calibration_runs}")
            if not ctx.bench(trial, "calibration", baseline):
                refused = ctx.state().trials[trial].refused
                why = refused.message if refused else "the budget cannot cover the calibration runs"
                ctx.stop("budget", [why])
                raise AttuneError(f"the calibration runs cannot launch: {why}")
            state = ctx.state()

    def step(self, state: CampaignState) -> None:
        """Ask the agent for the next move and start it."""
        ctx = self.ctx
        params = ctx.params(state)
        if len(state.candidates) >= params.max_trials:
            tried = params.max_trials
            end(ctx, "max_trials", [f"{tried} candidate{'s' * (tried != 1)} tried (--max-trials)"])
            return
        view = self.view(state)
        decision = ctx.agent.decide(view, self.probe_of(state), state.tried)
        if isinstance(decision, Stop):
            end(ctx, decision.reason, decision.evidence)
        elif isinstance(decision, ProfileRequest):
            tries = [t for t, inc in state.profile_requests.items() if inc == state.incumbent]
            if len(tries) >= PROFILE_TRIES:
                ctx.stop("exhausted", [f"{', '.join(tries)} of {state.incumbent} gave no profile"])
                return
            trial = f"profile-{len(state.role_trials('profile')) + 1}"
            ctx.ledger.append(
                ctx.name,
                "profile_requested",
                {"trial": trial, "reason": decision.reason, "incumbent": state.incumbent},
            )
            ctx.progress.update(ctx.state(), "profile", decision.reason)
            recipe = ctx.recipe(state.incumbent_recipe_text, trial)
            if not ctx.bench(trial, "profile", recipe, profile=True):
                ctx.stop("budget", ["the budget cannot cover a profile run"])
        else:
            if propose(ctx, state, decision):
                ctx.progress.update(
                    ctx.state(),
                    "propose",
                    f"{decision.title} ({decision.bottleneck}-bound, "
                    f"expected +{decision.expected_gain_pct:.0f}%)",
                )

    # --- what the agent sees ---

    def probe_of(self, state: CampaignState) -> ProbeOf:
        ctx = self.ctx
        incumbent = state.incumbent_recipe_text
        baseline: list[EffectiveConfig] = []  # resolved once, on the first probe
        current = ctx.executor.resolve(ctx.recipe(incumbent, "incumbent"))

        def probe(changes: dict[str, object]) -> Probe | None:
            try:
                text = apply_changes(incumbent, changes)
                effective = ctx.executor.resolve(ctx.recipe(text, "probe"))
            except AttuneError:
                return None
            memory = ctx.executor.memory_verdict(effective)
            if not baseline:
                baseline.append(ctx.baseline_effective(state))
            fits, why = memory if memory is not None else (True, None)
            predictor = getattr(ctx.executor, "predictor", None)
            predicted = (
                move_prediction(predictor, state, current, effective, steps=ctx.params(state).steps)
                if predictor is not None
                else {}
            )
            return Probe(
                fingerprint=effective.fingerprint(),
                fits=fits,
                memory=why,
                effective=effective,
                baseline=baseline[0],
                **predicted,
            )

        return probe

    def view(self, state: CampaignState) -> AgentView:
        ctx = self.ctx
        incumbent = ctx.executor.resolve(ctx.recipe(state.incumbent_recipe_text, "incumbent"))
        return agent_view(
            state,
            incumbent,
            ctx.registry,
            forecast_s=ctx.executor.forecast(incumbent),
            cores=ctx.cores,
        ).model_copy(update={"lessons": ctx.lessons, "model": model_view(ctx.executor, state)})
