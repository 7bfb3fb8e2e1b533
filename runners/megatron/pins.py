"""What a Megatron-LM training environment is built with, shared by the gate and the runner.

``TRANSFORMER_ENGINE`` is one value on both sides: the version the gate's validation assumes for
a recipe that declares no ``transformer_engine`` (``runners.megatron.model_checks``), and the
version ``attune train-env`` installs for it. megatron-core 0.19 defaults to
``transformer_impl="transformer_engine"`` (megatron/core/transformer/transformer_config.py:1220)
and its TE layers raise ImportError without TE (megatron/core/extensions/transformer_engine.py:
892-896), so TE is not optional for a Megatron-LM run.

The value itself is part of the one version set, ``runners.versions.PINS``.

No Megatron import here: the bot reads it.
"""

from __future__ import annotations

from runners.versions import PINS

TRANSFORMER_ENGINE = PINS.transformer_engine
"""The highest TE version megatron-core 0.19.2's checks ask for (transformer_config.py:1562):
an undeclared TE refuses nothing for being too old, and the runner installs that version."""

MIN_PYTHON = (3, 12)
"""Megatron-LM core_v0.19.0 requires Python >= 3.12 (its pyproject), and ``pretrain_gpt.py``'s
imports reach ``from typing import override`` (megatron/training/models/gpt.py:5)."""
