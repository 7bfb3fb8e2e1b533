"""The step-time model (perfmodel/): its physics against closed forms, its data files, and its
error against the published runs of benchmarks/data/."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest
import yaml

from gate.errors import AttuneError
from gate.memory import predict_memory
from gate.models import EffectiveConfig
from perfmodel import hardware as hw_data
from perfmodel import part, predict_step, predict_workload, workload_of
from perfmodel.comm import communication
from perfmodel.flops import token_flops
from perfmodel.step import COMPONENTS, _f
from tests.conftest import ROOT

LLAMA3_8B: dict[str, Any] = {
    # Llama-3 8B as Megatron-LM resolves examples/megatron/llama3-8b.yaml (bf16, no FP8 here)
    "num_layers": 32,
    "hidden_size": 4096,
    "ffn_hidden_size": 14336,
    "num_attention_heads": 32,
    "group_query_attention": True,
    "num_query_groups": 8,
    "kv_channels": 128,
    "swiglu": True,
    "normalization": "RMSNorm",
    "add_bias_linear": False,
    "untie_embeddings_and_output_weights": True,
    "padded_vocab_size": 128256,
    "seq_length": 8192,
    "micro_batch_size": 1,
    "global_batch_size": 128,
    "num_microbatches": 16,
    "tensor_model_parallel_size": 1,
    "pipeline_model_parallel_size": 1,
    "context_parallel_size": 1,
    "data_parallel_size": 8,
    "world_size": 8,
    "bf16": True,
    "use_distributed_optimizer": True,
    "overlap_grad_reduce": True,
    "overlap_param_gather": True,
    "attention_backend": "AttnBackend.fused",
}


def _cfg(**changes: Any) -> EffectiveConfig:
    values = {**LLAMA3_8B, **changes}
    return EffectiveConfig(
        framework="megatron",
        framework_version="0.19.2",
        values=values,
        devices=values["world_size"],
    )


def test_flops_are_6n_per_token_plus_causal_attention() -> None:
    """Llama-3 8B: 6N (N the matmul parameters: every layer plus the output layer, the input
    embedding being a lookup) + 6 s h L per token, which is what Megatron-Bridge counts: its
    H100 row reports 744 model TFLOP/s at 14,451 tokens/s/GPU (docs/performance-summary.md)."""
    L, h, f, kv, V, s = 32, 4096, 14336, 8 * 128, 128256, 8192
    n = L * (h * (h + 2 * kv) + h * h + 3 * h * f) + V * h
    assert n == pytest.approx(7.50e9, rel=0.01)
    flops = token_flops(workload_of(_cfg()))
    assert flops.model == pytest.approx(6 * n + 6 * s * h * L, rel=1e-12)
    assert 14451 * flops.model / 1e12 == pytest.approx(744, rel=0.005)


def test_recompute_adds_forward_flops_not_model_flops() -> None:
    base, full = (
        predict_step(_cfg(), "h100"),
        predict_step(_cfg(recompute_granularity="full"), "h100"),
    )
    assert full.model_flops_per_step == base.model_flops_per_step
    # a whole extra forward: 4/3 of the layers' compute (the output layer is not recomputed)
    ratio = full.breakdown["compute"] / base.breakdown["compute"]
    assert 1.25 < ratio < 4 / 3
    selective = predict_step(_cfg(recompute_granularity="selective"), "h100")
    assert base.breakdown["compute"] < selective.breakdown["compute"] < full.breakdown["compute"]


def test_pipeline_bubble_is_p_minus_1_over_v_m() -> None:
    for vpp, m in ((1, 16), (2, 16), (1, 64)):
        values = dict(
            pipeline_model_parallel_size=4,
            data_parallel_size=2,
            num_microbatches=m,
            global_batch_size=2 * m,
            virtual_pipeline_model_parallel_size=vpp,
        )
        p = predict_step(_cfg(**values), "h100").breakdown
        pipelined = p["compute"] + p["tp"] + p["cp"] + p["ep"]
        assert p["bubble"] == pytest.approx(3 / (vpp * m) * pipelined, rel=1e-12)


def test_tensor_parallel_volume_is_8_ring_passes_of_the_activation_per_layer() -> None:
    """TP 8 with sequence parallelism: 2 all-gathers + 2 reduce-scatters forward and the same
    backward per layer, each (t-1)/t of the (s b h) bf16 activation, over NVLink at one
    direction's 450 GB/s times NCCL's bus efficiency."""
    w = workload_of(
        _cfg(tensor_model_parallel_size=8, data_parallel_size=1, sequence_parallel=True)
    )
    h100 = part("h100-sxm")
    seconds = communication(w, h100, 0.8).tp
    volume = 16 * 32 * 8 * (7 / 8) * 8192 * 4096 * 2  # micro-batches x layers x passes x bytes
    assert seconds == pytest.approx(volume / (450e9 * 0.8), rel=1e-12)
    # across boards NCCL runs a ring per NIC: 8 members of the group per board bring 8 NICs of
    # 50 GB/s (capped by NVLink); a group with one member per board has one NIC
    w16 = w.model_copy(update={"tp": 16, "world": 16})
    volume16 = 16 * 32 * 8 * (15 / 16) * 8192 * 4096 * 2
    assert communication(w16, h100, 0.8).tp == pytest.approx(volume16 / (400e9 * 0.8), rel=1e-12)
    assert h100.link_bytes_per_s(span=64, stride=8) == 50e9
    assert part("gb200").link_bytes_per_s(span=64, stride=8) == 900e9  # one NVL72 domain


def test_levers_move_their_component() -> None:
    def at(**changes: Any) -> dict[str, float]:
        return predict_step(
            _cfg(tensor_model_parallel_size=4, data_parallel_size=2, **changes), "h100"
        ).breakdown

    assert at(tp_comm_overlap=True)["tp"] < at()["tp"]
    assert at(overlap_grad_reduce=False, overlap_param_gather=False)["dp"] > at()["dp"]
    assert at(fp8="hybrid")["compute"] < at()["compute"]
    assert at(enable_cuda_graph=True)["other"] < at()["other"]


def test_memory_is_the_gates_and_fits_uses_the_parts_capacity() -> None:
    cfg = _cfg()
    memory = predict_memory(cfg)
    assert memory is not None
    on_h100, on_h200 = predict_step(cfg, "h100"), predict_step(cfg, "h200")
    assert on_h100.peak_memory_bytes == memory.total_bytes == on_h200.peak_memory_bytes
    assert on_h200.capacity_bytes is not None and on_h100.capacity_bytes is not None
    assert on_h200.capacity_bytes > on_h100.capacity_bytes
    assert on_h100.fits is not None and "capacity" in on_h100.memory_reason


def test_corrections_multiply_components() -> None:
    p = predict_step(_cfg(), "h100")
    slower = p.corrected({"compute": 2.0})
    assert slower.breakdown["compute"] == 2 * p.breakdown["compute"]
    assert slower.step_time_s == pytest.approx(p.step_time_s + p.breakdown["compute"])
    with pytest.raises(ValueError, match="unknown components"):
        p.corrected({"nccl": 1.1})


def test_every_part_has_a_source_and_every_factor_an_origin() -> None:
    parts = hw_data.load_parts()
    required = {"a100-40gb", "a100-80gb", "h100-sxm", "h200", "b200", "gb200", "l40s"}
    assert required <= set(parts)
    for key, p in parts.items():
        assert p.key == key and ("http" in p.source or p.generation == "cpu"), key
        assert p.fp8_tflops is None or p.fp8_tflops >= p.bf16_tflops
    assert part("sm90").key == "h100-sxm" and part("NVIDIA H200").key == "h200"
    factors = hw_data.load_factors().factors
    assert all(f.origin and f.about for f in factors.values())
    # every factor is read by the model: by name, or by a name it builds from a prefix
    step = (ROOT / "perfmodel" / "step.py").read_text()
    built = ("gemm_efficiency_", "fp8_speedup_", "elementwise_overhead_")
    for name in factors:
        assert f'"{name}"' in step or name.startswith(built), name


def test_a_part_without_a_field_is_refused_naming_the_file(tmp_path: Path) -> None:
    data = yaml.safe_load((hw_data.HARDWARE_DIR / "parts.yaml").read_text())
    del data["parts"]["h100-sxm"]["hbm_gbps"]
    (tmp_path / "parts.yaml").write_text(yaml.safe_dump(data))
    with pytest.raises(AttuneError, match=r"parts\.yaml: parts\.h100-sxm\.hbm_gbps"):
        hw_data.load_parts(tmp_path)
    with pytest.raises(AttuneError, match="unknown hardware 'tpu-v5'"):
        part("tpu-v5")


def test_unknown_torchtitan_flavor_is_a_clear_error() -> None:
    cfg = EffectiveConfig(
        framework="torchtitan",
        framework_version="0.3.0",
        values={"module": "llama4", "model_spec.flavor": "17bx16e"},
        devices=8,
    )
    with pytest.raises(AttuneError, match="no dimensions for torchtitan llama4 flavor '17bx16e'"):
        predict_step(cfg, "h100")


def _bench() -> Any:
    spec = importlib.util.spec_from_file_location(
        "perf_bench", ROOT / "benchmarks" / "perf_model.py"
    )
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_published_data_is_cited_and_the_model_meets_its_targets_on_held_out_rows() -> None:
    bench = _bench()
    data = yaml.safe_load(bench.DATA.read_text())
    rows = data["rows"]
    assert len(rows) >= 60 and len({r["source"] for r in rows}) >= 3
    assert len({part(r["hardware"]).generation for r in rows}) >= 2
    for r in rows:
        assert r["repository"] and r["path"] and len(r["commit"]) == 40 and r["table"], r["id"]
    assert {r["split"] for r in rows} == {"calibrate", "report"}
    out = bench.evaluate(rows, data["pairs"])
    report = out["stats"]["split report"]
    assert report["median"] <= 0.15 and report["p90"] <= 0.30, report
    assert out["direction"] >= 0.85 and out["pairs_counted"] >= 10


def test_components_are_the_breakdowns_keys() -> None:
    w = workload_of(_cfg())
    assert tuple(predict_workload(w, part("b200")).breakdown) == COMPONENTS
    assert _f("comm_efficiency") > 0
