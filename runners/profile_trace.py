"""Split profiled step wall time into compute, communication, memory copies, cpu and idle.

Input is the JSON written by ``torch.profiler.profile(...).export_chrome_trace(path)`` or by
``tensorboard_trace_handler``, plain or gzipped. Only complete events (``ph == "X"``,
``ts``/``dur`` in microseconds) are read; nothing is estimated.

Rules (a user-visible definition; fractions always sum to 1):

* **Step windows** are the host's ``ProfilerStep#N`` events (their ``gpu_user_annotation``
  copies on device streams are not windows). If several processes hold them, the one holding
  the earliest is the *host process*; its threads that hold them are the *main threads*.
  Zero-length windows are skipped. Every interval is clipped to the window and overlapping or
  nested events are merged (interval unions), so nothing is counted twice. Each category
  below is taken in the order listed: its time minus the time of the categories before it.
* A trace holding device activity (cat ``kernel``, ``gpu_memcpy`` or ``gpu_memset``: a CUDA
  run profiled with ``ProfilerActivity.CUDA``) is split by the GPU rules, any other by the
  CPU rules.

GPU rules: what the device does decides; the host accounts for the device's gaps. Device
work counts in the window where it runs, not in the step that launched it.

* **compute**: kernels (cat ``kernel``, any device) other than NCCL's.
* **communication**: NCCL kernels (name contains ``nccl``: ``ncclKernel_*`` up to NCCL 2.18,
  ``ncclDevKernel_*`` since), minus compute: *exposed* communication only. A collective
  overlapped by a compute kernel on another stream counts as compute: free collectives would
  shorten the step by the exposed part at most, so only that part makes communication the
  bottleneck. (Slowdown from sharing SMs and memory bandwidth while they overlap is not
  visible in a trace.)
* **memory_copy**: ``gpu_memcpy`` and ``gpu_memset`` events, minus every kernel.
* **cpu**: events of the host process on any thread (``cpu_op``, ``cuda_runtime``,
  ``user_annotation``, Python frames, ...; not ``ProfilerStep#N``, nor device-side categories
  such as ``cuda_sync``), minus all device activity: the device waits while the host works
  (kernel launches, dispatch, data loading, Python). Host-side collectives (gloo) in a GPU
  run are therefore cpu where the device waits, not communication.
* **idle**: the rest of the window: neither the device nor the host records anything.

CPU rules (the embedded workload; here communication comes before compute):

* **communication**: events of *any* thread of the host process whose name contains, ignoring
  case, ``allreduce``, ``all_reduce``, ``allgather``, ``all_gather``, ``reduce_scatter``,
  ``broadcast``, ``barrier``, ``gloo``, ``nccl``, ``c10d::`` or ``record_param_comms``.
  ``aten::`` operators (e.g. ``aten::broadcast_tensors``) and Python stack frames (cat
  ``python_function``) are local work and never communication. With gloo on CPU, torch 2.13
  emits a short ``c10d::allreduce_`` op on the main thread and a ``gloo:all_reduce`` event
  spanning the transfer on a ``pt_gloo_runloop`` thread; the main thread records nothing
  while it waits.
* **compute**: main-thread ``cpu_op`` events named ``aten::*``.
* **cpu**: every other main-thread event (Python frames, ``record_function`` regions,
  ``Optimizer.step#...``, autograd engine and data loading events, ...; not
  ``ProfilerStep#N``): host-side work outside operators.
* **idle**: the rest of the window, where no counted event runs. Profiling with
  ``with_stack=True`` records enclosing Python frames that span the whole step, so host waits
  (``time.sleep``) then count as cpu.

Fractions are totals over all windows divided by the total window length; ``step_seconds`` is
the mean window length.

Several ranks (``breakdown_from_traces``): one trace per rank, given as files or directories
(a directory contributes its ``*.pt.trace.json[.gz]`` files, the names
``tensorboard_trace_handler`` writes, or all its ``*.json[.gz]`` files if it has none). A
trace's rank is its ``distributedInfo.rank`` (torch.profiler records it once torch.distributed
is initialised), else the number after ``rank`` in its file name, else its position among the
traces; two traces of one rank are an error. Each rank is split on its own; the fractions and
``step_seconds`` are means over ranks, ``steps`` is the smallest rank's count, and ``ranks``
keeps every rank's split.
"""

from __future__ import annotations

import bisect
import gzip
import json
import os
import re
from collections.abc import Iterable
from itertools import accumulate
from pathlib import Path
from typing import Any

from gate.models import ProfileBreakdown, RankBreakdown
from runners.profile_trace_gpu import STEP_PREFIX, Interval, gpu_sets, has_device_activity

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
_RANK_IN_NAME = re.compile(r"(?<![a-z])rank[-_]?(\d+)", re.IGNORECASE)


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


def _split(sets: list[list[Interval]], windows: list[Interval]) -> list[float]:
    """Time of each set inside the windows, minus the time of the sets before it."""
    layers = [_merge(layer) for layer in accumulate(sets, lambda a, b: a + b)]
    covered = [0.0] * len(layers)
    for i, layer in enumerate(layers):
        ends = [hi for _, hi in layer]
        covered[i] = sum(_covered(layer, ends, start, end) for start, end in windows)
    return [c - prev for c, prev in zip(covered, [0.0, *covered[:-1]], strict=True)]


def _is_comm(name: str, cat: str) -> bool:
    if cat == "python_function" or name.startswith("aten::"):
        return False
    lowered = name.lower()
    return any(p in lowered for p in _COMM_PATTERNS)


