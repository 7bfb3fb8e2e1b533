"""Megatron-LM moves beyond one flag: expert parallelism by any power of two, and both
data-parallel overlaps switched on together as one declared coupled move.

Expert parallelism (``expert_model_parallel_size``) is a layout key in the registry (the same
experts and routing, placed on other ranks): an EP move changes only that key, the world size
and the dense data-parallel degree stay, and the expert-data-parallel grouping Megatron-LM
derives follows. Megatron-LM's validation refuses EP that does not divide the experts or the
data-parallel x context-parallel ranks, when the candidate is resolved.
"""

from __future__ import annotations

from typing import Any

from bot.agents.levers.moves import Move

PARAM_GATHER_NEEDS_GRAD_REDUCE = "megatron/training/arguments.py:994@0.19.2"
"""Megatron-LM's ``assert args.overlap_grad_reduce, 'Must use --overlap-param-gather with
--overlap-grad-reduce'`` (megatron-core 0.19.2)."""
BOTH_OVERLAPS = {"overlap_grad_reduce": True, "overlap_param_gather": True}


def overlap_moves(v: dict[str, Any]) -> list[Move]:
    """Both overlaps as one declared coupled move, when both are off and the optimizer is
    distributed: Megatron-LM refuses the parameter gather's overlap without the gradient
    reduction's, and the gradient overlap alone may not pay (its buckets' launches are then
    exposed and the gather is still serial)."""
    if not v.get("use_distributed_optimizer") or any(v.get(k) is not False for k in BOTH_OVERLAPS):
        return []
    return [
        Move(
            dict(BOTH_OVERLAPS),
            ("communication", "idle"),
            "the distributed optimizer reduce-scatters gradients after backward and all-gathers "
            "parameters before the next forward; overlapped, both run bucket by bucket under "
            "compute. Megatron-LM refuses overlap_param_gather without overlap_grad_reduce "
            f"({PARAM_GATHER_NEEDS_GRAD_REDUCE}), so both switch on together, one declared "
            "coupled move",
            coupled=True,
        )
    ]


def expert_moves(v: dict[str, Any]) -> list[Move]:
    """EP halved or doubled, and down by any power of two: each is one layout key. The
    calibrated model says which pays: a smaller EP all-to-alls among fewer ranks and holds more
    experts per rank; a larger one the opposite."""
    experts = int(v.get("num_experts") or 0)
    ep = int(v.get("expert_model_parallel_size") or 1)
    if experts < 2:
        return []
    ranks = int(v["data_parallel_size"]) * int(v.get("context_parallel_size") or 1)
    moves = []
    smaller = ep // 2
    while smaller >= 1:
        moves.append(
            Move(
                {"expert_model_parallel_size": smaller},
                ("communication",),
                f"expert parallelism {ep} sends every routed token through two all-to-alls "
                f"among {ep} ranks in each MoE layer; EP {smaller} keeps "
                f"{experts // smaller} of the {experts} experts on each rank: a smaller "
                "all-to-all, the experts' gradients reduced over more expert-data-parallel "
                "ranks (a layout change only: the same experts and routing)",
            )
        )
        smaller //= 2
    if experts % (ep * 2) == 0 and ranks % (ep * 2) == 0:
        moves.append(
            Move(
                {"expert_model_parallel_size": ep * 2},
                ("memory", "communication"),
                f"expert parallelism {ep} holds {experts // ep} of the {experts} experts on each "
                f"rank; EP {ep * 2} halves the expert weights, gradients and optimizer state per "
                "rank and reduces the experts' gradients over fewer ranks, for a wider "
                "all-to-all (a layout change only: the same experts and routing)",
            )
        )
    return moves
