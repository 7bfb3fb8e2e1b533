"""Adapter for torchtitan: resolve recipes with torchtitan's own ConfigManager, launch
``torchtitan.train`` through torchrun, read its training log.

torchtitan is never imported here: ``runners.torchtitan.resolve_worker`` runs in a subprocess
(one for any number of recipes, so the import is paid once) whose environment holds no secrets.
The worker parses each recipe as ``torchtitan/train.py`` would and then derives what the
Trainer derives before its first step (data-parallel degree, global batch, gradient
accumulation).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any, ClassVar

from gate.models import EffectiveConfig, StepRecord
from runners.cli_edit import edit_torchtitan_overrides
from runners.harness import HarnessArgs, torchtitan_overrides
from runners.runner_settings import RunnerSettings
from runners.torchtitan.metrics import parse_torchtitan_log
from runners.torchtitan.offline import OfflineData
from runners.torchtitan.recipe import TorchtitanRecipe, model_module
from runners.worker_adapter import DistributedRecipe, WorkerAdapter

TORCHTITAN_PATH_VAR = "ATTUNE_TORCHTITAN_PATH"
"""Directory of a torchtitan checkout to resolve with, instead of the installed torchtitan."""

INSTALL_HINT = (
    "install torchtitan (pip install tyro==1.0.17 spmd_types==0.2.3 torchdata tokenizers "
    "tensorboard 'datasets>=3.6.0,<4.8.0' torchao==0.18.0 && pip install --no-deps "
    "torchtitan==0.3.0) or set "
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
    tokens_key = "overrides"

    def request_item(self, body: TorchtitanRecipe) -> dict[str, Any]:
        return {
            "module": body.module,
            "config": body.config,
            "overrides": body.overrides,
            "world_size": body.total_devices,
            "env": body.env,
            "gpu_arch": body.gpu_arch,
        }

    def edit_tokens(self, tokens: list[str], changes: dict[str, Any]) -> list[str]:
        """``overrides`` with ``changes`` (dotted config keys) as tyro's flags."""
        return edit_torchtitan_overrides(tokens, changes)

    def entry(
        self, body: TorchtitanRecipe, effective: EffectiveConfig, settings: RunnerSettings
    ) -> list[str]:
        """``-m torchtitan.train`` of the runner's interpreter, with the recipe's selectors."""
        module = model_module(body.module)  # only torchtitan.models.*: nothing else imports
        return ["-m", "torchtitan.train", "--module", module, "--config", body.config]

    def harness(
        self,
        body: TorchtitanRecipe,
        effective: EffectiveConfig,
        *,
        steps: int,
        workdir: Path,
        profile: bool,
    ) -> HarnessArgs:
        out = torchtitan_overrides(body.overrides, steps=steps, workdir=workdir, profile=profile)
        local = OfflineData.from_env().overrides()  # the runner's tokenizer and dataset
        if not local:
            return out
        return out.model_copy(
            update={"argv": [*out.argv, *local], "harness": [*out.harness, *local]}
        )

    def metrics_context(self, effective: EffectiveConfig) -> dict[str, int]:
        v = effective.values
        tokens = int(v["training.global_batch_size"]) * int(v["training.seq_len"])
        context = {"tokens_per_step": tokens, "devices": effective.devices}
        pp = int(v.get("parallelism.pipeline_parallel_degree") or 1)
        if pp > 1:  # only the last stage logs a loss (runners.torchtitan.metrics)
            context["pipeline_parallel"] = pp
        return context

    def parse_metrics(self, lines: Iterable[str], context: dict[str, int]) -> list[StepRecord]:
        return parse_torchtitan_log(
            lines,
            tokens_per_step=context["tokens_per_step"],
            devices=context["devices"],
            pipeline_parallel=context.get("pipeline_parallel", 1),
        )
