"""What the ledger says about the judgement's extra runs: A/B re-measurements, the noise
recalibrations of new incumbents, the final confirmation (``CampaignState.judgement``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, Field

from gate.events_judgement import JUDGEMENT_MODELS, RunRequested
from gate.models import NoiseModel

KINDS = frozenset(model.KIND for model in JUDGEMENT_MODELS)
"""The event kinds ``JudgementState.apply`` folds."""


def ok_score(finished: Mapping[str, Any] | None) -> float | None:
    """A run's score when it counts: finished ok, not interrupted, scored."""
    if not finished or finished.get("status") != "ok" or finished.get("interrupted"):
        return None
    score = finished.get("score")
    return None if score is None else float(score)


class JudgementState(BaseModel):
    runs: dict[str, RunRequested] = Field(default_factory=dict)
    """Run id -> its request, in ledger order."""
    recalibrations: dict[str, dict[str, Any]] = Field(default_factory=dict)
    """Incumbent -> its ``noise_recalibrated`` payload."""
    noise: NoiseModel | None = None
    """The latest recalibrated noise: the current incumbent's layout descends from it."""
    confirmation: dict[str, Any] | None = None
    """The ``confirmation_requested`` payload."""
    confirmed: dict[str, Any] | None = None
    """The ``confirmation_finished`` payload."""

    def apply(self, kind: str, p: dict[str, Any]) -> None:
        if kind == "run_requested":
            self.runs[p["trial"]] = RunRequested.model_validate(p)
        elif kind == "noise_recalibrated":
            self.recalibrations[p["incumbent"]] = p
            self.noise = NoiseModel.model_validate(
                {k: p[k] for k in ("runs", "mean", "std", "cv", "threshold")}
            )
        elif kind == "confirmation_requested":
            self.confirmation, self.confirmed = p, None
        elif kind == "confirmation_finished":
            self.confirmed = p

    def requested(self, of: str, phase: str) -> list[RunRequested]:
        """The runs requested for ``of`` in ``phase``, in order."""
        return [r for r in self.runs.values() if r.of == of and r.phase == phase]

    def runs_of_recipe(self, trial: str) -> list[str]:
        """The extra runs of ``trial``'s recipe (B arms, recalibration, later A arms)."""
        return [r.trial for r in self.runs.values() if r.recipe_of == trial]

    def extra_scores(self, trial: str, records: Mapping[str, Any]) -> list[float]:
        """Scores of the extra runs of ``trial``'s recipe that count (``ok_score``)."""
        scores = []
        for run in self.runs_of_recipe(trial):
            record = records.get(run)
            score = ok_score(record.finished if record is not None else None)
            if score is not None:
                scores.append(score)
        return scores
