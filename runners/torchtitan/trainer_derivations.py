"""What torchtitan's Trainer derives from a parsed job config before its first step.

The data-parallel shard degree, global batch, gradient accumulation steps, pipeline
micro-batches and the LR schedule's step counts, for a given world size; a config the Trainer
(or ``torchtitan/train.py``) would refuse is a ``RecipeError`` naming the torchtitan key. Nothing
here imports torchtitan: ``ParallelDims`` comes from the ``Torchtitan`` it is given. Line numbers
in comments are torchtitan 0.3.0's.
"""

from __future__ import annotations

import inspect
from typing import Any

from runners.torchtitan.config_manager import RecipeError, Torchtitan, raised_at
from runners.worker_support import one_line


def derive(tt: Torchtitan, cfg: Any, world_size: int) -> dict[str, Any]:
    """What the Trainer derives before its first step, for ``world_size`` ranks; a config it
    would refuse is a RecipeError naming the torchtitan key."""
    # trainer.py:304 + 663: ParallelDims.from_config validates the degrees against the world
    # size and resolves data_parallel_shard_degree = -1 (parallel_dims.py:182-183). It is a
    # plain dataclass: building it creates no process group.
    try:
        dims = tt.ParallelDims.from_config(cfg.parallelism, world_size)
    except AssertionError as exc:
        site = raised_at(exc, tt.package)
        raise RecipeError("overrides", f"parallelism: {one_line(exc)}", site) from None
    # trainer.py:306-315: sequence and context parallelism split the sequence.
    divisor = (dims.tp if cfg.parallelism.enable_sequence_parallel else 1) * (
        2 * dims.cp if dims.cp > 1 else 1
    )
    if cfg.training.seq_len % divisor != 0:
        raise RecipeError(
            "overrides",
            f"training.seq_len: Training sequence length ({cfg.training.seq_len}) must be "
            f"divisible by {divisor} for the configured sequence/context parallelism "
            "(torchtitan/trainer.py:310)",
            "torchtitan/trainer.py:311",
        )
    # parallel_dims.py:278-279 + 336-340: the expert mesh (pp, dp_replicate, efsdp, ep) must tile
    # the same ranks as the dense one, so ep must divide dp_shard x cp x tp.
    if (dims.dp_shard * dims.cp * dims.tp) % dims.ep != 0:
        raise RecipeError(
            "overrides",
            f"parallelism.expert_parallel_degree: {dims.ep} does not divide dp_shard x cp x tp "
            f"= {dims.dp_shard * dims.cp * dims.tp} (torchtitan/distributed/parallel_dims.py:279)",
            "torchtitan/distributed/parallel_dims.py:279",
        )
    # trainer.py:347: the model config takes the trainer config (tp must divide the heads,
    # seq_len must fit RoPE, no weight tying under pp, ...).
    if cfg.model_spec is not None:
        try:
            cfg.model_spec.model.update_from_config(config=cfg)
        except (ValueError, AssertionError, NotImplementedError, TypeError, RuntimeError) as exc:
            site = raised_at(exc, tt.package)
            raise RecipeError("overrides", f"model_spec: {one_line(exc)}", site) from None
    check_optimizers(tt, cfg.optimizer)
    # trainer.py:324-328: the batch mesh is dp_replicate x dp_shard (parallel_dims.py:277).
    batch_degree = dims.dp_replicate * dims.dp_shard if dims.dp_enabled else 1
    local = cfg.training.local_batch_size
    # trainer.py:415-433: global batch defaults to local x batch degree, must be a multiple of
    # it, and the quotient is the number of gradient accumulation steps.
    global_batch = cfg.training.global_batch_size
    if global_batch < 0:
        global_batch = local * batch_degree
    if global_batch <= 0 or local <= 0 or global_batch % (local * batch_degree) != 0:
        raise RecipeError(
            "overrides",
            "training.global_batch_size: global batch size must be multiple of local batch "
            f"size times data-parallel degree ({global_batch} % ({local} * {batch_degree}) "
            "!= 0) (torchtitan/trainer.py:421)",
            "torchtitan/trainer.py:421",
        )
    # trainer.py:434-439: a local batch is cut into pipeline micro-batches.
    microbatches = (
        local // cfg.parallelism.pipeline_parallel_microbatch_size if dims.pp_enabled else 1
    )
    # train.py:53-60: a seed checkpoint is written by one rank with checkpointing enabled.
    if cfg.checkpoint.create_seed_checkpoint and (world_size != 1 or not cfg.checkpoint.enable):
        raise RecipeError(
            "overrides",
            "checkpoint.create_seed_checkpoint: needs world_size 1 and checkpoint.enable "
            "(torchtitan/train.py:56-60)",
            "torchtitan/train.py:56",
        )
    # The LR schedule is built with training_steps=training.steps (trainer.py:556):
    # total_steps = None means training.steps (components/optimizer/lr_scheduler.py:101-103)
    # and warmup is clamped to the total (lr_scheduler.py:105-112).
    schedule = cfg.lr_scheduler
    total_steps = getattr(schedule, "total_steps", None)
    if total_steps is None:
        total_steps = cfg.training.steps
    derived: dict[str, Any] = {}
    if hasattr(schedule, "total_steps"):
        derived["lr_scheduler.total_steps"] = total_steps
    if hasattr(schedule, "warmup_steps"):
        derived["lr_scheduler.warmup_steps"] = min(int(schedule.warmup_steps), total_steps)
    return {
        **derived,
        "world_size": world_size,
        "parallelism.data_parallel_shard_degree": dims.dp_shard,
        "training.global_batch_size": global_batch,
        "batch_degree": batch_degree,
        "gradient_accumulation_steps": global_batch // (local * batch_degree),
        "num_pipeline_parallel_microbatches": microbatches,
    }


def check_optimizers(tt: Torchtitan, optimizer: Any) -> None:
    """The optimizers the trainer builds (components/optimizer/optimizer.py:218-238): each
    parameter group's optimizer by name (an unknown name is NotImplementedError, line 149),
    called with ``optimizer_factory_kwargs_by_name[name]`` (line 230); DistMuon, for one, needs
    its compute layout and buckets there (distributed/flex_shard/dist_muon.py:57-63)."""
    by_name = getattr(optimizer, "optimizer_factory_kwargs_by_name", {})
    for group in getattr(optimizer, "param_groups", []):
        name = group.optimizer_name
        try:
            factory = tt.OptimizersContainer._resolve_optimizer_factory(name)
        except NotImplementedError as exc:
            site = raised_at(exc, tt.package)
            raise RecipeError("overrides", f"optimizer: {one_line(exc)}", site) from None
        try:
            inspect.signature(factory).bind([], **by_name.get(name, {}))
        except TypeError as exc:
            raise RecipeError(
                "overrides",
                f"optimizer: {name} cannot be built from optimizer_factory_kwargs_by_name"
                f"[{name!r}]: {exc} (torchtitan/components/optimizer/optimizer.py:230)",
                "torchtitan/components/optimizer/optimizer.py:230",
            ) from None
