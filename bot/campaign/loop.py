"""The campaign state machine: calibrate, then propose -> PR -> gate -> bench -> judge ->
merge or close -> cost comments, until the agent stops; every transition is a ledger event
first. Written against Forge, Executor and Agent, so GitHub mode plugs in unchanged.

The campaign keeps no state of its own: each step folds the ledger (``campaign_state.fold``)
and does the next missing thing, so a bot killed anywhere resumes by running again.
"""

from __future__ import annotations

import json

from bot.campaign.candidates import CandidateSteps
from bot.campaign.check_calibration import calibrate_checks
from bot.campaign.recipe_edit import apply_changes
from bot.interfaces import AgentView, Probe, ProbeOf, ProfileRequest, Stop
from bot.lessons.campaign import propose_lessons
from bot.state.fold import CampaignState, agent_view
from gate import noise
from gate.errors import AttuneError
from gate.models import EffectiveConfig
from runners.bench import Launch

PROFILE_TRIES = 2
"""Profile runs of one incumbent that may come back without a profile before giving up."""


class Campaign(CandidateSteps):
    """Calibrate, then ask the agent for moves until it (or the budget) stops. The steps of
    each candidate are ``CandidateSteps``'; the shared primitives ``CampaignCore``'s."""

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
        calibrate_checks(self)
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
            if self.recalibrate(state) or self.confirm(state):
                continue
            self.step(state)
        self.update_campaign_comment()  # a bot killed right after stopping left it stale
        propose_lessons(self)  # once per campaign: the ledger records it
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

    def calibrate(self) -> None:
        state = self.state()
        params = self._params(state)
        baseline = self.recipe(params.recipe_text, "baseline")
        while state.noise is None and state.stopped is None:
            if self._stop_if_requested():
                return
            done = [t for t in state.role_trials("calibration") if t.finished]
            # an interrupted run (stopped, its node lost) says nothing: another one replaces it
            counted = [t for t in done if t.finished and not t.finished.get("interrupted")]
            failed = [t for t in counted if t.finished and t.finished["status"] != "ok"]
            if failed:
                error = failed[0].finished["error"] if failed[0].finished else ""
                self.stop("baseline_failed", [f"{failed[0].trial}: {error}"])
                raise AttuneError(f"the baseline does not run: {error}", path=params.recipe_path)
            if len(counted) >= params.calibration_runs:
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
                refused = self.state().trials[trial].refused or {}
                why = str(refused.get("message") or "the budget cannot cover the calibration runs")
                self.stop("budget", [why])
                raise AttuneError(f"the calibration runs cannot launch: {why}")
            state = self.state()

    def step(self, state: CampaignState) -> None:
        """Ask the agent for the next move and start it."""
        params = self._params(state)
        if len(state.candidates) >= params.max_trials:
            self.end("max_trials", [f"{params.max_trials} candidates tried"])
            return
        view = self.view(state)
        decision = self.agent.decide(view, self.probe_of(state), state.tried)
        if isinstance(decision, Stop):
            self.end(decision.reason, decision.evidence)
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
            if self.propose(state, decision):
                self.progress.update(
                    self.state(),
                    "propose",
                    f"{decision.title} ({decision.bottleneck}-bound, "
                    f"expected +{decision.expected_gain_pct:.0f}%)",
                )

    # --- what the agent sees ---

    def probe_of(self, state: CampaignState) -> ProbeOf:
        incumbent = state.incumbent_recipe_text
        baseline: list[EffectiveConfig] = []  # resolved once, on the first probe

        def probe(changes: dict[str, object]) -> Probe | None:
            try:
                text = apply_changes(incumbent, changes)
                effective = self.executor.resolve(self.recipe(text, "probe"))
            except AttuneError:
                return None
            memory = self.executor.memory_verdict(effective)
            if not baseline:
                baseline.append(self.baseline_effective(state))
            fits, why = memory if memory is not None else (True, None)
            return Probe(
                fingerprint=effective.fingerprint(),
                fits=fits,
                memory=why,
                effective=effective,
                baseline=baseline[0],
            )

        return probe

    def view(self, state: CampaignState) -> AgentView:
        incumbent = self.executor.resolve(self.recipe(state.incumbent_recipe_text, "incumbent"))
        return agent_view(
            state,
            incumbent,
            self.registry,
            forecast_s=self.executor.forecast(incumbent.devices),
            cores=self.cores,
        ).model_copy(update={"lessons": self.lessons})
