"""``attune doctor`` before anything is launched or charged: ``attune tune`` (a new campaign,
before its work directory and ledger exist) and ``attune bench`` (so the bench action too) run
its checks first for a Megatron-LM or torchtitan recipe on the local backend.

Not for the embedded workload (attune's own CPU model needs none of it), nor ``--backend sim``
(nothing runs), nor ``--backend slurm`` (the ranks run on the cluster's nodes, not on the
machine that submits them). The runner setting ``ATTUNE_SKIP_DOCTOR=1`` skips it where the
launcher starts the ranks somewhere else (``ATTUNE_LAUNCHER``: an ``srun`` wrapper, a
container, a test double): there this machine's GPUs say nothing about the run's.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from bot.commands.doctor import Check, doctor_checks
from bot.render.words import count
from gate.errors import AttuneError
from gate.models import Recipe, TrialResult

GPU_FRAMEWORKS = ("megatron", "torchtitan")
SKIP_VAR = "ATTUNE_SKIP_DOCTOR"


class DoctorFailed(AttuneError):
    """The machine cannot run the recipe; nothing was launched (exit 2)."""


def doctor_applies(recipe: Recipe, backend: str) -> bool:
    """Whether ``recipe`` on ``backend`` is checked before it runs."""
    skip = os.environ.get(SKIP_VAR, "").strip().lower() in ("1", "true", "yes")
    return recipe.framework in GPU_FRAMEWORKS and backend == "local" and not skip


def failure_text(recipe: Recipe, failed: list[Check]) -> str:
    """The doctor's words for the failed checks, as one line."""
    checks = "; ".join(f"{c.name}: {c.detail}" for c in failed)
    return (
        f"attune doctor: this machine cannot run {recipe.name} ({count(len(failed), 'check')} "
        f"failed): {checks}. Nothing was launched or charged; `attune doctor {recipe.path}` "
        "shows every check (docs/gpu-runner.md)"
    )


def preflight(recipe: Recipe, *, backend: str, workdir: Path) -> None:
    """Run the doctor's checks for ``recipe`` when they apply; DoctorFailed with their words
    when one fails."""
    if not doctor_applies(recipe, backend):
        return
    failed = [c for c in doctor_checks(Path(recipe.path), workdir=workdir) if not c.ok]
    if failed:
        raise DoctorFailed(failure_text(recipe, failed))


def refused_result(recipe: Recipe, message: str, *, warmup: int, devices: int) -> TrialResult:
    """The result ``attune bench --out`` writes when the doctor refused the run: ``failed``,
    the doctor's words as its error, no time held (the bot reads it like any result and
    carries the words to the pull request)."""
    now = time.time()
    return TrialResult(
        recipe=recipe.name,
        fingerprint="",
        status="failed",
        error=message,
        warmup=warmup,
        allocated_at=now,
        released_at=now,
        devices=devices,
    )
