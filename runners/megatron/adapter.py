"""Adapter for Megatron-LM: resolve recipes with Megatron's own argument validation.

Megatron is never imported here: ``runners.megatron.resolve_worker`` runs in a subprocess (one
for any number of recipes, so the import is paid once) whose environment holds no secrets.
"""

from __future__ import annotations

from typing import Any, ClassVar

from runners.megatron.recipe import MegatronRecipe
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

    def request_item(self, body: MegatronRecipe) -> dict[str, Any]:
        return {
            "args": body.args,
            "world_size": body.total_devices,
            "gpu_arch": body.gpu_arch,
            "env": body.env,
        }
