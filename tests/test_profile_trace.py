"""Tests for runners.profile_trace: hand-written traces with known answers, then real profiles."""

from __future__ import annotations

import gzip
import json
import time
from pathlib import Path
from typing import Any

import pytest

from runners.profile_trace import breakdown_from_trace

PID, MAIN, GLOO = 100, 1, 2


def ev(
    name: str, ts: float, dur: float, *, cat: str = "cpu_op", pid: Any = PID, tid: Any = MAIN
) -> dict[str, Any]:
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur}


def step(n: int, ts: float, dur: float) -> dict[str, Any]:
    return ev(f"ProfilerStep#{n}", ts, dur, cat="user_annotation")


def trace(*events: dict[str, Any]) -> dict[str, Any]:
    meta = {"ph": "M", "name": "process_name", "pid": PID, "tid": 0, "args": {"name": "python"}}
    return {"schemaVersion": 1, "traceEvents": [meta, *events]}


def fractions(t: dict[str, Any] | Path) -> tuple[float, float, float, float]:
    b = breakdown_from_trace(t)
    assert b.compute + b.communication + b.cpu + b.idle == pytest.approx(1.0, abs=1e-9)
    return b.compute, b.communication, b.cpu, b.idle


def test_nested_ops_count_once_and_annotation_overhead_is_cpu() -> None:
    t = trace(
        step(1, 0, 100),
        ev("attune.optimizer", 10, 50, cat="user_annotation"),
        ev("aten::linear", 20, 30),
        ev("aten::addmm", 25, 20),
        ev("aten::t", 22, 2),
    )
    assert fractions(t) == pytest.approx((0.3, 0.0, 0.2, 0.5), abs=1e-12)


def test_comm_on_gloo_thread_overlapping_compute_is_communication() -> None:
    t = trace(
        step(1, 0, 100),
        ev("aten::mm", 0, 40),
        ev("c10d::allreduce_", 40, 5),
        ev("gloo:all_reduce", 30, 50, cat="user_annotation", tid=GLOO),
        ev("aten::copy_", 85, 10, tid=GLOO),  # non-comm work off the main thread: ignored
    )
    assert fractions(t) == pytest.approx((0.3, 0.5, 0.0, 0.2), abs=1e-12)


def test_two_steps_clip_events_and_average_over_total_window() -> None:
    t = trace(
        step(1, 0, 100),
        step(2, 100, 200),
        ev("aten::mm", -50, 60),  # 10 us inside step 1
        ev("aten::mm", 90, 30),  # straddles both steps: 10 + 20
        ev("<built-in method item>", 150, 50, cat="python_function"),
        ev("record_param_comms", 250, 40),
        ev("aten::add", 400, 10),  # after the last step
    )
    b = breakdown_from_trace(t)
    assert (b.compute, b.communication, b.cpu) == pytest.approx((40 / 300, 40 / 300, 50 / 300))
    assert b.idle == pytest.approx(170 / 300, abs=1e-12)
    assert b.steps == 2
    assert b.step_seconds == pytest.approx(150e-6)


def test_profiler_step_event_itself_is_not_cpu_and_zero_length_steps_are_skipped() -> None:
    t = trace(step(1, 0, 100), step(2, 100, 0), ev("aten::mm", 100, 0))
    assert fractions(t) == (0.0, 0.0, 0.0, 1.0)
    assert breakdown_from_trace(t).steps == 1


def test_local_ops_named_like_collectives_are_not_communication() -> None:
    t = trace(
        step(1, 0, 100),
        ev("torch/functional.py(47): broadcast_tensors", 0, 30, cat="python_function"),
        ev("aten::broadcast_tensors", 5, 10),
    )
    assert fractions(t) == pytest.approx((0.1, 0.0, 0.2, 0.7), abs=1e-12)


def test_gpu_kernels_from_device_process_and_other_processes() -> None:
    t = trace(
        step(1, 0, 100),
        ev("cudaLaunchKernel", 0, 10, cat="cuda_runtime"),
        ev("ampere_sgemm_128x64_nn", 5, 30, cat="kernel", pid=0, tid=7),
        ev("ncclDevKernel_AllReduce_Sum_f32_RING_LL", 50, 20, cat="kernel", pid=0, tid=20),
        ev("aten::mm", 70, 30, pid=999),  # another process without steps: ignored
        ev("gloo:all_reduce", 70, 30, cat="user_annotation", pid=999),
        step(1, 500, 100) | {"pid": 999},  # later process with steps: ignored
    )
    assert fractions(t) == pytest.approx((0.3, 0.2, 0.05, 0.45), abs=1e-12)


