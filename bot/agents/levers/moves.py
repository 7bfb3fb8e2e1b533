"""A lever move the rules agent knows, and its catalogue for the embedded workload."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from bot.render.words import count


@dataclass(frozen=True)
class Move:
    """A lever move the agent knows, with what it addresses and why. What it is expected to
    gain is the campaign's calibrated step-time model's to say (``Probe.predicted_gain_pct``),
    never a constant of the catalogue."""

    changes: dict[str, Any]
    bottlenecks: tuple[str, ...]
    mechanism: str
    coupled: bool = False
    further: Move | None = None
    """The next step in the same direction (micro-batch 2 -> 4 after 1 -> 2): tried when this
    move was closed without being clearly slower, since a result within the noise is no
    evidence that the direction is wrong."""


def embedded_moves(v: dict[str, Any], cores: int) -> list[Move]:
    """Moves for the embedded workload from its effective values ``v``."""
    moves: list[Move] = []
    threads, ranks = int(v["threads"]), int(v["data_parallel_size"])
    if threads * ranks < cores:
        moves.append(
            Move(
                {"threads": min(cores // ranks, threads * 2)},
                ("compute",),
                f"each operator runs on {count(threads, 'thread')} while {cores} cores are free; "
                "intra-op threads split every matmul across them",
            )
        )
    if ranks > 1:
        moves.append(
            Move(
                {"data_parallel_size": ranks // 2, "threads": threads * 2},
                ("communication", "idle"),
                f"{ranks} ranks wait on each other in the gradient all-reduce; half the ranks "
                "with twice the threads keeps the cores busy without the collective",
                coupled=True,
            )
        )
    if v["activation_checkpointing"]:
        moves.append(
            Move(
                {"activation_checkpointing": False},
                ("compute",),
                "recompute runs every block's forward a second time in backward; memory is "
                "not the limit here, so storing activations removes that work",
            )
        )
    micro, per_rank = int(v["micro_batch_size"]), int(v["global_batch_size"]) // ranks
    bigger = _micro_batch_move(micro, micro * 2, per_rank)
    if bigger is not None:
        moves.append(bigger)
    if v["attention"] == "math":
        moves.append(
            Move(
                {"attention": "sdpa"},
                ("compute",),
                "explicit attention materialises the [t, t] score matrix and runs softmax "
                "separately; fused SDPA does it in one kernel",
            )
        )
    if not v["compile"]:
        moves.append(
            Move(
                {"compile": True},
                ("cpu", "compute"),
                "torch.compile fuses elementwise operators and removes Python dispatch per op",
            )
        )
    impl = v["optimizer_impl"]
    if impl != "fused":
        target = "foreach" if impl == "for_loop" else "fused"
        moves.append(
            Move(
                {"optimizer_impl": target},
                ("cpu",),
                f"the {impl} optimizer launches kernels per parameter; {target} batches them",
            )
        )
    return moves


def _micro_batch_move(micro: int, size: int, per_rank: int) -> Move | None:
    """micro -> size, with every further doubling chained behind it (``Move.further``)."""
    if per_rank % size != 0:
        return None
    return Move(
        {"micro_batch_size": size},
        ("cpu", "compute"),
        f"micro-batch {micro} means {per_rank // micro} small forward/backward passes per step; "
        f"{per_rank // size} larger ones amortise per-operator overhead and feed bigger matmuls "
        "(the pinned global batch is unchanged)",
        further=_micro_batch_move(micro, size * 2, per_rank),
    )


MoveCatalogue = Callable[[dict[str, Any], int], list[Move]]
"""(the incumbent's effective values, cores) -> the moves worth considering."""
