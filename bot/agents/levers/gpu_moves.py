"""The rules agent's lever catalogues for Megatron-LM and torchtitan.

Each move changes one lever (or one declared coupled split that keeps the world size) of the
incumbent's effective configuration, names the bottlenecks it addresses and why. A move is only
ever proposed when the registry classifies every key it changes as layout (the agent checks,
and cites the registry's source line); the framework's own validation rejects impossible
combinations when the candidate is resolved, and the memory model prunes moves predicted not to
fit. Global batch size is never a lever: changing the parallel split or the micro-batch keeps
it, so data-parallel degree and gradient accumulation follow.
"""

from __future__ import annotations

from typing import Any

from bot.agents.levers.moves import Move
from bot.agents.levers.split_moves import expert_moves, overlap_moves


def _flag_on(v: dict[str, Any], key: str, why: str, necks: tuple[str, ...]) -> list[Move]:
    return [Move({key: True}, necks, why)] if v.get(key) is False else []


def _recompute(v: dict[str, Any], granularity: str | None, why: str) -> Move:
    """Megatron-LM's recompute to ``granularity`` (None: off): its validation refuses a recompute
    method beside selective recompute or none, so method and layer count are cleared with it,
    as one declared coupled move when more than the granularity changes."""
    target = {
        "recompute_granularity": granularity,
        "recompute_method": None,
        "recompute_num_layers": None,
    }
    changes = {k: x for k, x in target.items() if v.get(k) != x}
    if len(changes) > 1:
        why += "; Megatron-LM refuses a recompute method beside it, so the method and layer count "
        why += "are cleared with the granularity, one declared coupled move"
    return Move(changes, ("compute",), why, coupled=len(changes) > 1)


