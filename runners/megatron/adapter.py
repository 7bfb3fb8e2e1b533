"""Adapter for Megatron-LM: resolve recipes with Megatron's own argument validation.

Megatron is never imported here: ``resolve_many`` runs ``runners.megatron.resolve_worker`` in a
subprocess (one for any number of recipes, so the import is paid once) whose environment holds
no secrets. ``launch`` and ``parse_metrics`` are not implemented yet: launching Megatron needs a
GPU backend.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from gate.errors import AttuneError
from gate.models import EffectiveConfig, Recipe, StepRecord
from runners.adapter import FrameworkKeys, LaunchSpec
from runners.megatron.recipe import MegatronRecipe
from runners.resolve_process import run_worker

MEGATRON_PATH_VAR = "ATTUNE_MEGATRON_PATH"
"""Directory of a Megatron-LM checkout to resolve with, instead of the installed megatron-core."""

INSTALL_HINT = (
    "install megatron-core (pip install triton typing_extensions && pip install --no-deps "
    "--ignore-requires-python megatron-core==0.19.2) or set ATTUNE_MEGATRON_PATH to a "
    "Megatron-LM checkout"
)


def flag_dest(token: str) -> str | None:
    """The default argparse dest of a ``--flag`` / ``--flag=value`` token; None for a value.

    A fallback only: the worker reports the real dests from Megatron's parser (``--fp8-format``
    stores ``fp8``, ``--no-mmap-bin-files`` stores ``mmap_bin_files``).
    """
    if not token.startswith("--") or len(token) == 2:
        return None
    name = token[2:].split("=", 1)[0]
    return name.replace("-", "_")


def _parse_body(recipe: Recipe) -> MegatronRecipe:
    try:
        return MegatronRecipe.model_validate(recipe.body)
    except ValidationError as exc:
        err = exc.errors()[0]
        key = ".".join(str(p) for p in err["loc"]) or None
        msg = err["msg"].removeprefix("Value error, ")
        raise AttuneError(msg.lower(), path=recipe.path, key=key) from None


def _ask_worker(request: dict[str, Any]) -> dict[str, Any]:
    return run_worker(
        "runners.megatron.resolve_worker",
        request,
        label="Megatron",
        missing_module="megatron",
        install_hint=INSTALL_HINT,
        extra_path_vars=(MEGATRON_PATH_VAR,),
    )


class MegatronAdapter:
    """Megatron-LM as a framework: effective config from its parse_args + validate_args."""

    name = "megatron"

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
        """Resolve ``recipes`` in one worker process: a config, or the error naming the recipe,
        for each. A malformed recipe body still raises at once (nothing is resolved)."""
        bodies = [_parse_body(r) for r in recipes]
        if not bodies:
            return []
        request = {
            "recipes": [
                {
                    "args": b.args,
                    "world_size": b.total_devices,
                    "gpu_arch": b.gpu_arch,
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
                message = str(result["error"])
                key, sep, rest = message.partition(": ")
                text = rest if key == "args" and sep else message
                outcomes.append(AttuneError(text, path=recipe.path, key="args"))
                continue
            dests = result.get("explicit")
            if dests is None:
                dests = [d for d in (flag_dest(t) for t in body.args) if d is not None]
            explicit = set(dests)
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
        """Not implemented yet: Megatron runs need a GPU backend."""
        raise AttuneError("launching Megatron needs a GPU backend; attune gate check works")

    def parse_metrics(self, lines: Iterable[str]) -> list[StepRecord]:
        """Not implemented yet (nothing launches Megatron); no records."""
        return []

    def keys(self) -> FrameworkKeys:
        """Every dest of Megatron's parser and the line defining it (a config dataclass field
        for the arguments ``ArgumentGroupFactory`` builds)."""
        answer = _ask_worker({"keys": True})
        return FrameworkKeys(framework=self.name, version=answer["version"], keys=answer["keys"])
