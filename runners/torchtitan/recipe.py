"""The body of a torchtitan recipe file (after ``framework`` and ``name``)."""

from __future__ import annotations

from typing import Self

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

RESERVED_FLAGS = ("--module", "--config")
"""ConfigManager's own flags: a recipe names them with ``module`` and ``config`` instead."""


class TorchtitanRecipe(BaseModel):
    """A torchtitan config function plus command-line overrides and the launch shape."""

    model_config = ConfigDict(extra="forbid")

    description: str = ""
    """Free text: where the recipe came from, what it is for."""
    module: str = Field(min_length=1)
    """``--module``: a model under ``torchtitan/models/`` (``llama3``) or a dotted module path."""
    config: str = Field(min_length=1)
    """``--config``: a function of that module's ``config_registry`` (``llama3_8b``)."""
    overrides: list[str] = Field(default_factory=list)
    """Command-line tokens exactly as passed after ``--module``/``--config``
    (``["--training.seq_len", "8192", "activation-checkpoint:full"]``)."""
    world_size: int | None = Field(default=None, ge=1)
    """Total ranks; give either this or ``nodes`` x ``gpus_per_node``."""
    nodes: int | None = Field(default=None, ge=1)
    gpus_per_node: int | None = Field(default=None, ge=1)
    env: dict[str, str] = Field(default_factory=dict)
    """Environment variables for the launch."""

    @field_validator("overrides")
    @classmethod
    def _no_selector_flags(cls, tokens: list[str]) -> list[str]:
        for token in tokens:
            flag = token.split("=", 1)[0]
            if flag in RESERVED_FLAGS:
                raise ValueError(f"{flag} belongs in the recipe's '{flag[2:]}' key, not here")
        return tokens

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
