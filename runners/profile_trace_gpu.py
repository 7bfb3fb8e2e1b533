"""The GPU rules of ``runners.profile_trace``: what a CUDA run's device and host were doing.

The rules themselves (a user-visible definition) are in ``runners.profile_trace``'s docstring.
This module only sorts one trace's complete events into the four sets those rules stack:
kernels, NCCL kernels, memory copies and host activity. Category names are Kineto's activity
type names (``libkineto/include/ActivityType.h``): ``kernel``, ``gpu_memcpy``, ``gpu_memset``
on the device's process (``pid`` = device index, ``tid`` = stream); ``cpu_op``,
``user_annotation``, ``cuda_runtime``, ``cuda_driver``, ``python_function`` on the host's
(``pid`` = OS process id, ``tid`` = OS thread id).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

Interval = tuple[float, float]

STEP_PREFIX = "ProfilerStep#"
KERNEL = "kernel"
COPIES = frozenset({"gpu_memcpy", "gpu_memset"})
DEVICE_ACTIVITY = COPIES | {KERNEL}
NOT_HOST_WORK = frozenset({"gpu_user_annotation", "cuda_sync", "cuda_event", "Trace"})
"""Categories that are not host work even when their ``pid`` is the host's: range markers
copied onto device streams, CUPTI synchronisation and CUDA event records, the profiler span."""


def is_nccl_kernel(name: str) -> bool:
    """NCCL's device kernels: ``ncclKernel_*`` (NCCL <= 2.18), ``ncclDevKernel_*`` (2.19+)."""
    return "nccl" in name.lower()


def has_device_activity(events: Iterable[dict[str, Any]]) -> bool:
    """Whether a trace recorded anything a GPU executed (kernels, memcpy, memset)."""
    return any(e.get("cat") in DEVICE_ACTIVITY for e in events)


def gpu_sets(events: Iterable[dict[str, Any]], host_pid: Any) -> list[list[Interval]]:
    """``[kernels, nccl_kernels, copies, host]`` intervals of complete events (unmerged).

    Device events of every device in the trace count (one rank's trace normally holds one);
    host events are those of ``host_pid`` on any thread (on CUDA, autograd runs backward on
    its own ``pt_autograd_N`` thread), except ``ProfilerStep#N`` and ``NOT_HOST_WORK``.
    """
    kernels: list[Interval] = []
    nccl: list[Interval] = []
    copies: list[Interval] = []
    host: list[Interval] = []
    for e in events:
        cat, name = str(e.get("cat", "")), str(e.get("name", ""))
        interval = (float(e["ts"]), float(e["ts"]) + float(e["dur"]))
        if cat == KERNEL:
            (nccl if is_nccl_kernel(name) else kernels).append(interval)
        elif cat in COPIES:
            copies.append(interval)
        elif (
            e.get("pid") == host_pid
            and cat not in NOT_HOST_WORK
            and not name.startswith(STEP_PREFIX)
        ):
            host.append(interval)
    return [kernels, nccl, copies, host]
