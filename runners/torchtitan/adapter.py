"""Adapter for torchtitan: resolve recipes with torchtitan's own ConfigManager.

torchtitan is never imported here: ``resolve_many`` runs ``runners.torchtitan.resolve_worker``
in a subprocess (one for any number of recipes, so the import is paid once) whose environment
holds no secrets. The worker parses each recipe as ``torchtitan/train.py`` would and then derives
what the Trainer derives before its first step (data-parallel degree, global batch, gradient
accumulation). ``launch`` and ``parse_metrics`` are not implemented yet: launching torchtitan
needs a GPU backend.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from gate.errors import AttuneError
from gate.models import EffectiveConfig, Recipe, StepRecord
from runners.adapter import FrameworkKeys, LaunchSpec
from runners.resolve_process import run_worker
from runners.torchtitan.recipe import TorchtitanRecipe

TORCHTITAN_PATH_VAR = "ATTUNE_TORCHTITAN_PATH"
"""Directory of a torchtitan checkout to resolve with, instead of the installed torchtitan."""

INSTALL_HINT = (
    "install torchtitan (pip install tyro==1.0.17 spmd_types==0.2.3 torchdata tokenizers "
    "tensorboard 'datasets>=3.6.0,<4.8.0' && pip install --no-deps torchtitan==0.3.0) or set "
    "ATTUNE_TORCHTITAN_PATH to a torchtitan checkout"
)


def _parse_body(recipe: Recipe) -> TorchtitanRecipe:
    try:
        return TorchtitanRecipe.model_validate(recipe.body)
    except ValidationError as exc:
        err = exc.errors()[0]
        key = ".".join(str(p) for p in err["loc"]) or None
        msg = err["msg"].removeprefix("Value error, ")
        raise AttuneError(msg.lower(), path=recipe.path, key=key) from None


def _ask_worker(request: dict[str, Any]) -> dict[str, Any]:
    return run_worker(
        "runners.torchtitan.resolve_worker",
        request,
        label="torchtitan",
        missing_module="torchtitan",
        install_hint=INSTALL_HINT,
        extra_path_vars=(TORCHTITAN_PATH_VAR,),
    )


class TorchtitanAdapter:
    """torchtitan as a framework: effective config from its ConfigManager and the Trainer's
    derivations."""

    name = "torchtitan"

    def resolve(self, recipe: Recipe) -> EffectiveConfig:
        return self.resolve_many([recipe])[0]

    def resolve_many(self, recipes: Sequence[Recipe]) -> list[EffectiveConfig]:
        """Resolve ``recipes`` in one worker process; the first failing one is an AttuneError."""
        configs = []
        for outcome in self.resolve_each(recipes):
            if isinstance(outcome, AttuneError):
                raise outcome
            configs.append(outcome)
        return configs

    def resolve_each(self, recipes: Sequence[Recipe]) -> list[EffectiveConfig | AttuneError]:
        """Resolve ``recipes`` in one worker process: a config, or the error naming the recipe
        file and key, for each. A malformed recipe body still raises at once."""
        bodies = [_parse_body(r) for r in recipes]
        if not bodies:
            return []
        request = {
            "recipes": [
                {
                    "module": b.module,
                    "config": b.config,
                    "overrides": b.overrides,
                    "world_size": b.total_devices,
                    "env": b.env,
                }
                for b in bodies
            ]
        }
        answer = _ask_worker(request)
        version = str(answer["version"])
        outcomes: list[EffectiveConfig | AttuneError] = []
        for recipe, body, result in zip(recipes, bodies, answer["results"], strict=True):
            if "error" in result:
                key = str(result.get("key") or "overrides")
                outcomes.append(AttuneError(str(result["error"]), path=recipe.path, key=key))
                continue
            explicit = set(result["explicit"])
            explicit.update(f"env.{k}" for k in body.env)
            outcomes.append(
                EffectiveConfig(
                    framework=self.name,
                    framework_version=version,
                    values=result["values"],
                    env=result["env"],
                    explicit=sorted(explicit),
                    devices=body.total_devices,
                )
            )
        return outcomes

    def launch(
        self, effective: EffectiveConfig, *, steps: int, workdir: Path, profile: bool
    ) -> LaunchSpec:
        """Not implemented yet: torchtitan runs need a GPU backend."""
        raise AttuneError("launching torchtitan needs a GPU backend; attune gate check works")

    def parse_metrics(self, lines: Iterable[str]) -> list[StepRecord]:
        """Not implemented yet (nothing launches torchtitan); no records."""
        return []

    def keys(self) -> FrameworkKeys:
        """Every key of the job config's command line (``--module``, ``--config`` and the
        Trainer.Config fields tyro exposes, over every config function of the models that ship
        with torchtitan and build on this install) and the dataclass field defining it."""
        answer = _ask_worker({"keys": True})
        return FrameworkKeys(framework=self.name, version=answer["version"], keys=answer["keys"])
