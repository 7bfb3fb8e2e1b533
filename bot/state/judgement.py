"""What the ledger says about the judgement's extra runs: A/B re-measurements, the noise
recalibrations of new incumbents, the final confirmation (``CampaignState.judgement``)."""

from __future__ import annotations

from pydantic import BaseModel, Field

from gate.events import TrialFinished
from gate.events_judgement import (
    ConfirmationFinished,
    ConfirmationRequested,
    NoiseRecalibrated,
    RunRequested,
)
from gate.models import NoiseModel


def ok_score(finished: TrialFinished | None) -> float | None:
    """A run's score when it counts: finished ok, not interrupted, scored. The one rule: the
    calibration, a winner's score (``CampaignState.winner_runs``), its recalibration and the
    A/B pairs all count runs by it."""
    if finished is None or finished.status != "ok" or finished.interrupted:
        return None
    return finished.score


class JudgementState(BaseModel):
    runs: dict[str, RunRequested] = Field(default_factory=dict)
    """Run id -> its request, in ledger order."""
    recalibrations: dict[str, NoiseRecalibrated] = Field(default_factory=dict)
    """Incumbent -> its ``noise_recalibrated``."""
    noise: NoiseModel | None = None
    """The latest recalibrated noise: the current incumbent's layout descends from it."""
    confirmation: ConfirmationRequested | None = None
    confirmed: ConfirmationFinished | None = None

    def apply(
        self,
        event: RunRequested | NoiseRecalibrated | ConfirmationRequested | ConfirmationFinished,
    ) -> None:
        match event:
            case RunRequested():
                self.runs[event.trial] = event
            case NoiseRecalibrated():
                self.recalibrations[event.incumbent] = event
                self.noise = NoiseModel.model_validate(
                    event.model_dump(include={"runs", "mean", "std", "cv", "threshold"})
                )
            case ConfirmationRequested():
                self.confirmation, self.confirmed = event, None
            case ConfirmationFinished():
                self.confirmed = event

    def requested(self, of: str, phase: str) -> list[RunRequested]:
        """The runs requested for ``of`` in ``phase``, in order."""
        return [r for r in self.runs.values() if r.of == of and r.phase == phase]

    def runs_of_recipe(self, trial: str) -> list[str]:
        """The extra runs of ``trial``'s recipe (B arms, recalibration, later A arms)."""
        return [r.trial for r in self.runs.values() if r.recipe_of == trial]
