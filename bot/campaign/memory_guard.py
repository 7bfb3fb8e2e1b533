"""Refuse a launch the memory model says will not fit, before anything is charged.

The device's capacity is the baseline recipe's (``device_memory_gib``, else its ``gpu_arch``):
a candidate cannot claim a bigger device, since the gate does not see that key. Predictions
are corrected by what this campaign measured: the peaks of its finished runs, and its
out-of-memory runs as censored observations (``gate.memory``).
"""

from __future__ import annotations

from bot.state.fold import campaign_state
from bot.state.model import CampaignState
from gate.ledger import Ledger
from gate.memory import (
    MemoryCalibration,
    MemoryPrediction,
    calibration_from,
    fits,
    predict_memory,
    recipe_capacity_bytes,
)
from gate.models import EffectiveConfig
from gate.recipe import parse_recipe


class MemoryGuard:
    """The memory check of one campaign."""

    def __init__(self, ledger: Ledger, campaign: str) -> None:
        self.ledger, self.campaign = ledger, campaign
        self._capacity: int | None = None
        self._read = False

    def _state(self) -> CampaignState:
        return campaign_state(self.ledger, self.campaign)

    def capacity_bytes(self, state: CampaignState) -> int | None:
        if not self._read and state.params is not None:
            baseline = parse_recipe(state.params.recipe_text, path=state.params.recipe_path)
            self._capacity, self._read = recipe_capacity_bytes(baseline), True
        return self._capacity

    def calibration(self, state: CampaignState) -> MemoryCalibration:
        runs = [
            (
                t.predicted_peak_bytes,
                t.finished.peak_memory_bytes,
                t.finished.status,
            )
            for t in state.trials.values()
            if t.predicted_peak_bytes and t.finished
        ]
        return calibration_from(runs, self.capacity_bytes(state))

    def is_candidate(self, trial: str) -> bool:
        record = self._state().trials.get(trial)
        return record is not None and record.role == "candidate"

    def predict(self, effective: EffectiveConfig) -> MemoryPrediction | None:
        return predict_memory(effective)

    def verdict(self, effective: EffectiveConfig) -> tuple[bool, str] | None:
        """(fits, the one-line reason) for a config, or None when there is no model or no
        known capacity."""
        prediction = self.predict(effective)
        state = self._state()
        capacity = self.capacity_bytes(state)
        if prediction is None or capacity is None:
            return None
        return fits(prediction, self.calibration(state), capacity)
