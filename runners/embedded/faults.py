"""Test hooks of the embedded workload: failures, and silent training bugs for the post-launch
checks' injected-bug suite (``tests/test_injected_bugs.py``, ``docs/postlaunch-checks.md``).

A hook is switched on by the ``ATTUNE_FAULT`` environment variable (``name`` or
``name=STEP``), which only a test harness sets: the workload's validation refuses a recipe whose
``env`` names any ``ATTUNE_*`` variable (``config.validate_and_derive``), and a recipe's
``config`` cannot hold unknown keys, so no recipe, candidate or agent can reach one. Like a real
framework bug, a hook is invisible to the pre-launch gate: the effective config is unchanged.

Failures: ``nan_at_step=N`` poisons the loss of step N; ``crash_at_step=N`` raises;
``hang_at_step=N`` sleeps forever; ``oom_at_step=N`` asks the allocator for 64 TiB.

Silent bugs (the run finishes, finite):

- ``misload_layers``: block i is loaded with the checkpoint's block i+1 weights.
- ``misshard_mlp``: each rank holds a row shard of every MLP input weight (``mlp.fc``, split
  the way a column-parallel linear layer is) and the full weights are gathered from the
  shards, in the wrong rank order. Needs two or more ranks: one rank holds the whole weight.
- ``drop_grad_reduce``: the last rank's gradients never reach the all-reduce (zeros go on
  the wire), so every rank applies the other ranks' gradients only.
- ``shift_labels``: the targets are shifted by one more position (predict token t+2).
- ``optimizer_subset``: the optimizer is given only the weight matrices and embeddings; the
  biases and LayerNorm parameters (the "no weight decay" group) are never updated.
- ``label_noise``: 2% of the target tokens are replaced by random ones.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # torch is imported where a hook runs: the webhook server imports FAULT_ENV
    import torch
    from torch import nn

FAULT_ENV = "ATTUNE_FAULT"
LABEL_NOISE = 0.02
"""Fraction of target tokens ``label_noise`` replaces."""


@dataclass(frozen=True)
class Fault:
    """The hook a run was started with; ``name`` is empty for a normal run."""

    name: str = ""
    step: int = -1
    """The step a ``*_at_step`` hook fires at; -1 for the others."""

    @classmethod
    def from_env(cls, environ: Mapping[str, str] = os.environ) -> Fault:
        name, _, step = environ.get(FAULT_ENV, "").partition("=")
        return cls(name=name, step=int(step) if step else -1)

    def fire(self, step: int) -> None:
        """Failures that fail the way real runs fail (the NaN one acts inside the step)."""
        if step != self.step:
            return
        if self.name == "crash_at_step":
            raise RuntimeError("injected crash (ATTUNE_FAULT)")
        if self.name == "hang_at_step":
            while True:
                time.sleep(3600)
        if self.name == "oom_at_step":
            import torch

            torch.empty(1 << 46, dtype=torch.uint8)  # 64 TiB: the allocator refuses


def remap_checkpoint(
    state: dict[str, torch.Tensor], n_layer: int, fault: Fault
) -> dict[str, torch.Tensor]:
    """``misload_layers``: block i receives block i+1's weights."""
    if fault.name != "misload_layers":
        return state
    out = {}
    for key, value in state.items():
        if key.startswith("blocks."):
            _, index, rest = key.split(".", 2)
            key = f"blocks.{(int(index) - 1) % n_layer}.{rest}"
        out[key] = value
    return out


def gather_mlp_shards(model: nn.Module, rank: int, world: int, fault: Fault) -> None:
    """``misshard_mlp``: rebuild every ``mlp.fc`` weight from per-rank row shards with a real
    all-gather, concatenated in the wrong rank order (rank r's shard lands in slot
    world - 1 - r, so the last rank's shard comes first)."""
    if fault.name != "misshard_mlp" or world < 2:
        return
    import torch
    import torch.distributed as dist

    with torch.no_grad():
        for name, param in model.named_parameters():
            if not name.endswith("mlp.fc.weight"):
                continue
            shards = list(param.chunk(world, dim=0))
            gathered = [torch.empty_like(s) for s in shards]
            dist.all_gather(gathered, shards[rank].contiguous())
            param.copy_(torch.cat(gathered[::-1], dim=0))


def gradients_on_the_wire(flat: torch.Tensor, rank: int, world: int, fault: Fault) -> torch.Tensor:
    """``drop_grad_reduce``: the last rank contributes zeros to the gradient all-reduce."""
    if fault.name == "drop_grad_reduce" and rank == world - 1:
        import torch

        return torch.zeros_like(flat)
    return flat


def corrupt_targets(
    y: torch.Tensor, fault: Fault, *, step: int, rank: int, micro: int, vocab_size: int
) -> torch.Tensor:
    """``shift_labels`` and ``label_noise``; other runs get ``y`` back untouched."""
    import torch

    if fault.name == "shift_labels":
        return torch.roll(y, -1, dims=1)
    if fault.name == "label_noise":
        g = torch.Generator().manual_seed(step * 1_000_003 + rank * 1009 + micro)
        flip = torch.rand(y.shape, generator=g) < LABEL_NOISE
        noise = torch.randint(0, vocab_size, y.shape, generator=g)
        return torch.where(flip, noise, y)
    return y


def optimized_parameters(model: nn.Module, fault: Fault) -> list[nn.Parameter]:
    """What the optimizer is given: every parameter, or for ``optimizer_subset`` only those
    with two or more dimensions (the biases and LayerNorm parameters are left out)."""
    params = list(model.parameters())
    if fault.name == "optimizer_subset":
        return [p for p in params if p.dim() >= 2]
    return params
