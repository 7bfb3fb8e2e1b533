"""The body of a torchtitan recipe file (after ``framework`` and ``name``)."""

from __future__ import annotations

from pydantic import Field, field_validator

from runners.worker_adapter import DistributedRecipe

RESERVED_FLAGS = ("--module", "--config")
"""ConfigManager's own flags: a recipe names them with ``module`` and ``config`` instead."""


class TorchtitanRecipe(DistributedRecipe):
    """A torchtitan config function plus command-line overrides and the launch shape."""

    module: str = Field(min_length=1)
    """``--module``: a model under ``torchtitan/models/`` (``llama3``) or a dotted module path."""
    config: str = Field(min_length=1)
    """``--config``: a function of that module's ``config_registry`` (``llama3_8b``)."""
    gpu_arch: str | None = Field(default=None, pattern=r"^sm\d{2,3}$")
    """Target GPU architecture (``sm90``, ``sm100``): torchtitan's device probes (float8 needs
    sm89+, MXFP8 and NVFP4 sm100) are answered from it during resolution
    (``runners.torchtitan.machine``). Unset: checked as on an H100 (sm90), and a refusal by a
    device check says so."""
    overrides: list[str] = Field(default_factory=list)
    """Command-line tokens exactly as passed after ``--module``/``--config``
    (``["--training.seq_len", "8192", "activation-checkpoint:full"]``)."""

    @field_validator("overrides")
    @classmethod
    def _no_selector_flags(cls, tokens: list[str]) -> list[str]:
        for token in tokens:
            flag = token.split("=", 1)[0]
            if flag in RESERVED_FLAGS:
                raise ValueError(f"{flag} belongs in the recipe's '{flag[2:]}' key, not here")
        return tokens
