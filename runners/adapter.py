"""The framework adapter interface (the table of known adapters is ``runners/adapters.py``)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Literal, Protocol

from pydantic import BaseModel, Field

from gate.models import EffectiveConfig, Recipe, StepRecord


class LaunchSpec(BaseModel):
    """A launch, ready for a backend: what to run, where, with which environment."""

    argv: list[str]
    """Command line; argv[0] is resolved on PATH by the backend."""
    env: dict[str, str] = Field(default_factory=dict)
    """The recipe's environment: names on ``framework``'s allow-list only (checked again by
    ``runners.launch_env`` when a backend builds the launch's environment)."""
    framework: str = ""
    """Whose allow-list ``env`` is held to; a launch that names none may set no variable."""
    pass_env: list[str] = Field(default_factory=list)
    """More of the runner's own variables the launch inherits besides ``BASE_ENV`` and the
    operator's ``ATTUNE_LAUNCH_PASS_ENV`` (the embedded workload's test hook)."""
    devices: int
    """Devices the launch occupies."""
    profile_trace: str | None = None
    """Where the launch writes its profiler trace (a file, or a folder of one per rank)."""
    nodes: int = 1
    """Machines the launch spans; the local backend runs one."""
    hang_timeout_s: float | None = None
    """No new output for this long and the launch is killed as hung."""
    metrics_context: dict[str, int] = Field(default_factory=dict)
    """What the adapter's metrics parser needs beside the log (``seq_length``...)."""
    harness: list[str] = Field(default_factory=list)
    """The benchmark harness's own arguments in ``argv`` (the same for every trial)."""
    overridden: list[str] = Field(default_factory=list)
    """The recipe's own arguments the harness replaced."""
    device_kind: Literal["gpu", "cpu"] = "gpu"
    """What one of ``devices`` is: a GPU, or a CPU rank (the embedded workload); a cluster
    backend asks for GPUs or CPUs per node accordingly."""
    cpus_per_device: int = Field(1, ge=1)
    """CPU cores one device's process keeps busy (the embedded workload: its threads); a
    cluster backend reserves them for a CPU launch."""
    avoid_nodes: list[str] = Field(default_factory=list)
    """Nodes that ran earlier runs this one should not share (calibration spreads its baseline
    runs): a backend with a choice of nodes prefers others."""


class FrameworkKeys(BaseModel):
    """Every configuration key a framework defines, as its own parser sees them."""

    framework: str
    version: str
    """Version of the framework code that was inspected."""
    keys: dict[str, str]
    """Key -> where it is defined, ``path:line`` relative to the directory holding the
    framework's top-level package (``megatron/training/arguments.py:2201``)."""


class FrameworkAdapter(Protocol):
    """What attune needs from a training framework."""

    name: str

    def resolve(self, recipe: Recipe) -> EffectiveConfig:
        """The configuration the framework will really run, without launching it.

        Raises AttuneError naming the recipe file and key for bad input.
        """

    def resolve_many(self, recipes: Sequence[Recipe]) -> list[EffectiveConfig]:
        """``resolve`` for several recipes at once (one framework import for all of them)."""

    def launch(
        self,
        recipe: Recipe,
        effective: EffectiveConfig,
        *,
        steps: int,
        workdir: Path,
        profile: bool,
    ) -> LaunchSpec:
        """Write what the launch needs into ``workdir`` and return the command: the recipe
        (resolved as ``effective``) run for ``steps`` benchmark steps."""

    def parse_metrics(self, lines: Iterable[str], context: dict[str, int]) -> list[StepRecord]:
        """Per-step records from the launch's output (stdout, then stderr); other lines are
        ignored. ``context`` is the launch's ``metrics_context``."""

    def keys(self) -> FrameworkKeys:
        """Every key the framework's parser defines, for ``attune registry coverage``.

        Keys that validation derives (not parser arguments) are not included.
        """
