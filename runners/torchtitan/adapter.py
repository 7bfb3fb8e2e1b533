"""Adapter for torchtitan: resolve recipes with torchtitan's own ConfigManager.

torchtitan is never imported here: ``runners.torchtitan.resolve_worker`` runs in a subprocess
(one for any number of recipes, so the import is paid once) whose environment holds no secrets.
The worker parses each recipe as ``torchtitan/train.py`` would and then derives what the
Trainer derives before its first step (data-parallel degree, global batch, gradient
accumulation).
"""

from __future__ import annotations

from typing import Any, ClassVar

from runners.torchtitan.recipe import TorchtitanRecipe
from runners.worker_adapter import DistributedRecipe, WorkerAdapter

TORCHTITAN_PATH_VAR = "ATTUNE_TORCHTITAN_PATH"
"""Directory of a torchtitan checkout to resolve with, instead of the installed torchtitan."""

INSTALL_HINT = (
    "install torchtitan (pip install tyro==1.0.17 spmd_types==0.2.3 torchdata tokenizers "
    "tensorboard 'datasets>=3.6.0,<4.8.0' && pip install --no-deps torchtitan==0.3.0) or set "
    "ATTUNE_TORCHTITAN_PATH to a torchtitan checkout"
)


class TorchtitanAdapter(WorkerAdapter[TorchtitanRecipe]):
    """torchtitan as a framework: effective config from its ConfigManager and the Trainer's
    derivations.

    ``keys()`` lists every key of the job config's command line (``--module``, ``--config`` and
    the Trainer.Config fields tyro exposes, over every config function of the models that ship
    with torchtitan and build on this install) and the dataclass field defining it.
    """

    name = "torchtitan"
    body_model: ClassVar[type[DistributedRecipe]] = TorchtitanRecipe
    worker = "runners.torchtitan.resolve_worker"
    missing_module = "torchtitan"
    install_hint = INSTALL_HINT
    path_var = TORCHTITAN_PATH_VAR
    distribution = "torchtitan"
    error_key = "overrides"

    def request_item(self, body: TorchtitanRecipe) -> dict[str, Any]:
        return {
            "module": body.module,
            "config": body.config,
            "overrides": body.overrides,
            "world_size": body.total_devices,
            "env": body.env,
        }
