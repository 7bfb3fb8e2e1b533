"""The body of a Megatron-LM recipe file (after ``framework`` and ``name``)."""

from __future__ import annotations

from typing import Self

from pydantic import BaseModel, ConfigDict, Field, model_validator


class MegatronRecipe(BaseModel):
    """Megatron command-line tokens plus the launch shape they are validated against."""

    model_config = ConfigDict(extra="forbid")

    description: str = ""
    """Free text: where the recipe came from, what it is for."""
    args: list[str]
    """Command-line tokens exactly as passed to Megatron (``["--num-layers", "32", ...]``)."""
    world_size: int | None = Field(default=None, ge=1)
    """Total ranks; give either this or ``nodes`` x ``gpus_per_node``."""
    nodes: int | None = Field(default=None, ge=1)
    gpus_per_node: int | None = Field(default=None, ge=1)
    gpu_arch: str = Field(pattern=r"^sm\d{2,3}$")
    """Target GPU architecture (``sm80``, ``sm90``, ``sm100``), pinned during validation."""
    env: dict[str, str] = Field(default_factory=dict)
    """Environment variables for the launch; Megatron's validation reads some of them."""

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

    @property
    def arch_major(self) -> int:
        """Compute-capability major version: ``sm90`` -> 9, ``sm100`` -> 10."""
        return int(self.gpu_arch[2:-1])
