"""The body of a Megatron-LM recipe file (after ``framework`` and ``name``)."""

from __future__ import annotations

from pydantic import Field

from runners.worker_adapter import DistributedRecipe


class MegatronRecipe(DistributedRecipe):
    """Megatron command-line tokens plus the launch shape they are validated against."""

    args: list[str]
    """Command-line tokens exactly as passed to Megatron (``["--num-layers", "32", ...]``)."""
    gpu_arch: str = Field(pattern=r"^sm\d{2,3}$")
    """Target GPU architecture (``sm80``, ``sm90``, ``sm100``), pinned during validation."""
    hardware: str | None = Field(default=None, min_length=1)
    """The part the recipe runs on (``h100-sxm``, ``h200``, ``gb200``: registry/hardware/
    parts.yaml) for ``attune predict``; the framework never sees it."""
    transformer_engine: str | None = Field(default=None, pattern=r"^(none|\d+(\.\d+){0,2})$")
    """Transformer Engine version on the launch machine (``2.9``, ``1.13.0``), or ``none``:
    what every TE probe of Megatron's validation (``validate_args`` and the model-build checks)
    is told. Unset: new enough for every one of them
    (``runners.megatron.model_checks.ASSUMED_TE``)."""

    @property
    def arch_major(self) -> int:
        """Compute-capability major version: ``sm90`` -> 9, ``sm100`` -> 10."""
        return int(self.gpu_arch[2:-1])
