"""Adapter for Megatron-LM: resolve recipes with Megatron's own argument validation, launch
``pretrain_gpt.py`` through torchrun, read its training log.

Megatron is never imported here: ``runners.megatron.resolve_worker`` runs in a subprocess (one
for any number of recipes, so the import is paid once) whose environment holds no secrets.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any, ClassVar

from gate.errors import AttuneError
from gate.models import EffectiveConfig, StepRecord
from runners.cli_edit import OptionTable, edit_megatron_args
from runners.harness import HarnessArgs, megatron_args
from runners.megatron.metrics import parse_megatron_log
from runners.megatron.recipe import MegatronRecipe
from runners.runner_settings import RunnerSettings
from runners.worker_adapter import DistributedRecipe, WorkerAdapter

MEGATRON_PATH_VAR = "ATTUNE_MEGATRON_PATH"
"""Directory of a Megatron-LM checkout to resolve with, instead of the installed megatron-core."""

INSTALL_HINT = (
    "install megatron-core (pip install triton typing_extensions && pip install --no-deps "
    "--ignore-requires-python megatron-core==0.19.2) or set ATTUNE_MEGATRON_PATH to a "
    "Megatron-LM checkout"
)


class MegatronAdapter(WorkerAdapter[MegatronRecipe]):
    """Megatron-LM as a framework: effective config from its parse_args + validate_args.

    ``keys()`` lists every dest of Megatron's parser and the line defining it (a config
    dataclass field for the arguments ``ArgumentGroupFactory`` builds).
    """

    name = "megatron"
    body_model: ClassVar[type[DistributedRecipe]] = MegatronRecipe
    worker = "runners.megatron.resolve_worker"
    missing_module = "megatron"
    install_hint = INSTALL_HINT
    path_var = MEGATRON_PATH_VAR
    distribution = "megatron-core"
    tokens_key = "args"
    min_warmup = 2
    """Megatron's timers are not reset after the first logged iteration, so iteration 2's
    elapsed time still averages in iteration 1 (megatron/training/training.py:2594 at
    core_v0.19.0): neither may be scored."""

    def request_item(self, body: MegatronRecipe) -> dict[str, Any]:
        item = {
            "args": body.args,
            "world_size": body.total_devices,
            "gpu_arch": body.gpu_arch,
            "env": body.env,
        }
        if body.transformer_engine is not None:
            item["transformer_engine"] = body.transformer_engine
        return item

    def edit_tokens(self, tokens: list[str], changes: dict[str, Any]) -> list[str]:
        """``args`` with ``changes`` (Megatron dests) written as Megatron's own options."""
        return edit_megatron_args(tokens, changes, self.options())

    def options(self) -> OptionTable:
        """How Megatron's parser sets each dest, from the worker (remembered)."""
        cache = self._cache()
        key = cache.key({"options": True})
        found = cache.get(key)
        if found is None:
            found = {"options": self._ask({"options": True})["options"]}
            cache.put(key, found)
        return dict(found["options"])

    def entry(
        self, body: MegatronRecipe, effective: EffectiveConfig, settings: RunnerSettings
    ) -> list[str]:
        """``pretrain_gpt.py`` of the runner's Megatron-LM checkout (not in the wheel)."""
        if settings.megatron_path is None:
            raise AttuneError(
                "launching Megatron-LM needs ATTUNE_MEGATRON_PATH on the runner: a Megatron-LM "
                "checkout at the recipe's version (pretrain_gpt.py is not in the megatron-core "
                "wheel)"
            )
        script = settings.megatron_path / "pretrain_gpt.py"
        if not script.is_file():
            raise AttuneError(f"no pretrain_gpt.py in ATTUNE_MEGATRON_PATH ({script.parent})")
        return [str(script)]

    def harness(
        self,
        body: MegatronRecipe,
        effective: EffectiveConfig,
        *,
        steps: int,
        workdir: Path,
        profile: bool,
    ) -> HarnessArgs:
        return megatron_args(
            body.args,
            steps=steps,
            global_batch_size=int(effective.values["global_batch_size"]),
            devices=body.total_devices,
            workdir=workdir,
            profile=profile,
        )

    def metrics_context(self, effective: EffectiveConfig) -> dict[str, int]:
        return {"seq_length": int(effective.values["seq_length"])}

    def parse_metrics(self, lines: Iterable[str], context: dict[str, int]) -> list[StepRecord]:
        return parse_megatron_log(lines, seq_length=context["seq_length"])
