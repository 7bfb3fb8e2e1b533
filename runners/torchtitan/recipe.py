"""The body of a torchtitan recipe file (after ``framework`` and ``name``)."""

from __future__ import annotations

import re

from pydantic import Field, field_validator

from runners.worker_adapter import DistributedRecipe

RESERVED_FLAGS = ("--module", "--config")
"""ConfigManager's own flags: a recipe names them with ``module`` and ``config`` instead."""
MODEL_PACKAGE = "torchtitan.models"
"""The only package a recipe's ``module`` may name a model from."""
MODULE_RE = re.compile(r"^(?:torchtitan\.models\.)?[a-z][a-z0-9_]*$")
"""``llama3`` (looked up by torchtitan among its own models) or ``torchtitan.models.llama3``."""


def model_module(module: str) -> str:
    """The module path torchtitan is given for a recipe's ``module``: always under
    ``torchtitan.models`` (torchtitan imports a name it does not list as a top-level module,
    so ``llama3`` is passed as ``torchtitan.models.llama3``)."""
    return module if module.startswith(f"{MODEL_PACKAGE}.") else f"{MODEL_PACKAGE}.{module}"


CONFIG_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
CODE_OPTION_PARTS = ("imports", "import", "module", "module_path", "import_path")
CODE_OPTION_ENDINGS = ("_imports", "_import", "_module", "_module_path", "_import_path")
"""An override option whose dotted part is or ends in one of these names code to import
(``--override.imports``, any ``*.imports`` or module-path option): refused."""


def imports_code(flag: str) -> bool:
    """Whether an override's option names code to import (``--override.imports``), in tyro's
    spelling or the field's. ``--parallelism.module_fqns_per_model_part`` names model parts,
    not code, and passes."""
    if not flag.startswith("-"):
        return False
    parts = flag.lstrip("-").lower().replace("-", "_").split(".")
    return any(p in CODE_OPTION_PARTS or p.endswith(CODE_OPTION_ENDINGS) for p in parts)


class TorchtitanRecipe(DistributedRecipe):
    """A torchtitan config function plus command-line overrides and the launch shape."""

    module: str = Field(min_length=1)
    """``--module``: a model under ``torchtitan/models/`` (``llama3``, or
    ``torchtitan.models.llama3``); nothing outside torchtitan's model package is imported."""
    config: str = Field(min_length=1)
    """``--config``: a function of that module's ``config_registry`` (``llama3_8b``)."""
    gpu_arch: str | None = Field(default=None, pattern=r"^sm\d{2,3}$")
    """Target GPU architecture (``sm90``, ``sm100``): torchtitan's device probes (float8 needs
    sm89+, MXFP8 and NVFP4 sm100) are answered from it during resolution
    (``runners.torchtitan.machine``). Unset: checked as on an H100 (sm90), and a refusal by a
    device check says so."""
    hardware: str | None = Field(default=None, min_length=1)
    """The part the recipe runs on (``h100-sxm``, ``h200``, ``gb200``: registry/hardware/
    parts.yaml) for ``attune predict``; the framework never sees it."""
    overrides: list[str] = Field(default_factory=list)
    """Command-line tokens exactly as passed after ``--module``/``--config``
    (``["--training.seq_len", "8192", "activation-checkpoint:full"]``)."""

    @field_validator("module")
    @classmethod
    def _model_package_only(cls, module: str) -> str:
        if not MODULE_RE.match(module):
            raise ValueError(
                f"must name a model of {MODEL_PACKAGE} (llama3 or {MODEL_PACKAGE}.llama3), got "
                f"{module!r}: a recipe never imports code from elsewhere"
            )
        return module

    @field_validator("config")
    @classmethod
    def _function_name(cls, config: str) -> str:
        if not CONFIG_RE.match(config):
            raise ValueError(
                f"must be a function name of the module's config_registry, got {config!r}"
            )
        return config

    @field_validator("overrides")
    @classmethod
    def _no_selector_flags(cls, tokens: list[str]) -> list[str]:
        for token in tokens:
            flag = token.split("=", 1)[0]
            if flag in RESERVED_FLAGS:
                raise ValueError(f"{flag} belongs in the recipe's '{flag[2:]}' key, not here")
            if imports_code(flag):
                raise ValueError(
                    f"{flag} names code to import; a recipe is data and never imports code"
                )
        return tokens
