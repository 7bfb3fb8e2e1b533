"""What the Megatron-LM and torchtitan adapters share: a recipe body with a launch shape,
resolution by a resolve worker in a secret-free subprocess (one per gate check), and a launch
through torchrun with the benchmark harness's arguments and the runner's settings.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, ClassVar, Generic, Self, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from gate.errors import AttuneError, FrameworkRefusal
from gate.models import EffectiveConfig, Recipe, StepRecord, ValidationWarning
from gate.recipe import refuse_env
from runners.adapter import FrameworkKeys, LaunchSpec
from runners.harness import HarnessArgs
from runners.resolve_cache import ResolveCache
from runners.resolve_process import run_worker
from runners.runner_settings import RunnerSettings

_CACHES: dict[str, ResolveCache] = {}
"""Worker module -> its answers: shared by every adapter instance of the process."""


class DistributedRecipe(BaseModel):
    """The launch shape and environment of a multi-device recipe body."""

    model_config = ConfigDict(extra="forbid")

    description: str = ""
    """Free text: where the recipe came from, what it is for."""
    world_size: int | None = Field(default=None, ge=1)
    """Total ranks; give either this or ``nodes`` x ``gpus_per_node``."""
    nodes: int | None = Field(default=None, ge=1)
    gpus_per_node: int | None = Field(default=None, ge=1)
    env: dict[str, str] = Field(default_factory=dict)
    """Environment variables for the launch; the framework's validation may read some."""
    device_memory_gib: float | None = Field(default=None, gt=0)
    """Memory of one device (GiB) for attune's pre-launch memory check (``gate.memory``); the
    framework never sees it. Unset: what ``gpu_arch`` stands for, its smallest part."""

    @model_validator(mode="after")
    def _one_size_form(self) -> Self:
        split = self.nodes is not None or self.gpus_per_node is not None
        if self.world_size is not None and split:
            raise ValueError("give either world_size or nodes x gpus_per_node, not both")
        if self.world_size is None and (self.nodes is None or self.gpus_per_node is None):
            raise ValueError("give world_size, or both nodes and gpus_per_node")
        return self

    @property
    def total_devices(self) -> int:
        """World size: ``world_size`` or ``nodes`` x ``gpus_per_node``."""
        if self.world_size is not None:
            return self.world_size
        assert self.nodes is not None and self.gpus_per_node is not None
        return self.nodes * self.gpus_per_node


BodyT = TypeVar("BodyT", bound=DistributedRecipe)


