"""GitHub mode on a Slurm cluster: the bot submits each trial as a job itself.

When the bot's settings name a cluster (``ATTUNE_SLURM_URL``), a campaign started from a pull
request runs its trials through the local executor with the Slurm backend (``runners/slurm/``)
instead of dispatching the bench workflow. What runs is the recipe text the campaign wrote to
its own ledger (the candidate pull requests show it; a push to a candidate branch changes
nothing that runs, and the merge names the benchmarked head), with the bot's own attune.
As in ``ActionsExecutor``, whoever the campaign acts for must still have write permission
before every launch.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from bot.executor import LocalExecutor
from bot.interfaces import Role
from gate.models import EffectiveConfig, Recipe
from runners.bench import Launch


class ClusterExecutor(LocalExecutor):
    """The local executor on a cluster backend, with GitHub mode's permission re-check."""

    def __init__(self, *, authorize: Callable[[str], None], **local: Any) -> None:
        super().__init__(**local)
        self.authorize = authorize
        """Called before a launch; raises when the campaign's user may no longer write."""

    def launch(
        self,
        trial: str,
        role: Role,
        recipe: Recipe,
        effective: EffectiveConfig,
        *,
        profile: bool = False,
    ) -> Launch:
        self.authorize("launch a benchmark")
        return super().launch(trial, role, recipe, effective, profile=profile)
