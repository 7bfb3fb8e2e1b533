"""The framework's own output for a simulated run, in the formats attune's parsers read
(``runners/megatron/metrics.py``, ``runners/torchtitan/metrics.py``,
``runners/profile_trace.py``), so that nothing downstream knows the run was simulated.

Losses and gradient norms are the same for every layout (a layout-only change keeps them),
a smooth curve from the seed."""

from __future__ import annotations

import gzip
import json
import math
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, TextIO

MIB = 2**20
GIB = 2**30
LOG_RANKS = 8
"""Ranks whose memory report / trace is written (the first node's)."""


def loss_at(step: int) -> float:
    return 11.0 + 0.8 * math.exp(-step / 40.0) - 0.01 * math.log1p(step)


def grad_norm_at(step: int) -> float:
    return 4.0 + 8.0 * math.exp(-step / 25.0)


def megatron_lines(
    out: TextIO,
    *,
    step_seconds: list[float],
    total: int,
    global_batch: int,
    tflops_per_step: float,
    devices: int,
    peak_bytes: int,
    start: datetime,
) -> None:
    """Megatron-LM's ``training_log`` iteration lines and its per-rank memory report after
    the first iteration (``report_memory``), on stdout."""
    clock = start
    for i, seconds in enumerate(step_seconds, start=1):
        clock += timedelta(seconds=seconds)
        tflops = tflops_per_step / seconds / devices / 1e12
        out.write(
            f" [{clock:%Y-%m-%d %H:%M:%S.%f}] iteration {i:8d}/{total:8d} | consumed samples: "
            f"{i * global_batch:12d} | elapsed time per iteration (ms): {seconds * 1000:.1f} | "
            f"throughput per GPU (TFLOP/s/GPU): {tflops:.1f} | learning rate: "
            f"{3e-6 * i:.6E} | global batch size: {global_batch:5d} | lm loss: "
            f"{loss_at(i):.6E} | loss scale: 1.0 | grad norm: {grad_norm_at(i):.3f} | "
            "number of skipped iterations:   0 | number of nan iterations:   0 |\n"
        )
        if i == 1:
            for rank in range(min(devices, LOG_RANKS)):
                peak = peak_bytes * (1 - 0.002 * rank) / MIB
                out.write(
                    f"[Rank {rank}] (after 1 iterations) memory (MB) | allocated: "
                    f"{peak * 0.45:.2f} | max allocated: {peak:.2f} | reserved: "
                    f"{peak * 1.05:.2f} | max reserved: {peak * 1.05:.2f}\n"
                )


def torchtitan_lines(
    out: TextIO,
    *,
    step_seconds: list[float],
    tokens_per_step: int,
    tflops_per_step: float,
    peak_flops: float,
    devices: int,
    peak_bytes: int,
    capacity_bytes: int,
    start: datetime,
) -> None:
    """torchtitan's metrics lines of rank 0 (``[rank0]:[titan] ... step: N loss: ...``), on
    stderr; the parser times a step by the lines' clock."""
    clock = start
    gib = peak_bytes / GIB
    share = 100 * peak_bytes / capacity_bytes
    for i, seconds in enumerate(step_seconds, start=1):
        clock += timedelta(seconds=seconds)
        stamp = f"{clock:%Y-%m-%d %H:%M:%S},{clock.microsecond // 1000:03d}"
        tps = tokens_per_step / devices / seconds
        tflops = tflops_per_step / seconds / devices / 1e12
        out.write(
            f"[rank0]:[titan] {stamp} - root - INFO - step: {i:2d}  loss: {loss_at(i):.5f}  "
            f"grad_norm: {grad_norm_at(i):.4f}  memory: {gib:.2f}GiB({share:.2f}%)  "
            f"tps: {tps:,.0f}  tflops: {tflops:.2f}  mfu: {100 * tflops * 1e12 / peak_flops:.2f}%\n"
        )


def oom_lines(out: TextIO, *, peak_bytes: int, capacity_bytes: int) -> None:
    """PyTorch's CUDA out-of-memory error, as rank 0 dies with it."""
    capacity, used = capacity_bytes / GIB, peak_bytes / GIB
    out.write(
        "[rank0]: Traceback (most recent call last):\n"
        '[rank0]:   File "train.py", line 1, in <module>\n'
        "[rank0]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. "
        f"GPU 0 has a total capacity of {capacity:.2f} GiB of which 0.31 GiB is free. "
        f"Including non-PyTorch memory, this process has {min(used, capacity):.2f} GiB "
        "memory in use.\n"
    )


def crash_lines(out: TextIO) -> None:
    """An NCCL failure in a collective: the run dies, the recipe is not to blame."""
    out.write(
        "[rank3]: torch.distributed.DistBackendError: NCCL error in: "  # not a path: log text
        "../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1970, unhandled system error "
        "(run with NCCL_DEBUG=INFO for details), NCCL version 2.21.5\n"
        "[rank3]: ncclSystemError: System call (e.g. socket, malloc) or external library call "
        "failed or device error.\n"
    )


def write_traces(
    target: Path,
    *,
    ranks: int,
    step_seconds: list[float],
    shares: dict[str, float],
    name: str,
) -> None:
    """One Kineto-style trace per rank: ``ProfilerStep#N`` windows on the host, kernels on
    the device split by ``shares`` (``compute``, ``communication``, ``cpu``; the rest idle):
    NCCL kernels for communication, host-only work where the device waits."""
    target.mkdir(parents=True, exist_ok=True)
    for rank in range(ranks):
        events: list[dict[str, Any]] = []
        ts = 1_000_000.0
        for n, seconds in enumerate(step_seconds, start=1):
            dur = seconds * 1e6
            events.append(
                {
                    "ph": "X",
                    "cat": "cpu_op",
                    "name": f"ProfilerStep#{n}",
                    "pid": 100 + rank,
                    "tid": 1,
                    "ts": ts,
                    "dur": dur,
                }
            )
            at = ts
            for kind in ("cpu", "compute", "communication"):
                length = dur * shares.get(kind, 0.0)
                if length <= 0:
                    continue
                if kind == "cpu":
                    event = {
                        "cat": "cuda_runtime",
                        "name": "cudaLaunchKernel",
                        "pid": 100 + rank,
                        "tid": 1,
                    }
                elif kind == "compute":
                    event = {"cat": "kernel", "name": "sm90_xmma_gemm_bf16", "pid": 0, "tid": 7}
                else:
                    event = {
                        "cat": "kernel",
                        "name": "ncclDevKernel_AllReduce_Sum_bf16",
                        "pid": 0,
                        "tid": 20,
                    }
                events.append({"ph": "X", "ts": at, "dur": length, **event})
                at += length
            ts += dur
        trace = {"distributedInfo": {"rank": rank}, "traceEvents": events, "simulated": True}
        path = target / name.format(rank=rank)
        path.write_bytes(gzip.compress(json.dumps(trace).encode()))