class WorkerAdapter(Generic[BodyT]):
    """A FrameworkAdapter whose resolution runs ``worker`` (``python -m``) in a subprocess."""

    name: str
    body_model: ClassVar[type[DistributedRecipe]]
    worker: ClassVar[str]
    """Module of the resolve worker."""
    missing_module: ClassVar[str]
    install_hint: ClassVar[str]
    path_var: ClassVar[str]
    """Environment variable naming a framework checkout to resolve with."""
    distribution: ClassVar[str]
    """The framework's package (its installed version is part of the resolution cache key)."""
    error_key: ClassVar[str] = "args"
    """Recipe key an error of the framework's own validation is reported under."""

    def request_item(self, body: BodyT) -> dict[str, Any]:
        """What the worker needs to resolve one recipe."""
        raise NotImplementedError

    def explicit(self, body: BodyT, result: dict[str, Any]) -> set[str]:
        """Keys the recipe set itself (the worker's answer, by default)."""
        return set(result["explicit"])

    def _ask(self, request: dict[str, Any]) -> dict[str, Any]:
        return run_worker(
            self.worker,
            request,
            label=self.label,
            missing_module=self.missing_module,
            install_hint=self.install_hint,
            extra_path_vars=(self.path_var,),
        )

    @property
    def label(self) -> str:
        return {"megatron": "Megatron"}.get(self.name, self.name)

    def _body(self, recipe: Recipe) -> BodyT:
        """The recipe's body, validated; its ``env`` held to the allow-list again before a
        resolve worker or a launch sees it (``EnvRefused``)."""
        try:
            body = self.body_model.model_validate(recipe.body)
        except ValidationError as exc:
            err = exc.errors()[0]
            key = ".".join(str(p) for p in err["loc"]) or None
            msg = err["msg"].removeprefix("Value error, ")
            raise AttuneError(msg.lower(), path=recipe.path, key=key) from None
        refuse_env(recipe)
        return body  # type: ignore[return-value]

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
        """Resolve ``recipes`` in one worker process: a config, or the framework's refusal
        (a ``FrameworkRefusal`` naming the recipe file, key, message and the framework line
        that raised), for each. A malformed recipe body still raises at once (nothing runs)."""
        bodies = [self._body(r) for r in recipes]
        if not bodies:
            return []
        answers = self._answers([self.request_item(b) for b in bodies])
        outcomes: list[EffectiveConfig | AttuneError] = []
        for recipe, body, (version, result) in zip(recipes, bodies, answers, strict=True):
            if "error" in result:
                outcomes.append(self._refusal(recipe, version, result))
                continue
            explicit = self.explicit(body, result)
            explicit.update(f"env.{k}" for k in body.env)
            outcomes.append(
                EffectiveConfig(
                    framework=self.name,
                    framework_version=version,
                    values=result["values"],
                    env=result["env"],
                    explicit=sorted(explicit),
                    devices=body.total_devices,
                    warnings=[ValidationWarning(**w) for w in result.get("warnings", [])],
                )
            )
        return outcomes

    def _refusal(self, recipe: Recipe, version: str, result: dict[str, Any]) -> FrameworkRefusal:
        """A worker's ``{"error", "key", "source"}`` as the refusal of ``recipe``."""
        source = result.get("source")
        return FrameworkRefusal(
            str(result["error"]),
            path=recipe.path,
            key=str(result.get("key") or self.error_key),
            source=f"{source}@{version}" if source else None,
            framework=self.name,
            version=version,
        )

    def _cache(self) -> ResolveCache:
        if self.worker not in _CACHES:
            _CACHES[self.worker] = ResolveCache(self.worker, self.distribution, self.path_var)
        return _CACHES[self.worker]

    def _answers(self, items: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
        """(framework version, the worker's result) per item: remembered ones from the cache,
        the others from ONE worker process (duplicates asked once)."""
        cache = self._cache()
        keys = [cache.key(item) for item in items]
        missing = {k: item for k, item in zip(keys, items, strict=True) if cache.get(k) is None}
        if missing:
            answer = self._ask({"recipes": list(missing.values())})
            for key, result in zip(missing, answer["results"], strict=True):
                cache.put(key, {"version": str(answer["version"]), "result": result})
        out = []
        for key in keys:
            found = cache.get(key)
            assert found is not None
            out.append((str(found["version"]), dict(found["result"])))
        return out

    def keys(self) -> FrameworkKeys:
        """Every key of the framework's parser and the line defining it (from the worker)."""
        answer = self._ask({"keys": True})
        return FrameworkKeys(framework=self.name, version=answer["version"], keys=answer["keys"])

    def entry(self, body: BodyT, effective: EffectiveConfig, settings: RunnerSettings) -> list[str]:
        """What torchrun runs for each rank (a script or ``-m module`` and the selectors)."""
        raise NotImplementedError

    def harness(
        self, body: BodyT, effective: EffectiveConfig, *, steps: int, workdir: Path, profile: bool
    ) -> HarnessArgs:
        """The recipe's arguments with the benchmark harness's in place."""
        raise NotImplementedError

    def metrics_context(self, effective: EffectiveConfig) -> dict[str, int]:
        """What ``parse_metrics`` needs beside the log."""
        raise NotImplementedError

    def launch(
        self,
        recipe: Recipe,
        effective: EffectiveConfig,
        *,
        steps: int,
        workdir: Path,
        profile: bool,
        settings: RunnerSettings | None = None,
    ) -> LaunchSpec:
        """torchrun over the recipe's shape, the framework's entry point, the recipe's
        arguments and the harness's. The interpreter, launcher and framework checkout come from
        the runner's settings; the environment is the recipe's ``env`` and what the runner
        names, nothing else."""
        settings = settings or RunnerSettings.from_env()
        body = self._body(recipe)
        nodes = body.nodes or 1
        per_node = body.gpus_per_node or body.total_devices
        workdir.mkdir(parents=True, exist_ok=True)
        harness = self.harness(body, effective, steps=steps, workdir=workdir, profile=profile)
        argv = settings.torchrun(nodes=nodes, gpus_per_node=per_node)
        argv += [*self.entry(body, effective, settings), *harness.argv]
        return LaunchSpec(
            argv=argv,
            env=dict(body.env),
            framework=self.name,
            pass_env=list(settings.pass_env),
            devices=body.total_devices,
            nodes=nodes,
            profile_trace=harness.profile_trace,
            hang_timeout_s=settings.hang_timeout_s,
            metrics_context=self.metrics_context(effective),
            harness=harness.harness,
            overridden=harness.overridden,
        )

    def parse_metrics(self, lines: Iterable[str], context: dict[str, int]) -> list[StepRecord]:
        raise NotImplementedError