def test_path_input_plain_and_gzip(tmp_path: Path) -> None:
    t = trace(step(1, 0, 10), ev("aten::mm", 0, 5))
    plain, zipped = tmp_path / "t.json", tmp_path / "t.json.gz"
    plain.write_text(json.dumps(t))
    with gzip.open(zipped, "wt") as fh:
        json.dump(t, fh)
    for path in (plain, zipped):
        b = breakdown_from_trace(path)
        assert (b.compute, b.idle, b.trace_path) == (0.5, 0.5, str(path))
    assert breakdown_from_trace(t, trace_path="x.json").trace_path == "x.json"
    assert breakdown_from_trace(t).trace_path is None


def test_no_profiler_steps_raises() -> None:
    with pytest.raises(ValueError, match="ProfilerStep"):
        breakdown_from_trace(trace(ev("aten::mm", 0, 5)))
    with pytest.raises(ValueError, match="zero duration"):
        breakdown_from_trace(trace(step(1, 0, 0)))


# --- real traces from torch.profiler -------------------------------------------------------

SLEEP_S = 0.02
quiet_profiler = pytest.mark.filterwarnings("ignore:.*Profiler clears events:UserWarning")


def _profile_loop(out: Path, *, all_reduce: bool) -> None:
    """Three steps (1 warmup + 2 active) of a tiny MLP; rank 0 (or the only process) exports."""
    import torch
    import torch.distributed as dist
    from torch.profiler import ProfilerActivity, profile, record_function, schedule

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(128, 256), torch.nn.ReLU(), torch.nn.Linear(256, 8))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    payload = torch.ones(2_000_000)
    rank = dist.get_rank() if all_reduce else 0

    def export(prof: profile) -> None:
        if rank == 0:
            prof.export_chrome_trace(str(out))

    with profile(
        activities=[ProfilerActivity.CPU],
        schedule=schedule(wait=0, warmup=1, active=2),
        on_trace_ready=export,
    ) as prof:
        for _ in range(3):
            with record_function("attune.forward_backward"):
                loss = model(torch.randn(64, 128)).square().mean()
                loss.backward()
            if all_reduce:
                dist.all_reduce(payload)
            with record_function("attune.optimizer"):
                opt.step()
                opt.zero_grad()
            time.sleep(SLEEP_S)
            prof.step()


def _gloo_worker(rank: int, world_size: int, init_file: str, out: str) -> None:
    from datetime import timedelta

    import torch.distributed as dist

    dist.init_process_group(
        "gloo",
        init_method=f"file://{init_file}",
        rank=rank,
        world_size=world_size,
        timeout=timedelta(seconds=60),
    )
    try:
        _profile_loop(Path(out), all_reduce=True)
        dist.barrier()
    finally:
        dist.destroy_process_group()


@quiet_profiler
def test_real_single_process_trace(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    out = tmp_path / "trace.json"
    _profile_loop(out, all_reduce=False)
    b = breakdown_from_trace(out)
    assert b.steps == 2
    assert b.compute + b.communication + b.cpu + b.idle == pytest.approx(1.0, abs=1e-9)
    assert b.compute > 0 and b.cpu > 0
    assert b.communication == 0
    # Nothing is recorded while the host sleeps: idle time covers at least the sleep.
    assert b.idle * b.step_seconds >= SLEEP_S * 0.95
    assert b.step_seconds >= SLEEP_S


@pytest.mark.slow
@quiet_profiler
def test_real_two_process_gloo_all_reduce(tmp_path: Path) -> None:
    # Observed with torch 2.13 (CPU, gloo): the main thread records a short cpu_op
    # "c10d::allreduce_" (launch only); the transfer itself is a user_annotation
    # "gloo:all_reduce" on a "pt_gloo_runloop" thread of the same process, and the main thread
    # records nothing while it waits. No "record_param_comms" event appears.
    pytest.importorskip("torch")
    from torch.multiprocessing.spawn import spawn

    out = tmp_path / "trace.json"
    init = str(tmp_path / "init")
    # torch's spawn is unannotated
    spawn(_gloo_worker, args=(2, init, str(out)), nprocs=2, join=True)  # type: ignore[no-untyped-call]
    data = json.loads(out.read_text())
    names = {e.get("name") for e in data["traceEvents"]}
    assert {"c10d::allreduce_", "gloo:all_reduce"} <= names
    b = breakdown_from_trace(out)
    assert b.steps == 2
    assert b.compute + b.communication + b.cpu + b.idle == pytest.approx(1.0, abs=1e-9)
    assert b.communication > 0 and b.compute > 0
