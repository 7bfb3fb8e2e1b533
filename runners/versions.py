"""The one version set a Megatron-LM or torchtitan recipe is checked and trained with.

Everything that names a framework version reads it from here, or is checked against it by
``tests/test_version_set.py``: the gate's resolve (the megatron-core and torchtitan installed in
attune's own environment by the Makefile, and the Transformer Engine the gate assumes,
``runners.megatron.model_checks``), ``attune train-env`` (what it builds on the GPU runner),
the ``attune-bench.yml`` that ``attune init`` writes (``bot/templates/``), and
docs/gpu-runner.md. Moving one pin means moving it here and letting that test name every other
place.

No framework import here: the bot and the gate read it on a machine without a GPU.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class VersionSet(BaseModel):
    """The versions a GPU training environment is built with."""

    model_config = ConfigDict(frozen=True)

    torch: str
    """The training torch, installed from ``https://download.pytorch.org/whl/<cuda>``; the
    framework is then installed under the constraint ``torch==<torch>``, so nothing it
    depends on can replace it."""
    cuda: str
    """The CUDA wheel tag of that torch."""
    megatron_core: str
    """megatron-core as the gate resolves with it; the runner clones the Megatron-LM tag
    ``core_v<megatron_core>`` (``megatron_tag``), the same code."""
    torchtitan: str
    transformer_engine: str
    """The highest TE version megatron-core 0.19.2's checks ask for
    (megatron/core/transformer/transformer_config.py:1562): the version the gate assumes for a
    recipe that declares no ``transformer_engine``, and the one the runner installs for it."""

    @property
    def megatron_tag(self) -> str:
        """The Megatron-LM git tag of ``megatron_core``."""
        return f"core_v{self.megatron_core}"


PINS = VersionSet(
    torch="2.11.0",
    cuda="cu128",
    megatron_core="0.19.2",
    torchtitan="0.3.0",
    transformer_engine="2.14.0",
)

TORCH_FLOORS: dict[tuple[str, str], tuple[str, str]] = {
    ("torchtitan", "0.3.0"): (
        "2.11.0",
        "torchtitan 0.3.0 needs torch_checkpointing 0.1.1, which requires torch >= 2.11",
    ),
    ("megatron", "core_v0.19.2"): ("2.6.0", "megatron-core 0.19.2 requires torch >= 2.6.0"),
    ("megatron", "core_v0.19.0"): ("2.6.0", "megatron-core 0.19.0 requires torch >= 2.6.0"),
}
"""(framework, version) -> (the lowest torch it installs with, why), for the versions whose
dependencies were read. A pin below it would have pip replace the pinned torch (or, under the
constraint, fail after the download): ``torch_problem`` refuses it before anything is built."""


def torch_problem(framework: str, version: str, torch: str) -> str | None:
    """Why ``torch`` cannot train ``framework`` at ``version`` (a Megatron-LM tag or a
    torchtitan version), or None when it can or nothing is known about that version."""
    from packaging.version import InvalidVersion, Version

    floor = TORCH_FLOORS.get((framework, version))
    if floor is None:
        return None
    try:
        low = Version(torch).release < Version(floor[0]).release
    except InvalidVersion:
        return None  # the version's own syntax check reports it
    if not low:
        return None
    return f"torch {torch} cannot train {framework} {version}: {floor[1]} (pin torch >= {floor[0]})"
