"""Train the embedded GPT for a fixed number of steps, one JSON line per step.

    python -m runners.embedded.train --config effective.json --steps 20
    torchrun --standalone --nproc-per-node 2 -m runners.embedded.train --config ... --steps 20

``--config`` holds the *validated* config (``WorkloadConfig`` after ``validate_and_derive``);
the adapter writes it. Rank 0 prints one JSON object per step on stdout (and to ``--metrics``).
Reads top to bottom: config, init, model, data, loop, log.

Test hooks (failures and silent bugs, never set by a recipe, so the gate cannot see them,
like a real framework bug) through ``ATTUNE_FAULT``: ``runners/embedded/faults.py``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import sys
import time
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

# before init_process_group: on import its collectives bind the default group as a default argument,
# so the later import by torch.optim kept gloo alive past destroy_process_group, to interpreter exit
import torch.distributed.nn
from torch.profiler import ProfilerActivity, profile, record_function, schedule

from runners.embedded.config import WorkloadConfig
from runners.embedded.data import micro_batch
from runners.embedded.faults import (
    Fault,
    corrupt_targets,
    gather_mlp_shards,
    gradients_on_the_wire,
    optimized_parameters,
    remap_checkpoint,
)
from runners.embedded.model import GPT


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--config", type=Path, required=True, help="validated config JSON")
    p.add_argument("--steps", type=int, required=True)
    p.add_argument("--metrics", type=Path, help="also append step JSON lines here (rank 0)")
    p.add_argument(
        "--profile-dir",
        type=Path,
        help="after --steps, run 1 + --profile-steps more steps under torch.profiler, trace here",
    )
    p.add_argument("--profile-steps", type=int, default=3, help="profiled steps")
    p.add_argument("--save-checkpoint", type=Path, help="save the final weights here (rank 0)")
    return p.parse_args(argv)


def build_optimizer(
    cfg: WorkloadConfig, model: torch.nn.Module, fault: Fault
) -> torch.optim.Optimizer:
    impl: dict[str, Any] = {
        "for_loop": {"foreach": False},
        "foreach": {"foreach": True},
        "fused": {"fused": True},
    }[cfg.optimizer_impl]
    if cfg.optimizer == "adamw":
        return torch.optim.AdamW(
            optimized_parameters(model, fault),
            lr=cfg.lr,
            betas=(cfg.adam_beta1, cfg.adam_beta2),
            eps=cfg.adam_eps,
            weight_decay=cfg.weight_decay,
            **impl,
        )
    return torch.optim.SGD(
        optimized_parameters(model, fault),
        lr=cfg.lr,
        momentum=cfg.sgd_momentum,
        weight_decay=cfg.weight_decay,
        **impl,
    )


def load_checkpoint(model: GPT, path: str, fault: Fault) -> None:
    state = torch.load(path, map_location="cpu", weights_only=True)
    model.load_state_dict(remap_checkpoint(state, model.cfg.n_layer, fault))


def all_reduce_grads(
    model: torch.nn.Module, cfg: WorkloadConfig, *, rank: int, world: int, fault: Fault
) -> None:
    """Sum gradients over ranks in one flat bucket; bf16 on the wire if configured."""
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    flat = gradients_on_the_wire(torch.cat([g.reshape(-1) for g in grads]), rank, world, fault)
    if cfg.grad_reduce_in_bf16:
        wire = flat.to(torch.bfloat16)
        dist.all_reduce(wire)
        flat = wire.to(torch.float32)
    else:
        dist.all_reduce(flat)  # note: a sync point, every rank waits for the slowest
    offset = 0
    for g in grads:
        g.copy_(flat[offset : offset + g.numel()].view_as(g))
        offset += g.numel()


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    # --- config ---
    cfg = WorkloadConfig.model_validate(json.loads(args.config.read_text()))
    assert cfg.grad_accum_steps is not None and cfg.global_batch_size is not None
    assert cfg.threads is not None
    fault = Fault.from_env()

    # --- init ---
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    if world != cfg.data_parallel_size:
        raise SystemExit(f"launched {world} ranks for data_parallel_size={cfg.data_parallel_size}")
    if world > 1:
        dist.init_process_group("gloo")
    torch.set_num_threads(cfg.threads)
    torch.manual_seed(cfg.seed)  # same init on every rank and every layout

    # --- model ---
    model = GPT(cfg)
    if cfg.init_from:
        load_checkpoint(model, cfg.init_from, fault)
    gather_mlp_shards(model, rank, world, fault)
    model.train()
    optimizer = build_optimizer(cfg, model, fault)
    step_model = torch.compile(model) if cfg.compile else model
    autocast = (
        torch.autocast("cpu", dtype=torch.bfloat16) if cfg.precision == "bf16" else nullcontext()
    )
    tokens_per_step = cfg.global_batch_size * cfg.seq_len
    # each micro-batch loss is a mean over its tokens: scale so the sum over all ranks and
    # micro-batches is the mean over the global batch
    scale = 1.0 / (cfg.grad_accum_steps * world)

    # profiled steps run after the benchmarked ones, and the profiler only starts then: even
    # idle, a started profiler slows every operator, so it must not exist while we score
    prof, total_steps = None, args.steps
    if args.profile_dir is not None:
        total_steps += 1 + args.profile_steps
        args.profile_dir.mkdir(parents=True, exist_ok=True)
    metrics = args.metrics.open("a") if args.metrics and rank == 0 else None

    # --- loop ---
    for step in range(1, total_steps + 1):
        if args.profile_dir is not None and step == args.steps + 1:
            prof = profile(
                activities=[ProfilerActivity.CPU],
                schedule=schedule(wait=0, warmup=1, active=args.profile_steps, repeat=1),
            )
            prof.start()
        t0 = time.perf_counter()
        fault.fire(step)
        loss_sum = torch.zeros(())
        for micro in range(cfg.grad_accum_steps):
            with record_function("attune.data"):
                x, y = micro_batch(
                    step,
                    rank,
                    micro,
                    global_batch=cfg.global_batch_size,
                    micro_batch=cfg.micro_batch_size,
                    world=world,
                    vocab_size=cfg.vocab_size,
                    seq_len=cfg.seq_len,
                    data_seed=cfg.data_seed,
                )
                y = corrupt_targets(
                    y, fault, step=step, rank=rank, micro=micro, vocab_size=cfg.vocab_size
                )
            with record_function("attune.forward_backward"):
                with autocast:
                    loss = step_model(x, y) * scale
                if step == fault.step and fault.name == "nan_at_step":
                    loss = loss * float("nan")
                loss.backward()
            if not cfg.accumulate_grads_in_fp32:
                for p in model.parameters():  # the accumulation buffer holds bf16 values
                    if p.grad is not None:
                        p.grad.copy_(p.grad.to(torch.bfloat16))
            loss_sum += loss.detach().float()
        with record_function("attune.grad_sync"):
            if world > 1:
                all_reduce_grads(model, cfg, rank=rank, world=world, fault=fault)
                dist.all_reduce(loss_sum)
        with record_function("attune.optimizer"):
            max_norm = cfg.grad_clip if cfg.grad_clip > 0 else math.inf
            grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
        step_seconds = time.perf_counter() - t0
        if prof is not None:
            prof.step()
        if rank == 0:
            record = {
                "step": step,
                "loss": loss_sum.item(),
                "grad_norm": grad_norm.item(),
                "tokens": tokens_per_step,
                "step_seconds": step_seconds,
                "peak_memory_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
            }
            line = json.dumps(record)
            sys.stdout.write(line + "\n")
            sys.stdout.flush()
            if metrics is not None:
                metrics.write(line + "\n")
                metrics.flush()

    # --- finish ---
    if prof is not None:
        prof.stop()
        if rank == 0:
            prof.export_chrome_trace(str(args.profile_dir / "trace.json"))
    if args.save_checkpoint is not None and rank == 0:
        torch.save(model.state_dict(), args.save_checkpoint)
    if metrics is not None:
        metrics.close()
    if world > 1:
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
