"""Tests for the GPU rules and the per-rank split of runners.profile_trace.

The traces under tests/fixtures/traces/ were written to torch.profiler's (Kineto's) Chrome-trace
format, not recorded on a GPU (see SOURCES.md there). Every expected number is computed by hand
from the intervals stated next to it: microseconds from the start of a step window.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from bot.agents.rules import bottleneck
from gate.models import ProfileBreakdown, RankBreakdown
from runners.profile_trace import breakdown_from_trace, breakdown_from_traces

TRACES = Path(__file__).parent / "fixtures" / "traces"
COMPUTE_BOUND = TRACES / "compute_bound_2rank"
RANK0_FILE = COMPUTE_BOUND / "gpu-node-01_41230.1718031201123456789.pt.trace.json"
RANK1_FILE = COMPUTE_BOUND / "gpu-node-01_41229.1718031201123987654.pt.trace.json"


def split(b: ProfileBreakdown | RankBreakdown) -> tuple[float, ...]:
    """(compute, communication, memory_copy, cpu, idle), checked to sum to 1."""
    values = (b.compute, b.communication, b.memory_copy, b.cpu, b.idle)
    assert sum(values) == pytest.approx(1.0, abs=1e-9)
    return values


def neck(b: ProfileBreakdown) -> str:
    """What the rules agent names as the bottleneck of this profile."""
    return bottleneck(SimpleNamespace(profile=b))  # type: ignore[arg-type]


# Compute-bound 2-rank step (ProfilerStep#3 and #4 identical, 1000 us each):
#   rank 0: host "## forward ##" [2,40]; GEMM forward [40,400]; backward's evaluate_function on
#     the pt_autograd_0 thread [400,420]; GEMM backward [420,800]; NCCL all-reduce [700,850] on
#     stream 24, so [700,800] runs under backward (compute) and [800,850] is exposed; fused
#     AdamW [850,950]; DtoH copy of the loss [950,960]; aten::item [940,975]; nothing else.
#     compute 360+380+100 = 840, communication 50, memory_copy 10, cpu 38+20+15 = 73,
#     idle [0,2]+[975,1000] = 27.
#   rank 1: host [0,40]; forward [40,380]; autograd [380,400]; backward [400,700]; all-reduce
#     [650,850] (50 hidden, 150 exposed); AdamW [850,950]; copy [950,960]; aten::item [940,980].
#     compute 340+300+100 = 740, communication 150, memory_copy 10, cpu 40+20+20 = 80, idle 20.
RANK0 = (0.84, 0.05, 0.01, 0.073, 0.027)
RANK1 = (0.74, 0.15, 0.01, 0.08, 0.02)
MEAN = (0.79, 0.10, 0.01, 0.0765, 0.0235)


def test_compute_bound_two_ranks_from_a_tensorboard_trace_directory() -> None:
    b = breakdown_from_traces(COMPUTE_BOUND)
    assert b.ranks is not None
    # Ranks come from distributedInfo.rank: rank 1's file name sorts first.
    assert [(r.rank, r.trace_path) for r in b.ranks] == [(0, str(RANK0_FILE)), (1, str(RANK1_FILE))]
    assert split(b.ranks[0]) == pytest.approx(RANK0, abs=1e-12)
    assert split(b.ranks[1]) == pytest.approx(RANK1, abs=1e-12)
    assert split(b) == pytest.approx(MEAN, abs=1e-12)
    assert (b.steps, b.trace_path) == (2, str(COMPUTE_BOUND))
    assert b.step_seconds == pytest.approx(0.001)
    assert neck(b) == "compute"


def test_one_rank_trace_through_the_single_trace_api() -> None:
    b = breakdown_from_trace(RANK1_FILE)
    assert split(b) == pytest.approx(RANK1, abs=1e-12)
    assert (b.ranks, b.steps, b.trace_path) == (None, 2, str(RANK1_FILE))
    # a list of files works as well as a directory
    assert breakdown_from_traces([RANK1_FILE, RANK0_FILE]).model_dump(exclude={"trace_path"}) == (
        breakdown_from_traces(COMPUTE_BOUND).model_dump(exclude={"trace_path"})
    )


def test_communication_bound_counts_only_exposed_collectives() -> None:
    # One 1000 us step per rank, FSDP-like: forward [10,210]; all-gather [210,510] (nothing
    # else runs: exposed); backward [510,710]; reduce-scatter [650,950], of which [650,710] runs
    # under backward (compute) and [710,950] is exposed. Host: aten::embedding [0,10], then
    # cudaStreamSynchronize until 952 (rank 0) or 960 (rank 1).
    #   compute 200+200 = 400, communication 300+240 = 540, memory_copy 0,
    #   cpu 10+2 = 12 (rank 0) or 10+10 = 20 (rank 1), idle 48 or 40.
    # Had the overlap counted as communication, compute would be 0.34 and communication 0.60.
    files = [TRACES / "comm_bound" / f"trace-rank{r}.json" for r in (1, 0)]
    b = breakdown_from_traces(files)
    assert b.ranks is not None
    # These traces carry no distributedInfo: the rank is the number after "rank" in the name.
    assert [r.rank for r in b.ranks] == [0, 1]
    assert split(b.ranks[0]) == pytest.approx((0.4, 0.54, 0.0, 0.012, 0.048), abs=1e-12)
    assert split(b.ranks[1]) == pytest.approx((0.4, 0.54, 0.0, 0.02, 0.04), abs=1e-12)
    assert split(b) == pytest.approx((0.4, 0.54, 0.0, 0.016, 0.044), abs=1e-12)
    assert b.trace_path == str(TRACES / "comm_bound")
    assert neck(b) == "communication"


def test_memory_copy_heavy_step() -> None:
    # One 1000 us step, one process: host aten::to [0,20]; HtoD pageable copy [15,415]; GEMM
    # [415,615]; HtoD pinned copy [500,700] on a copy stream ([500,615] under the GEMM, 85
    # exposed); memset [700,715]; GEMM [715,815]; DtoH copy [815,915]; aten::item [800,930].
    # A cuda_sync "Stream Sync" on the device's process spans the DtoH copy: not device work.
    #   compute 200+100 = 300, memory_copy 400+85+15+100 = 600, cpu [0,15]+[915,930] = 30,
    #   idle [930,1000] = 70.
    b = breakdown_from_trace(TRACES / "memcpy_heavy.json")
    assert split(b) == pytest.approx((0.3, 0.0, 0.6, 0.03, 0.07), abs=1e-12)
    assert (b.steps, b.ranks) == (1, None)


def test_launch_bound_gzipped_trace_directory() -> None:
    # One 500 us step: "## forward ##" [0,490] holds ten aten::add ops [50k, 50k+40], each
    # launching (cudaLaunchKernel [50k+30, 50k+38]) a 5 us kernel [50k+38, 50k+43].
    #   compute 10 x 5 = 50, cpu [0,493] - 50 = 443, idle [493,500] = 7.
    directory = TRACES / "launch_bound"
    b = breakdown_from_traces(directory)
    assert split(b) == pytest.approx((0.1, 0.0, 0.0, 0.886, 0.014), abs=1e-12)
    assert b.ranks is not None and [r.rank for r in b.ranks] == [0]
    assert b.trace_path == str(directory) and b.step_seconds == pytest.approx(0.0005)
    (gz,) = directory.glob("*.pt.trace.json.gz")
    assert split(breakdown_from_trace(gz)) == pytest.approx(split(b), abs=1e-12)
    assert neck(b) == "cpu"


# --- hand-written traces in the same layout -------------------------------------------------

HOST, MAIN, AUTOGRAD, GPU = 7000, 7000, 7032, 0


def x(
    cat: str, name: str, ts: float, dur: float, pid: Any = HOST, tid: Any = MAIN
) -> dict[str, Any]:
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur}


def kernel(name: str, ts: float, dur: float, stream: int = 7) -> dict[str, Any]:
    return x("kernel", name, ts, dur, pid=GPU, tid=stream) | {"args": {"stream": stream}}


def gpu_trace(*events: dict[str, Any], rank: int | None = None) -> dict[str, Any]:
    data: dict[str, Any] = {"schemaVersion": 1, "traceEvents": list(events)}
    if rank is not None:
        data["distributedInfo"] = {"backend": "nccl", "rank": rank, "world_size": 2}
    return data


def test_gpu_rules_precedence_and_what_is_not_counted() -> None:
    t = gpu_trace(
        x("user_annotation", "ProfilerStep#1", 0, 100),
        kernel("ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_stages_32x5_tn", 0, 30),
        kernel(
            "ncclKernel_AllReduce_RING_LL_Sum_bfloat16(ncclDevComm*, unsigned long, ncclWork*)",
            10,
            30,
            stream=20,
        ),  # [10,30] under the GEMM, [30,40] exposed
        x("gpu_memcpy", "Memcpy DtoD (Device -> Device)", 35, 15, pid=GPU, tid=7),  # [40,50]
        x("gpu_memset", "Memset (Device)", 45, 10, pid=GPU, tid=7),  # [50,55]
        x("cpu_op", "autograd::engine::evaluate_function: MmBackward0", 50, 20, tid=AUTOGRAD),
        x("cuda_runtime", "cudaLaunchKernel", 85, 5),  # [85,90] cpu
        x("gpu_user_annotation", "ProfilerStep#0", -10, 5, pid=GPU, tid=7),  # never a window
        x("cuda_sync", "Stream Sync", 70, 30, pid=GPU, tid=1000007),  # not device work
        x("cpu_op", "aten::mm", 90, 10, pid=9999),  # another process: ignored
    )
    # compute 30, communication 10, memory_copy 15, cpu [55,70]+[85,90] = 20, idle 25
    b = breakdown_from_trace(t)
    assert split(b) == pytest.approx((0.3, 0.1, 0.15, 0.2, 0.25), abs=1e-12)
    assert b.steps == 1


def test_memcpy_under_an_nccl_kernel_is_communication() -> None:
    t = gpu_trace(
        x("user_annotation", "ProfilerStep#1", 0, 100),
        kernel(
            "ncclDevKernel_ReduceScatter_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
            0,
            50,
            stream=20,
        ),
        x("gpu_memcpy", "Memcpy HtoD (Pinned -> Device)", 40, 20, pid=GPU, tid=28),
    )
    assert split(breakdown_from_trace(t)) == pytest.approx((0, 0.5, 0.1, 0, 0.4), abs=1e-12)


def write(path: Path, data: dict[str, Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))
    return path


def test_rank_fallbacks(tmp_path: Path) -> None:
    step = x("user_annotation", "ProfilerStep#1", 0, 100)
    busy = gpu_trace(step, kernel("gemm", 0, 100))
    half = gpu_trace(step, kernel("gemm", 0, 50))
    # no distributedInfo, no rank in the names ("frank9" is not one): ranks by given position
    b = breakdown_from_traces(
        [write(tmp_path / "frank9.json", busy), write(tmp_path / "a.json", half)]
    )
    assert b.ranks is not None
    assert [(r.rank, r.compute) for r in b.ranks] == [(0, 1.0), (1, 0.5)]
    assert (b.compute, b.idle, b.trace_path) == (0.75, 0.25, str(tmp_path))
    # a directory without *.pt.trace.json files contributes its *.json files, sorted
    b = breakdown_from_traces(tmp_path)
    assert b.ranks is not None and [r.compute for r in b.ranks] == [0.5, 1.0]


def test_rank_errors(tmp_path: Path) -> None:
    step = x("user_annotation", "ProfilerStep#1", 0, 100)
    a = write(tmp_path / "x" / "h_1.1.pt.trace.json", gpu_trace(step, rank=3))
    write(tmp_path / "x" / "h_2.2.pt.trace.json", gpu_trace(step, rank=3))
    write(tmp_path / "x" / "notes.json", {"not": "a trace"})  # not read: .pt.trace.json exist
    with pytest.raises(ValueError, match="two traces of rank 3"):
        breakdown_from_traces(tmp_path / "x")
    assert breakdown_from_traces(a).ranks == [
        RankBreakdown(
            rank=3,
            compute=0,
            communication=0,
            cpu=0,
            idle=1,
            step_seconds=1e-4,
            steps=1,
            trace_path=str(a),
        )
    ]
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="no trace files"):
        breakdown_from_traces(tmp_path / "empty")
    with pytest.raises(ValueError, match="no trace files"):
        breakdown_from_traces([])


def test_stored_profiles_keep_their_shape() -> None:
    old: dict[str, float | None] = {"compute": 0.5, "communication": 0.1, "cpu": 0.3}
    old |= {"idle": 0.1, "step_seconds": 0.2, "steps": 3, "trace_path": None}
    cpu_profile = ProfileBreakdown.model_validate(old)  # as attune 0.1 stored it
    assert (cpu_profile.memory_copy, cpu_profile.ranks) == (0.0, None)
    assert cpu_profile.model_dump(mode="json") == old  # CPU profiles are written as before
    gpu_profile = breakdown_from_traces(COMPUTE_BOUND)
    stored = json.loads(gpu_profile.model_dump_json())
    assert stored["memory_copy"] == pytest.approx(0.01) and len(stored["ranks"]) == 2
    assert ProfileBreakdown.model_validate(stored) == gpu_profile
