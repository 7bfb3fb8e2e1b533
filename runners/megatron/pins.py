"""What a Megatron-LM training environment is built with, shared by the gate and the runner.

``TRANSFORMER_ENGINE`` is one value on both sides: the version the gate's validation assumes for
a recipe that declares no ``transformer_engine`` (``runners.megatron.model_checks``), and the
version ``attune train-env`` installs for it. megatron-core 0.19 defaults to
``transformer_impl="transformer_engine"`` (megatron/core/transformer/transformer_config.py:1220)
and its TE layers raise ImportError without TE (megatron/core/extensions/transformer_engine.py:
892-896), so TE is not optional for a Megatron-LM run.

The value itself is part of the one version set, ``runners.versions.PINS``.

``MEGATRON_COMMITS`` pins a Megatron-LM tag the runner may build from to the commit it names:
``attune train-env`` checks its checkout's ``git rev-parse HEAD`` against it before anything of
the checkout is installed or run (``bot.commands.megatron_checkout``). A tag with no commit here
may be pinned by content instead, ``MEGATRON_TREE_DIGESTS`` (``runners.megatron.tree``).

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
refs/tags/core_v0.19.2^{}`` from a trusted machine), ``core_v0.19.2`` is pinned by content
(``MEGATRON_TREE_DIGESTS``), or a runner gives that commit itself as ``ATTUNE_MEGATRON``."""

MEGATRON_TREE_DIGESTS: dict[str, str] = {
    "core_v0.19.0": "aa8eae3f77540df5c2efc04877eb602a0db53871a88664a14f989343e7d64b82",
    "core_v0.19.2": "40056dd05737c11be265fb96249690d1d80a7dd84b7d4e429cb57b629d8da7fc",
}
"""Megatron-LM tag -> the tree digest of the released megatron-core wheel of that version: the
sha256 of the manifest ``runners/megatron/trees/<tag>.txt``, which lists every ``*.py`` under
``megatron/core`` and ``megatron/training`` as ``<path> <sha256, urlsafe base64 unpadded>``,
sorted, the hashes those of the wheel's RECORD (``package_info.py`` hashed without its version
lines; ``runners.megatron.tree``). After cloning a tag that has a digest but no commit, ``attune
train-env`` hashes the checkout's files the same way and refuses it, naming the first missing,
extra or different file, unless every one matches. Derived with
``python benchmarks/megatron_tree_digest.py``:

- ``core_v0.19.2``: from megatron-core 0.19.2 from PyPI, the wheel the gate resolves recipes
  with (installed by ``make setup``; each file checked against the wheel's RECORD). The tag's
  commit could not be read here (above), so this is what the version set's tag is pinned by.
- ``core_v0.19.0``: from the megatron-core 0.19.0 wheel from PyPI (``--wheel``), and, the same
  digest, from ``git archive core_v0.19.0 megatron/core megatron/training`` of a mirror of
  NVIDIA/Megatron-LM and from a ``git clone --branch core_v0.19.0`` of it (``--tree``): the
  wheel's 542 Python files are exactly the tag's, byte for byte but for the version lines of its
  two ``package_info.py``. That cross-check is what shows a wheel's files stand for the tag's.
  ``core_v0.19.0`` keeps its commit pin (checked instead of this).

What this does not pin: files outside ``megatron/core`` and ``megatron/training`` (the
repository root's ``pretrain_gpt.py``, ``setup.py``, ``pyproject.toml``, ``tools/``...) and files
that are not ``*.py`` (``megatron/core/datasets/helpers.cpp`` and its Makefile among them)."""