def _cpu_sets(events: list[dict[str, Any]], pid: Any, main_tids: set[Any]) -> list[list[Interval]]:
    """``[communication, operators, other main-thread events]`` under the CPU rules."""
    comm: list[Interval] = []
    ops: list[Interval] = []
    other: list[Interval] = []
    for e in events:
        name, cat = str(e.get("name", "")), str(e.get("cat", ""))
        if e.get("pid") != pid or cat == "Trace":
            continue
        interval = (float(e["ts"]), float(e["ts"]) + float(e["dur"]))
        if _is_comm(name, cat):
            comm.append(interval)
        elif e.get("tid") not in main_tids or name.startswith(STEP_PREFIX):
            continue
        elif cat == "cpu_op" and name.startswith("aten::"):
            ops.append(interval)
        else:
            other.append(interval)
    return [comm, ops, other]


def _breakdown(data: dict[str, Any], trace_path: str | None) -> ProfileBreakdown:
    events: list[dict[str, Any]] = [
        e
        for e in data.get("traceEvents", [])
        if isinstance(e, dict)
        and e.get("ph") == "X"
        and isinstance(e.get("ts"), int | float)
        and isinstance(e.get("dur"), int | float)
        and e["dur"] >= 0
    ]
    steps = [
        e
        for e in events
        if str(e.get("name", "")).startswith(STEP_PREFIX) and e.get("cat") != "gpu_user_annotation"
    ]
    if not steps:
        raise ValueError(
            "no ProfilerStep#N events in trace: profile with a schedule and call prof.step() "
            "once per training step"
        )
    pid = min(steps, key=lambda e: float(e["ts"])).get("pid")
    steps = [e for e in steps if e.get("pid") == pid]
    windows = [(float(e["ts"]), float(e["ts"]) + float(e["dur"])) for e in steps if e["dur"] > 0]
    if not windows:
        raise ValueError("all ProfilerStep#N events in trace have zero duration")
    total = sum(end - start for start, end in windows)
    if has_device_activity(events):
        compute, comm, copies, cpu = _split(gpu_sets(events, pid), windows)
    else:
        comm, compute, cpu = _split(_cpu_sets(events, pid, {e.get("tid") for e in steps}), windows)
        copies = 0.0
    fractions = [x / total for x in (compute, comm, copies, cpu)]
    return ProfileBreakdown(
        compute=fractions[0],
        communication=fractions[1],
        memory_copy=fractions[2],
        cpu=fractions[3],
        idle=max(0.0, 1.0 - sum(fractions)),
        step_seconds=total / len(windows) / 1e6,
        steps=len(windows),
        trace_path=trace_path,
    )


def breakdown_from_trace(
    trace: dict[str, Any] | Path | str, *, trace_path: str | None = None
) -> ProfileBreakdown:
    """Compute, communication, memory copy, cpu and idle fractions of ``trace``'s steps.

    ``trace`` is a parsed Chrome trace or the path of one (``.json`` or ``.json.gz``). When it
    is a path and ``trace_path`` is not given, the path is recorded in the result.
    Raises ``ValueError`` when the trace holds no non-empty ``ProfilerStep#N`` events.
    """
    if trace_path is None and not isinstance(trace, dict):
        trace_path = str(trace)
    return _breakdown(_load(trace), trace_path)


def _trace_files(paths: Iterable[Path | str]) -> list[Path]:
    files: list[Path] = []
    for path in map(Path, paths):
        if not path.is_dir():
            files.append(path)
            continue
        found = sorted(path.glob("*.pt.trace.json")) + sorted(path.glob("*.pt.trace.json.gz"))
        files += found or sorted(path.glob("*.json")) + sorted(path.glob("*.json.gz"))
    return files


def _rank_of(data: dict[str, Any], path: Path) -> int | None:
    info = data.get("distributedInfo")
    if isinstance(info, dict) and isinstance(info.get("rank"), int):
        return int(info["rank"])
    match = _RANK_IN_NAME.search(path.name)
    return int(match.group(1)) if match else None


def breakdown_from_traces(paths: Path | str | Iterable[Path | str]) -> ProfileBreakdown:
    """The mean split over ranks of one trace per rank, each rank's own split in ``ranks``.

    ``paths``: trace files and directories of them (see the module docstring for how files
    are found and ranks named). The result's ``trace_path`` is the one path given, else the
    traces' common directory.
    Raises ``ValueError`` when no trace is found, two traces name one rank, or a trace holds
    no non-empty ``ProfilerStep#N`` events.
    """
    given = [paths] if isinstance(paths, Path | str) else list(paths)
    files = _trace_files(given)
    if not files:
        raise ValueError(f"no trace files in {', '.join(map(str, given)) or 'an empty list'}")
    by_rank: dict[int, RankBreakdown] = {}
    for position, path in enumerate(files):
        data = _load(path)
        rank = _rank_of(data, path)
        rank = position if rank is None else rank
        if rank in by_rank:
            raise ValueError(f"two traces of rank {rank}: {by_rank[rank].trace_path}, {path}")
        split = _breakdown(data, str(path))
        by_rank[rank] = RankBreakdown(rank=rank, **split.model_dump(exclude={"ranks"}))
    ranks = [by_rank[r] for r in sorted(by_rank)]

    def mean(field: str) -> float:
        return sum(float(getattr(r, field)) for r in ranks) / len(ranks)

    try:
        common = str(given[0]) if len(given) == 1 else os.path.commonpath(list(map(str, files)))
    except ValueError:  # absolute and relative paths mixed
        common = None
    return ProfileBreakdown(
        compute=mean("compute"),
        communication=mean("communication"),
        memory_copy=mean("memory_copy"),
        cpu=mean("cpu"),
        idle=mean("idle"),
        step_seconds=mean("step_seconds"),
        steps=min(r.steps for r in ranks),
        trace_path=common,
        ranks=ranks,
    )
