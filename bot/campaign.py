"""The campaign state machine: calibrate, then propose -> PR -> gate -> bench -> judge ->
merge or close -> cost comments, until the agent stops; every transition is a ledger event
first. Written against Forge, Executor and Agent, so GitHub mode plugs in unchanged.

The campaign keeps no state of its own: each step folds the ledger (``campaign_state.fold``)
and does the next missing thing, so a bot killed anywhere resumes by running again.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import Any, Protocol

from bot import render
from bot.campaign_state import CampaignState, TrialRecord, agent_view, fold
from bot.interfaces import (
    Agent,
    AgentView,
    CheckResult,
    Executor,
    Forge,
    ProfileRequest,
    Proposal,
    Role,
    Stop,
)
from bot.recipe_edit import apply_changes
from gate import noise, postlaunch
from gate.errors import AttuneError
from gate.events import StopReason
from gate.ledger import Ledger
from gate.models import EffectiveConfig, Recipe, TrialResult
from gate.recipe import parse_recipe
from gate.registry import Registry
from runners.bench import Launch

PROFILE_TRIES = 2
"""Profile runs of one incumbent that may come back without a profile before giving up."""


class Progress(Protocol):
    """Where the campaign reports what it is doing (a live display, a log, nothing)."""

    def update(self, state: CampaignState, phase: str, detail: str = "") -> None: ...


class QuietProgress:
    def update(self, state: CampaignState, phase: str, detail: str = "") -> None:
        return None


class Campaign:
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

    # --- state ---

    def state(self) -> CampaignState:
        return fold(self.name, self.ledger.events(self.name))

    def _params(self, state: CampaignState) -> Any:
        if state.params is None:
            raise AttuneError(f"campaign {self.name!r} has no campaign_opened event")
        return state.params

    def recipe(self, text: str, trial: str) -> Recipe:
        params = self._params(self.state())
        recipe = parse_recipe(text, path=f"{params.recipe_path}@{trial}")
        return recipe.model_copy(update={"name": f"{params.baseline}@{trial}"})

    def baseline_effective(self, state: CampaignState) -> EffectiveConfig:
        return self.executor.resolve(self.recipe(self._params(state).recipe_text, "baseline"))

    # --- the loop ---

    def run(self) -> CampaignState:
        """Run (or resume) until the campaign has stopped; returns the final state."""
        state = self.state()
        params = self._params(state)
        if state.tuned_pr is None:
            pr = self.forge.open_tuned(
                params.recipe_path,
                params.recipe_text,
                f"Tune {params.baseline}",
                f"Recipe `{params.recipe_path}` as written; attune campaign `{self.name}`.",
            )
            self.ledger.append(
                self.name,
                "forge_ready",
                {"tuned_pr": pr.number, "tuned_branch": pr.head, "base_sha": pr.head_sha},
            )
        self.reconcile()
        self.calibrate()
        while True:
            state = self.state()
            if state.stopped is not None:
                break
            if self._stop_if_requested():
                continue
            pending = [t for t in state.candidates if not t.done]
            if pending:
                self.advance(pending[0].trial)
                continue
            self.step(state)
        self.update_campaign_comment()  # a bot killed right after stopping left it stale
        return self.state()

    def reconcile(self) -> None:
        """Settle launches an earlier bot started and never saw finish."""
        for record in self.state().trials.values():
            if not record.pending_launch:
                continue
            trial_dir = self.executor.workdir / "trials" / record.trial
            launch_payload = record.launch
            if launch_payload is None and (trial_dir / "launch.json").exists():
                # killed between the launch and its ledger record: record it now
                launch_payload = json.loads((trial_dir / "launch.json").read_text())
                self.ledger.append(
                    self.name, "trial_launched", {"trial": record.trial, **launch_payload}
                )
            if launch_payload is None:
                self.ledger.append(
                    self.name,
                    "trial_abandoned",
                    {"trial": record.trial, "reason": "the bot stopped before launching it"},
                )
                continue
            launch = Launch.model_validate(
                {k: v for k, v in launch_payload.items() if k != "trial"}
            )
            self.progress.update(self.state(), "reconcile", f"waiting for {record.trial}")
            self.executor.finish(record.trial, launch, reconciled=True)

    def _bench(self, trial: str, role: Role, recipe: Recipe, *, profile: bool = False) -> bool:
        """Admit, launch and finish one non-candidate run; False when refused."""
        effective = self.executor.resolve(recipe)
        if self.executor.admit(trial, effective) is not None:
            return False
        launch = self.executor.launch(trial, role, recipe, effective, profile=profile)
        self.executor.finish(trial, launch)
        return True

    def _stop_if_requested(self) -> bool:
        if not self.stop_requested():
            return False
        self.stop("requested", ["stopped on request; /attune resume continues it"])
        return True

    def calibrate(self) -> None:
        state = self.state()
        params = self._params(state)
        baseline = self.recipe(params.recipe_text, "baseline")
        while state.noise is None and state.stopped is None:
            if self._stop_if_requested():
                return
            done = [t for t in state.role_trials("calibration") if t.finished]
            failed = [t for t in done if t.finished and t.finished["status"] != "ok"]
            if failed:
                error = failed[0].finished["error"] if failed[0].finished else ""
                self.stop("baseline_failed", [f"{failed[0].trial}: {error}"])
                raise AttuneError(f"the baseline does not run: {error}", path=params.recipe_path)
            if len(done) >= params.calibration_runs:
                model = noise.calibrate(state.calibration_scores)
                self.ledger.append(
                    self.name,
                    "noise_calibrated",
                    {**model.model_dump(), "scores": state.calibration_scores},
                )
                self.update_campaign_comment()
                return
            trial = f"baseline-{len(done) + 1}"
            self.progress.update(state, "calibrate", f"{trial} of {params.calibration_runs}")
            if not self._bench(trial, "calibration", baseline):
                self.stop("budget", ["the budget cannot cover the calibration runs"])
                raise AttuneError("the budget cannot cover the calibration runs")
            state = self.state()

    def step(self, state: CampaignState) -> None:
        """Ask the agent for the next move and start it."""
        params = self._params(state)
        if len(state.candidates) >= params.max_trials:
            self.stop("max_trials", [f"{params.max_trials} candidates tried"])
            return
        view = self.view(state)
        decision = self.agent.decide(view, self.fingerprint_of(state), self.tried(state))
        if isinstance(decision, Stop):
            self.stop(decision.reason, decision.evidence)
        elif isinstance(decision, ProfileRequest):
            tries = [t for t, inc in state.profile_requests.items() if inc == state.incumbent]
            if len(tries) >= PROFILE_TRIES:
                self.stop("exhausted", [f"{', '.join(tries)} of {state.incumbent} gave no profile"])
                return
            trial = f"profile-{len(state.role_trials('profile')) + 1}"
            self.ledger.append(
                self.name,
                "profile_requested",
                {"trial": trial, "reason": decision.reason, "incumbent": state.incumbent},
            )
            self.progress.update(self.state(), "profile", decision.reason)
            recipe = self.recipe(state.incumbent_recipe_text, trial)
            if not self._bench(trial, "profile", recipe, profile=True):
                self.stop("budget", ["the budget cannot cover a profile run"])
        else:
            self.propose(state, decision)
            self.progress.update(
                self.state(),
                "propose",
                f"{decision.title} ({decision.bottleneck}-bound, "
                f"expected +{decision.expected_gain_pct:.0f}%)",
            )

    def propose(self, state: CampaignState, proposal: Proposal) -> None:
        n = len(state.candidates) + 1
        trial = f"c{n}"
        text = apply_changes(
            state.incumbent_recipe_text, {k: new for k, (_, new) in proposal.changes.items()}
        )
        self.ledger.append(
            self.name,
            "candidate_proposed",
            {
                "trial": trial,
                "n": n,
                "title": proposal.title,
                **proposal.model_dump(mode="json"),
                "recipe_text": text,
            },
        )

    def advance(self, trial: str) -> None:
        """Do the next missing step for one candidate."""
        state = self.state()
        params = self._params(state)
        record = state.trials[trial]
        proposal = record.proposal
        assert proposal is not None and state.tuned_branch is not None
        assert state.pinned_sha is not None
        recipe = self.recipe(proposal["recipe_text"], trial)
        if record.pr is None:
            pr = self.forge.open_candidate(
                branch=f"attune/{self.name}/{proposal['n']}",
                base=state.tuned_branch,
                base_sha=state.pinned_sha,
                recipe_path=params.recipe_path,
                recipe_text=proposal["recipe_text"],
                title=proposal["title"],
                body=render.candidate_body(proposal, campaign=self.name),
                labels=["attune", "attune:candidate"],
            )
            self.ledger.append(
                self.name,
                "pr_opened",
                {"trial": trial, "pr": pr.number, "branch": pr.head, "head_sha": pr.head_sha},
            )
            return
        if record.gate_verdict is None:
            _, report = self.executor.gate(trial, recipe, baseline=self.baseline_effective(state))
            self.forge.set_check(
                record.pr,
                CheckResult(
                    name="attune/gate",
                    conclusion="failure" if report.verdict == "reject" else "success",
                    summary=render.gate_summary(report),
                ),
            )
            return
        if record.judged is None:
            self.judge(state, record, recipe)
            return
        self.settle(state, record)

    def judge(self, state: CampaignState, record: TrialRecord, recipe: Recipe) -> None:
        trial = record.trial
        verdict: dict[str, Any] = {"trial": trial, "score": None, "gain": None}
        verdict["incumbent_score"] = state.incumbent_score
        verdict["threshold"] = state.noise.threshold if state.noise else None
        if record.gate_verdict == "reject":
            verdict.update(decision="close", reason="the pre-launch gate rejected it")
        elif record.refused is not None:
            verdict.update(decision="close", reason=record.refused["message"])
        elif record.finished is None and self._same_as_incumbent(state, recipe):
            verdict.update(
                decision="close",
                reason=f"identical in effect to the incumbent ({state.incumbent}): not run",
            )
        elif record.finished is None:
            effective = self.executor.resolve(recipe)
            if self.executor.admit(trial, effective) is None:
                launch = self.executor.launch(trial, "candidate", recipe, effective)
                self.executor.finish(trial, launch)
            return
        else:
            result = self._result(record)
            baseline_loss = state.baseline_step1_loss
            assert baseline_loss is not None and state.noise and state.incumbent_score
            post = postlaunch.check(result, baseline_step1_loss=baseline_loss)
            verdict.update(post_passed=post.passed, post_reasons=post.reasons)
            if not post.passed:
                verdict.update(decision="close", reason="; ".join(post.reasons))
            else:
                score = float(result.score or 0.0)
                gain = noise.relative_gain(score, state.incumbent_score)
                verdict.update(score=score, gain=gain)
                if noise.beats(score, state.incumbent_score, state.noise):
                    reason = f"{gain:+.1%} beats the {state.noise.threshold:.1%} threshold"
                    verdict.update(decision="merge", reason=reason)
                elif gain < 0:
                    verdict.update(
                        decision="close", reason=f"{gain:+.1%}: slower than the incumbent"
                    )
                else:
                    reason = f"{gain:+.1%} does not beat the {state.noise.threshold:.1%} threshold"
                    verdict.update(decision="close", reason=reason)
        self.ledger.append(self.name, "trial_judged", verdict)
        self.progress.update(
            self.state(), f"trial {trial}", f"{verdict['decision']}: {verdict['reason']}"
        )

    def _same_as_incumbent(self, state: CampaignState, recipe: Recipe) -> bool:
        """A candidate whose effective config equals the incumbent's has nothing to measure."""
        incumbent = self.recipe(state.incumbent_recipe_text, "incumbent")
        fingerprint = self.executor.resolve(recipe).fingerprint()
        return fingerprint == self.executor.resolve(incumbent).fingerprint()

    def _result(self, record: TrialRecord) -> TrialResult:
        path = self.executor.workdir / "trials" / record.trial / "result.json"
        return TrialResult.model_validate_json(path.read_text())

    def settle(self, state: CampaignState, record: TrialRecord) -> None:
        """Carry out the judged decision on the forge and its cost comment, then ledger it.

        The cost comment goes before ``pr_merged``/``pr_closed``: once either is in the ledger
        the candidate is done, and a bot killed in between would never write it on restart.
        """
        assert record.judged is not None and record.pr is not None
        params = self._params(state)
        finished = record.finished
        cost = render.cost_comment(
            trial_s=float(finished["device_seconds"]) if finished else 0.0,
            status=finished["status"] if finished else "not launched",
            spent_s=state.spent_device_seconds,
            budget_h=params.budget_device_hours,
        )
        if record.judged["decision"] == "merge":
            assert state.pinned_sha is not None and record.head_sha is not None
            sha = self.forge.merge(
                record.pr, expected_base_sha=state.pinned_sha, expected_head_sha=record.head_sha
            )
            self.forge.comment(record.pr, cost, marker=render.COST_MARKER)
            self.ledger.append(
                self.name, "pr_merged", {"trial": record.trial, "pr": record.pr, "sha": sha}
            )
        else:
            self.forge.comment(
                record.pr, f"Closing: {record.judged['reason']}.", marker=render.CLOSING_MARKER
            )
            self.forge.close(record.pr)
            self.forge.comment(record.pr, cost, marker=render.COST_MARKER)
            self.ledger.append(self.name, "pr_closed", {"trial": record.trial, "pr": record.pr})
        self.update_campaign_comment()

    def stop(self, reason: StopReason, evidence: list[str]) -> None:
        self.ledger.append(self.name, "campaign_stopped", {"reason": reason, "evidence": evidence})
        self.update_campaign_comment()

    def update_campaign_comment(self) -> None:
        """The ONE campaign comment on the tuned pull request, edited in place."""
        state = self.state()
        params = self._params(state)
        if state.tuned_pr is None:
            return
        self.forge.comment(
            state.tuned_pr,
            render.campaign_comment(state, budget_h=params.budget_device_hours),
            marker=render.CAMPAIGN_MARKER,
        )

    # --- what the agent sees ---

    def tried(self, state: CampaignState) -> set[str]:
        return {
            e.payload["fingerprint"]
            for e in self.ledger.events(self.name)
            if e.kind in ("trial_started", "gate_checked")
        }

    def fingerprint_of(self, state: CampaignState) -> Any:
        incumbent = state.incumbent_recipe_text

        def fingerprint(changes: dict[str, object]) -> str | None:
            try:
                text = apply_changes(incumbent, changes)
                return self.executor.resolve(self.recipe(text, "probe")).fingerprint()
            except AttuneError:
                return None

        return fingerprint

    def view(self, state: CampaignState) -> AgentView:
        incumbent = self.executor.resolve(self.recipe(state.incumbent_recipe_text, "incumbent"))
        return agent_view(
            state,
            incumbent,
            self.registry,
            forecast_s=self.executor.forecast(incumbent.devices),
            cores=self.cores,
        )
