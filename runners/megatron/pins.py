"""What a Megatron-LM training environment is built with, shared by the gate and the runner.

``TRANSFORMER_ENGINE`` is one value on both sides: the version the gate's validation assumes for
a recipe that declares no ``transformer_engine`` (``runners.megatron.model_checks``), and the
version ``attune train-env`` installs for it. megatron-core 0.19 defaults to
``transformer_impl="transformer_engine"`` (megatron/core/transformer/transformer_config.py:1220)
and its TE layers raise ImportError without TE (megatron/core/extensions/transformer_engine.py:
892-896), so TE is not optional for a Megatron-LM run.

The value itself is part of the one version set, ``runners.versions.PINS``.

``MEGATRON_COMMITS`` pins each Megatron-LM tag the runner may build from to the commit it names:
``attune train-env`` checks its checkout's ``git rev-parse HEAD`` against it before anything of
the checkout is installed or run (``bot.commands.megatron_checkout``).

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

MEGATRON_COMMITS: dict[str, str] = {
    "core_v0.19.0": "5be9626709af2722333bf54797c954c09edeada3",
}
"""Megatron-LM tag -> the full commit it names. Only commits read from NVIDIA/Megatron-LM's own
history are listed: ``core_v0.19.0`` peeled in a mirror of NVIDIA/Megatron-LM (commit of
2026-08-19 on ``core_r0.19.0``, "Bumping Megatron Core to v0.19.1").

``core_v0.19.2`` (the version set's tag, released 2026-09-18) is NOT listed: its commit could
not be read here (no copy of the repository made after the release was at hand). A third-party
document gives ``fb6a123a09`` for it, but another one names the full commit with that prefix
as the head of ``main`` on 2026-09-20, two days after the release, and Megatron-LM tags its
releases on the ``core_r*`` branches: the prefix is not evidence of the tag's commit and is not
used. Until the commit is added here (``git ls-remote https://github.com/NVIDIA/Megatron-LM
refs/tags/core_v0.19.2^{}`` from a trusted machine), a runner builds ``core_v0.19.2`` by giving
that commit itself as ``ATTUNE_MEGATRON``; the tag alone is refused."""
