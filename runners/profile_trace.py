"""Split profiled step wall time into compute, communication, cpu and idle from a Chrome trace.

Input is the JSON written by ``torch.profiler.profile(...).export_chrome_trace(path)``. Only
complete events (``ph == "X"``, ``ts``/``dur`` in microseconds) are read; nothing is estimated.

Rules (a user-visible definition; fractions always sum to 1):

* **Step windows** are the ``ProfilerStep#N`` events. If several processes hold them, the one
  holding the earliest is used. Its threads that hold ``ProfilerStep#N`` events are the *main
  threads*. Zero-length windows are skipped. Every event interval is clipped to the window and
  overlapping or nested events are merged (interval unions), so nothing is counted twice.
* **communication**: events of *any* thread of that process whose name contains, ignoring case,
  ``allreduce``, ``all_reduce``, ``allgather``, ``all_gather``, ``reduce_scatter``,
  ``broadcast``, ``barrier``, ``gloo``, ``nccl``, ``c10d::`` or ``record_param_comms``; plus GPU
  kernels (cat ``kernel``, any process) whose name contains ``nccl``. ``aten::`` operators
  (e.g. ``aten::broadcast_tensors``) and Python stack frames (cat ``python_function``) are local
  work and never communication. With gloo on CPU, torch 2.13 emits a short ``c10d::allreduce_``
  op on the main thread and a ``gloo:all_reduce`` event spanning the transfer on a
  ``pt_gloo_runloop`` thread; the main thread records nothing while it waits.
* **compute**: main-thread ``cpu_op`` events named ``aten::*`` and GPU kernels (cat ``kernel``,
  any process), minus communication.
* **cpu**: every other main-thread event (Python frames, ``record_function`` regions,
  ``Optimizer.step#...``, autograd engine and data loading events, ...; not ``ProfilerStep#N``)
  minus compute and communication: host-side work outside operators.
* **idle**: the rest of the window, where no counted event runs. Device events other than
  kernels (memcpy, memset) are not counted. Profiling with ``with_stack=True`` records enclosing
  Python frames that span the whole step, so host waits (``time.sleep``) then count as cpu.

Fractions are totals over all windows divided by the total window length; ``step_seconds`` is
the mean window length.
"""

from __future__ import annotations

import bisect
import gzip
import json
from pathlib import Path
from typing import Any

from gate.models import ProfileBreakdown

Interval = tuple[float, float]

_STEP_PREFIX = "ProfilerStep#"
_COMM_PATTERNS = (
    "allreduce",
    "all_reduce",
    "allgather",
    "all_gather",
    "reduce_scatter",
    "broadcast",
    "barrier",
    "gloo",
    "nccl",
    "c10d::",
    "record_param_comms",
)


def _load(trace: dict[str, Any] | Path | str) -> dict[str, Any]:
    if isinstance(trace, dict):
        return trace
    path = Path(trace)
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as fh:
        data: Any = json.load(fh)
    if isinstance(data, list):  # bare JSON array form of the Chrome trace format
        return {"traceEvents": data}
    if not isinstance(data, dict):
        raise ValueError(f"{path}: not a Chrome trace (expected a JSON object)")
    return data


def _merge(intervals: list[Interval]) -> list[Interval]:
    """Union of intervals as a sorted list of disjoint intervals."""
    merged: list[Interval] = []
    for start, end in sorted(intervals):
        if merged and start <= merged[-1][1]:
            if end > merged[-1][1]:
                merged[-1] = (merged[-1][0], end)
        else:
            merged.append((start, end))
    return merged


def _covered(merged: list[Interval], ends: list[float], start: float, end: float) -> float:
    """Length of ``[start, end]`` covered by disjoint sorted intervals (``ends``: their ends)."""
    total = 0.0
    for i in range(bisect.bisect_right(ends, start), len(merged)):
        lo, hi = merged[i]
        if lo >= end:
            break
        total += min(hi, end) - max(lo, start)
    return total


def _is_comm(name: str, cat: str) -> bool:
    lowered = name.lower()
    if cat == "kernel":
        return "nccl" in lowered
    if cat == "python_function" or name.startswith("aten::"):
        return False
    return any(p in lowered for p in _COMM_PATTERNS)


def breakdown_from_trace(
    trace: dict[str, Any] | Path | str, *, trace_path: str | None = None
) -> ProfileBreakdown:
    """Compute, communication, cpu and idle fractions of the profiled steps in ``trace``.

    ``trace`` is a parsed Chrome trace or the path of one (``.json`` or ``.json.gz``). When it
    is a path and ``trace_path`` is not given, the path is recorded in the result.
    Raises ``ValueError`` when the trace holds no non-empty ``ProfilerStep#N`` events.
    """
    if trace_path is None and not isinstance(trace, dict):
        trace_path = str(trace)
    data = _load(trace)
    events: list[dict[str, Any]] = [
        e
        for e in data.get("traceEvents", [])
        if isinstance(e, dict)
        and e.get("ph") == "X"
        and isinstance(e.get("ts"), int | float)
        and isinstance(e.get("dur"), int | float)
        and e["dur"] >= 0
    ]
    steps = [e for e in events if str(e.get("name", "")).startswith(_STEP_PREFIX)]
    if not steps:
        raise ValueError(
            "no ProfilerStep#N events in trace: profile with a schedule and call prof.step() "
            "once per training step"
        )
    pid = min(steps, key=lambda e: float(e["ts"])).get("pid")
    steps = [e for e in steps if e.get("pid") == pid]
    main_tids = {e.get("tid") for e in steps}
    windows = [(float(e["ts"]), float(e["ts"]) + float(e["dur"])) for e in steps if e["dur"] > 0]
    if not windows:
        raise ValueError("all ProfilerStep#N events in trace have zero duration")

    comm: list[Interval] = []
    ops: list[Interval] = []
    other: list[Interval] = []
    for e in events:
        name, cat = str(e.get("name", "")), str(e.get("cat", ""))
        same_process = e.get("pid") == pid
        if not (same_process or cat == "kernel") or cat == "Trace":
            continue
        interval = (float(e["ts"]), float(e["ts"]) + float(e["dur"]))
        if _is_comm(name, cat):
            comm.append(interval)
        elif cat == "kernel":
            ops.append(interval)
        elif e.get("tid") not in main_tids or name.startswith(_STEP_PREFIX):
            continue
        elif cat == "cpu_op" and name.startswith("aten::"):
            ops.append(interval)
        else:
            other.append(interval)

    # Nested layers: comm ⊆ comm+ops ⊆ everything; each category is a difference of lengths.
    layers = [_merge(comm), _merge(comm + ops), _merge(comm + ops + other)]
    layer_ends = [[hi for _, hi in layer] for layer in layers]
    covered = [0.0, 0.0, 0.0]
    for start, end in windows:
        for i, (layer, ends) in enumerate(zip(layers, layer_ends, strict=True)):
            covered[i] += _covered(layer, ends, start, end)
    total = sum(end - start for start, end in windows)
    communication = covered[0] / total
    compute = (covered[1] - covered[0]) / total
    cpu = (covered[2] - covered[1]) / total
    return ProfileBreakdown(
        compute=compute,
        communication=communication,
        cpu=cpu,
        idle=max(0.0, 1.0 - compute - communication - cpu),
        step_seconds=total / len(windows) / 1e6,
        steps=len(windows),
        trace_path=trace_path,
    )
