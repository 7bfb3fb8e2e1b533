"""Layout-only variants of a baseline: the runs that calibrate the post-launch checks.

A variant changes only how the same training is executed -- the micro-batch size with the
global batch pinned (so gradient accumulation changes instead), the number of data-parallel
ranks, the threads -- which moves the float summation order of the loss and the gradients and
nothing else. How far its first steps stray from the baseline's is what "trains the same
thing" looks like on this machine (``gate.postlaunch_reference``). The campaign still runs each
variant through the pre-launch gate and drops one the registry does not allow.

Only the embedded workload gets variants for now; a Megatron-LM or torchtitan campaign
calibrates its band from the baseline's repeated runs alone (and the floors), and says so.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from gate.models import EffectiveConfig

MAX_VARIANTS = 2
"""Layout variants run per campaign (each is charged like a calibration run)."""


class LayoutVariant(BaseModel):
    """One layout-only change of the baseline."""

    description: str
    """What it changes, as the reference records it (``micro_batch_size 2 -> 4 ...``)."""
    changes: dict[str, Any]
    """Recipe keys to write (``recipe_edit.apply_changes``); the global batch is pinned."""


def layout_variants(baseline: EffectiveConfig, *, cores: int) -> list[LayoutVariant]:
    """Up to MAX_VARIANTS variants of ``baseline``: the micro-batch (accumulation) one first,
    then other ranks, or other threads where the ranks cannot change."""
    if baseline.framework != "embedded":
        return []
    v = baseline.values
    gbs, mbs = int(v["global_batch_size"]), int(v["micro_batch_size"])
    dp, threads = int(v["data_parallel_size"]), int(v["threads"])
    accum = gbs // (mbs * dp)
    pin = {"global_batch_size": gbs}
    found: list[LayoutVariant] = []
    if accum % 2 == 0 or mbs % 2 == 0:
        new = mbs * 2 if accum % 2 == 0 else mbs // 2
        found.append(
            LayoutVariant(
                description=f"micro_batch_size {mbs} -> {new} (accumulation {accum} -> "
                f"{gbs // (new * dp)})",
                changes={"micro_batch_size": new, **pin},
            )
        )
    ranks = 2 if dp == 1 else dp // 2 if dp % 2 == 0 else None
    if (
        ranks is not None
        and gbs % (mbs * ranks) == 0
        and ranks * threads <= max(cores, dp * threads)
    ):
        found.append(
            LayoutVariant(
                description=f"data_parallel_size {dp} -> {ranks}",
                changes={"data_parallel_size": ranks, **pin},
            )
        )
    elif threads > 1 or dp * (threads + 1) <= cores:
        new = threads - 1 if threads > 1 else threads + 1
        found.append(
            LayoutVariant(description=f"threads {threads} -> {new}", changes={"threads": new})
        )
    return found[:MAX_VARIANTS]
