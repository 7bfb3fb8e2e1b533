"""The step-time model in a campaign: before each launch, what the model predicts of the run
(``prediction_made``), the prior corrected by the campaign's calibration over every trial that
finished before it (``perfmodel.calibration``); after it, the trial's score is the measurement
the prediction is scored against and the next fit's observation.

The part is the baseline recipe's (``hardware:``, else ``gpu_arch`` and ``device_memory_gib``;
the embedded workload: the ``cpu`` part). A config the model cannot read (a framework or a
layout it does not know) gets no prediction: the campaign goes on without one.
"""

from __future__ import annotations

from bot.interfaces import ModelView
from bot.state.fold import campaign_state
from bot.state.judgement import ok_score
from bot.state.model import CampaignState
from gate.budget import forecast_device_seconds
from gate.errors import AttuneError
from gate.ledger import Ledger
from gate.models import EffectiveConfig
from gate.recipe import parse_recipe
from perfmodel import Part, StepPrediction, predict_step
from perfmodel.calibration import Calibration, Observation, fit, move_fields
from perfmodel.hardware import recipe_part
from runners.harness import PROFILE_EXTRA_STEPS


class StepPredictor:
    """The step-time model of one campaign, calibrated on its finished trials."""

    def __init__(self, ledger: Ledger, campaign: str, *, steps: int = 0) -> None:
        self.ledger, self.campaign = ledger, campaign
        self.steps = steps
        """Steps of the campaign's runs (``run_seconds``)."""
        self._part: tuple[Part | None, float | None] | None = None

    def part(self, state: CampaignState) -> tuple[Part | None, float | None]:
        """The baseline's part and declared device memory (GiB); (None, None) without one."""
        if self._part is None and state.params is not None:
            baseline = parse_recipe(state.params.recipe_text, path=state.params.recipe_path)
            memory = baseline.body.get("device_memory_gib")
            try:
                hw: Part | None = recipe_part(baseline.framework, baseline.body)
            except AttuneError:
                hw = None
            self._part = (hw, None if memory is None else float(memory))
        return self._part or (None, None)

    def prior(self, effective: EffectiveConfig, state: CampaignState) -> StepPrediction | None:
        """The uncalibrated prediction; None when the model cannot read ``effective``."""
        hw, memory = self.part(state)
        if hw is None:
            return None
        try:
            return predict_step(effective, hw, device_memory_gib=memory)
        except (AttuneError, KeyError, ValueError, TypeError, ZeroDivisionError):
            return None

    def calibration(self, state: CampaignState) -> Calibration:
        """The fit over every finished trial with a prediction and a score that counts."""
        return fit(observations(state))

    def predict(
        self, effective: EffectiveConfig, state: CampaignState | None = None
    ) -> tuple[StepPrediction, Calibration] | None:
        """The prior and the campaign's calibration now (apply one to the other)."""
        state = state or campaign_state(self.ledger, self.campaign)
        prior = self.prior(effective, state)
        if prior is None:
            return None
        return prior, self.calibration(state)

    def run_seconds(self, effective: EffectiveConfig, profile: bool = False) -> float:
        """Wall-clock seconds a run of ``effective`` should take: the budget's forecast per
        device (the median finished run's, scaled by the predicted step times as the budget's
        is), else the calibrated model's ``steps`` x step time (0 without a prediction); a
        profiled run's extra steps added."""
        made = self.predict(effective)
        step_s = made[1].apply(made[0]).step_time_s if made else 0.0
        devices = max(effective.devices, 1)
        events = self.ledger.events(self.campaign)
        default = self.steps * step_s * devices
        runs, next_s = self.step_seconds(effective)
        run_s = (
            forecast_device_seconds(
                events, default=default, devices=devices, step_s=runs, next_step_s=next_s
            )
            / devices
        )
        if not self.steps:
            return run_s
        return run_s * (self.steps + (PROFILE_EXTRA_STEPS if profile else 0)) / self.steps

    def step_seconds(self, effective: EffectiveConfig) -> tuple[dict[str, float], float | None]:
        """Predicted seconds a step under the campaign's calibration now: of every trial with a
        prediction (its ``prediction_made`` breakdown), and of ``effective`` (None when the
        model cannot read it). What the budget forecast scales by."""
        state = campaign_state(self.ledger, self.campaign)
        made = self.predict(effective, state)
        if made is None:
            return {}, None
        prior, calibration = made
        runs = {
            t.trial: calibration.corrected_step_s(t.prediction.breakdown)
            for t in state.trials.values()
            if t.prediction is not None
        }
        return runs, calibration.corrected_step_s(prior.breakdown)

    def record(self, trial: str, effective: EffectiveConfig) -> None:
        """``prediction_made`` for a run about to launch (nothing without a prediction)."""
        made = self.predict(effective)
        if made is None:
            return
        prior, calibration = made
        self.ledger.append(
            self.campaign,
            "prediction_made",
            {
                "trial": trial,
                "hardware": prior.hardware,
                "model_version": prior.model_version,
                "tokens_per_s_per_device": prior.tokens_per_s_per_device,
                "step_time_s": prior.step_time_s,
                "breakdown": dict(prior.breakdown),
                "tokens_per_step": prior.tokens_per_step,
                "world": prior.world,
                "peak_memory_bytes": prior.peak_memory_bytes,
                "fits": prior.fits,
                "calibrated_tokens_per_s_per_device": calibration.apply(
                    prior
                ).tokens_per_s_per_device,
                "factors": calibration.factors,
                "band": calibration.band,
                "calibration_runs": calibration.runs,
            },
        )


def observations(state: CampaignState) -> list[Observation]:
    """Every finished trial with a prediction and a score that counts, as an observation."""
    found = []
    for t in state.trials.values():
        score = ok_score(t.finished) if t.finished else None
        if t.prediction is None or score is None or score <= 0:
            continue
        step_s = t.prediction.tokens_per_step / t.prediction.world / score
        found.append(Observation(breakdown=dict(t.prediction.breakdown), measured_step_s=step_s))
    return found


def move_prediction(
    predictor: StepPredictor,
    state: CampaignState,
    incumbent: EffectiveConfig,
    effective: EffectiveConfig,
    *,
    steps: int,
) -> dict[str, float | int | None]:
    """The ``Probe`` fields of a move from ``incumbent`` to ``effective`` under the campaign's
    calibration (``perfmodel.calibration.move_fields``); empty without a prediction."""
    move = predictor.predict(effective, state)
    base = predictor.prior(incumbent, state)
    if move is None or base is None:
        return {}
    prior, calibration = move
    return move_fields(base, prior, calibration, steps=steps)


def model_view(executor: object, state: CampaignState) -> ModelView | None:
    """The step-time model an agent may use (``AgentView.model``): the part and the campaign's
    calibration now; None for an executor without a predictor or a recipe without a part."""
    predictor = getattr(executor, "predictor", None)
    if not isinstance(predictor, StepPredictor):
        return None
    hw, memory = predictor.part(state)
    if hw is None:
        return None
    return ModelView(
        hardware=hw.key, device_memory_gib=memory, calibration=predictor.calibration(state)
    )