def megatron_moves(v: dict[str, Any], cores: int) -> list[Move]:
    """Moves for a Megatron-LM incumbent (effective values ``v``: argparse dests)."""
    tp, pp = int(v["tensor_model_parallel_size"]), int(v["pipeline_model_parallel_size"])
    cp, dp = int(v.get("context_parallel_size") or 1), int(v["data_parallel_size"])
    mbs, layers = int(v["micro_batch_size"]), int(v["num_layers"])
    per_dp = int(v["global_batch_size"]) // dp
    moves = _flag_on(
        v,
        "overlap_grad_reduce",
        "the data-parallel gradient reduction runs after backward; overlapped, its buckets go "
        "out while later layers still compute their gradients",
        ("communication", "idle"),
    )
    if v.get("use_distributed_optimizer"):
        if v.get("overlap_grad_reduce"):  # Megatron-LM refuses it alone (split_moves.py)
            moves += _flag_on(
                v,
                "overlap_param_gather",
                "the distributed optimizer all-gathers the updated parameters before the next "
                "forward; overlapped, each bucket is gathered just before its layer runs",
                ("communication", "idle"),
            )
        moves += overlap_moves(v)
    else:
        moves += _flag_on(
            v,
            "use_distributed_optimizer",
            "every data-parallel rank keeps the full fp32 optimizer state; sharding it (ZeRO-1) "
            "frees memory for a larger micro-batch or less recompute, at the same traffic",
            ("memory",),
        )
    if tp > 1:
        moves.append(
            Move(
                {"tensor_model_parallel_size": tp // 2},
                ("communication",),
                f"tensor parallelism {tp} all-reduces (or reduce-scatters) activations twice per "
                f"layer on every micro-batch; TP {tp // 2} halves that traffic and doubles the "
                "data-parallel degree, whose gradient reduction happens once per step",
            )
        )
        smaller = tp // 4
        while smaller >= 1:  # the whole way in one move, when the model predicts it pays more
            moves.append(
                Move(
                    {"tensor_model_parallel_size": smaller},
                    ("communication",),
                    f"tensor parallelism {tp} all-reduces activations twice per layer on every "
                    f"micro-batch; TP {smaller} cuts that traffic {tp // smaller}-fold and "
                    f"multiplies the data-parallel degree by {tp // smaller}, whose gradient "
                    "reduction happens once per step",
                )
            )
            smaller //= 2
        if not v.get("sequence_parallel"):
            moves += _flag_on(
                v,
                "sequence_parallel",
                "with tensor parallelism, sequence parallelism splits layer-norm and dropout "
                "activations across the TP group: less memory and the same communication volume",
                ("memory", "compute"),
            )
        elif v.get("tp_comm_overlap") is False:
            moves += _flag_on(
                v,
                "tp_comm_overlap",
                "tensor-parallel all-gathers and reduce-scatters run between GEMMs; Transformer "
                "Engine's userbuffer overlap runs them under the GEMMs",
                ("communication",),
            )
    moves += expert_moves(v)
    if cp > 1:
        moves.append(
            Move(
                {"context_parallel_size": cp // 2},
                ("communication",),
                f"context parallelism {cp} passes key/value chunks around a ring in every "
                "attention layer; a smaller ring sends less",
            )
        )
    if pp > 1:
        stages = v.get("num_virtual_stages_per_pipeline_rank")
        if not stages and (layers // pp) % 2 == 0 and per_dp // mbs >= pp:
            moves.append(
                Move(
                    {"num_virtual_stages_per_pipeline_rank": 2},
                    ("idle",),
                    f"1F1B over {pp} stages idles (p-1)/m of each step in the pipeline bubble; "
                    "two interleaved virtual stages per rank halve the bubble",
                )
            )
        moves.append(
            Move(
                {"pipeline_model_parallel_size": pp // 2},
                ("idle", "communication"),
                f"{pp} pipeline stages leave a bubble and send activations between stages; "
                f"{pp // 2} stages with twice the data parallelism shrink both",
            )
        )
        if mbs > 1:
            moves.append(
                Move(
                    {"micro_batch_size": mbs // 2},
                    ("idle",),
                    f"{per_dp // mbs} micro-batches per step fill a {pp}-stage pipeline poorly; "
                    "twice as many, half the size, shrink the bubble",
                )
            )
    granularity = v.get("recompute_granularity")
    if granularity == "full":
        moves.append(
            _recompute(
                v,
                "selective",
                "full recompute reruns every layer's forward in backward; selective recompute "
                "reruns only the attention core, whose activations are the largest",
            )
        )
        moves.append(
            _recompute(
                v,
                None,
                "full recompute reruns every layer's forward in backward; storing every "
                "activation removes that work where memory allows",
            )
        )
    elif granularity == "selective":
        moves.append(
            _recompute(
                v,
                None,
                "selective recompute reruns attention in backward; storing its activations "
                "removes that work where memory allows",
            )
        )
    if per_dp % (mbs * 2) == 0 and pp == 1:
        moves.append(
            Move(
                {"micro_batch_size": mbs * 2},
                ("compute", "cpu"),
                f"micro-batch {mbs} runs {per_dp // mbs} small forward/backward passes per "
                "step; larger ones feed bigger GEMMs and launch fewer kernels",
            )
        )
    if v.get("optimizer_cpu_offload"):
        moves.append(
            Move(
                {"optimizer_cpu_offload": False},
                ("memory_copy", "cpu"),
                "the optimizer state lives in host memory: every step copies gradients down and "
                "parameters back; on the device the update needs no copies",
            )
        )
    for fusion in ("masked_softmax_fusion", "bias_dropout_fusion", "apply_rope_fusion"):
        moves += _flag_on(
            v, fusion, f"{fusion} runs its elementwise chain as one kernel", ("compute",)
        )
    return moves


def torchtitan_moves(v: dict[str, Any], cores: int) -> list[Move]:
    """Moves for a torchtitan incumbent (effective values ``v``: dotted config keys)."""
    tp = int(v["parallelism.tensor_parallel_degree"])
    pp = int(v["parallelism.pipeline_parallel_degree"])
    local = int(v["training.local_batch_size"])
    moves = _flag_on(
        v,
        "compile.enable",
        "torch.compile fuses the elementwise operators of each block into a few Triton kernels",
        ("compute", "cpu"),
    )
    if v.get("parallelism.fsdp_reshard_after_forward") in ("default", "always") and pp == 1:
        moves.append(
            Move(
                {"parallelism.fsdp_reshard_after_forward": "never"},
                ("communication", "idle"),
                "FSDP frees each block's gathered parameters after forward and all-gathers them "
                "again for backward; keeping them skips the second all-gather, for memory",
            )
        )
    if tp > 1:
        moves.append(
            Move(
                {"parallelism.tensor_parallel_degree": tp // 2},
                ("communication",),
                f"tensor parallelism {tp} exchanges activations in every block; TP {tp // 2} "
                "halves that and FSDP shards over twice the ranks",
            )
        )
        if v.get("compile.enable"):
            moves += _flag_on(
                v,
                "compile.enable_async_tensor_parallel",
                "async TP overlaps the TP all-gather/reduce-scatter with the matmuls",
                ("communication",),
            )
    if v.get("training.enable_cpu_offload"):
        moves.append(
            Move(
                {"training.enable_cpu_offload": False},
                ("memory_copy", "cpu"),
                "FSDP's CPU offload copies parameters and gradients between host and device "
                "every step; kept on the device they are not copied",
            )
        )
    mode = v.get("activation_checkpoint")
    lighter = {"full": "selective", "selective": "none"}.get(str(mode))
    if lighter is not None:
        moves.append(
            Move(
                {"activation_checkpoint": lighter},
                ("compute",),
                f"{mode} activation checkpointing recomputes forward work in backward; "
                f"{lighter} recomputes less where memory allows",
            )
        )
    global_batch = int(v["training.global_batch_size"])
    dp = int(v["parallelism.data_parallel_shard_degree"]) * int(
        v["parallelism.data_parallel_replicate_degree"]
    )
    if global_batch % (local * 2 * dp) == 0:
        moves.append(
            Move(
                {"training.local_batch_size": local * 2},
                ("compute", "cpu"),
                f"local batch {local} with gradient accumulation runs small passes; twice the "
                "local batch (the pinned global batch unchanged) feeds bigger matmuls",
            )
        )
    return moves
