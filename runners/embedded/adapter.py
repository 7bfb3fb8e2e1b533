"""Adapter for the embedded workload: resolve, launch and parse metrics."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from gate.errors import AttuneError, FrameworkRefusal
from gate.models import EffectiveConfig, Recipe, StepRecord
from gate.recipe import refuse_env
from runners.adapter import FrameworkKeys, LaunchSpec
from runners.embedded.config import ENV_READ, WORKLOAD_VERSION, WorkloadConfig, validate_and_derive
from runners.embedded.faults import FAULT_ENV
from runners.source_lines import field_line, relative_to_package
from runners.worker_support import raise_site

_RUNNERS = Path(__file__).resolve().parents[1]
"""Embedded sources are written relative to its parent (``runners/embedded/config.py:125``)."""


class EmbeddedRecipe(BaseModel):
    """The body of an embedded-workload recipe file (after ``framework`` and ``name``)."""

    model_config = ConfigDict(extra="forbid")

    description: str = ""
    """Free text: where the recipe came from, what it is for."""
    config: dict[str, Any] = Field(default_factory=dict)
    """``WorkloadConfig`` keys; unset keys take their defaults."""
    env: dict[str, str] = Field(default_factory=dict)
    """Environment variables for the launch."""
    device_memory_mib: int | None = Field(None, ge=1, strict=True)  # `true` is not 1 MiB
    """The device's memory, as a GPU recipe's ``device_memory_gib`` names its part's: the MiB
    each rank may allocate beyond its start-up (the interpreter and torch), held by the operating
    system (``runners/embedded/device.py``), so a layout that needs more runs out of memory and
    is charged like any failed run (a profile run goes without it). None (the default): the
    machine's memory is the limit. Not part of the effective config: it describes the device,
    not the training; a candidate is edited from the baseline's recipe, so it keeps the
    baseline's device."""


def _error_key(exc: ValidationError) -> tuple[str, str]:
    err = exc.errors()[0]
    key = ".".join(str(p) for p in err["loc"]) or "-"
    return key, err["msg"]


class EmbeddedAdapter:
    """The embedded CPU workload as a framework."""

    name = "embedded"

    def resolve(self, recipe: Recipe) -> EffectiveConfig:
        try:
            body = EmbeddedRecipe.model_validate(recipe.body)
        except ValidationError as exc:
            key, msg = _error_key(exc)
            raise AttuneError(msg.lower(), path=recipe.path, key=key) from None
        refuse_env(recipe)  # again: a Recipe need not come from parse_recipe
        try:
            cfg = validate_and_derive(body.config, body.env)
        except ValidationError as exc:
            key, msg = _error_key(exc)
            if msg == "Extra inputs are not permitted":
                msg = "unknown key (see registry/embedded.yaml for the known ones)"
            site = field_line(WorkloadConfig, key)
            where = f"{relative_to_package(site[0], _RUNNERS)}:{site[1]}" if site else None
            raise self._refusal(msg.lower(), recipe, f"config.{key}", where) from None
        except ValueError as exc:
            key, _, msg = str(exc).partition(": ")
            prefix = "" if key.startswith("env.") else "config."
            where = raise_site(exc, _RUNNERS)
            raise self._refusal(msg, recipe, f"{prefix}{key}", where) from None
        return EffectiveConfig(
            framework=self.name,
            framework_version=WORKLOAD_VERSION,
            values=cfg.model_dump(),
            env=dict(body.env),
            explicit=sorted([*body.config, *(f"env.{k}" for k in body.env)]),
            devices=cfg.data_parallel_size,
        )

    def _refusal(self, msg: str, recipe: Recipe, key: str, where: str | None) -> FrameworkRefusal:
        """The workload's own validation refused ``recipe``: a verdict for a candidate."""
        source = f"{where}@{WORKLOAD_VERSION}" if where else None
        return FrameworkRefusal(
            msg,
            path=recipe.path,
            key=key,
            source=source,
            framework=self.name,
            version=WORKLOAD_VERSION,
        )

    def resolve_many(self, recipes: Sequence[Recipe]) -> list[EffectiveConfig]:
        return [self.resolve(r) for r in recipes]

    def launch(
        self,
        recipe: Recipe,
        effective: EffectiveConfig,
        *,
        steps: int,
        workdir: Path,
        profile: bool,
    ) -> LaunchSpec:
        workdir.mkdir(parents=True, exist_ok=True)
        config_path = workdir / "effective-config.json"
        config_path.write_text(json.dumps(effective.values, indent=2, sort_keys=True))
        ranks = effective.devices
        # each rank held to the recipe's device memory; a profile run is not: the profiler's
        # buffers are host memory on a GPU, and the layout it profiles already ran within it
        memory = None if profile else recipe.body.get("device_memory_mib")
        module = ["runners.embedded.train"]
        if memory is not None:
            module = ["runners.embedded.device", str(int(memory))]
        if ranks == 1:
            argv = [sys.executable, "-m", *module]
        else:
            argv = [
                sys.executable,
                "-m",
                "torch.distributed.run",
                "--standalone",
                f"--nproc-per-node={ranks}",
                "-m",
                *module,
            ]
        argv += ["--config", str(config_path), "--steps", str(steps)]
        trace = None
        if profile:
            argv += ["--profile-dir", str(workdir / "profile")]
            trace = str(workdir / "profile" / "trace.json")
        return LaunchSpec(
            argv=argv,
            env=dict(effective.env),
            framework=self.name,
            pass_env=[FAULT_ENV],  # the workload's test hook: only a harness sets it
            devices=ranks,
            profile_trace=trace,
            device_kind="cpu",
            cpus_per_device=int(effective.values.get("threads") or 1),
        )

    def parse_metrics(self, lines: Iterable[str], context: dict[str, int]) -> list[StepRecord]:
        records = []
        for line in lines:
            line = line.strip()
            if not line.startswith('{"step"'):
                continue
            try:
                records.append(StepRecord.model_validate(json.loads(line)))
            except (ValueError, ValidationError):
                continue  # a torn last line from a killed run
        return records

    def keys(self) -> FrameworkKeys:
        """``WorkloadConfig``'s fields and the environment variables the workload reads."""
        package = Path(__file__).resolve().parents[1]
        keys = {}
        for name in WorkloadConfig.model_fields:
            site = field_line(WorkloadConfig, name)
            assert site is not None, name
            keys[name] = f"{relative_to_package(site[0], package)}:{site[1]}"
        config_py = Path(__file__).with_name("config.py")
        env_line = next(
            n
            for n, text in enumerate(config_py.read_text().splitlines(), 1)
            if text.startswith("ENV_READ =")
        )
        env_site = f"{relative_to_package(str(config_py), package)}:{env_line}"
        keys.update({f"env.{var}": env_site for var in ENV_READ})
        return FrameworkKeys(framework=self.name, version=WORKLOAD_VERSION, keys=keys)
