"""The workload's config validation: derived values and impossible values."""

from __future__ import annotations

import pytest

from runners.embedded.config import expert_capacity, validate_and_derive


def test_global_batch_derived_from_micro_batch_and_data_parallel_size() -> None:
    cfg = validate_and_derive({"micro_batch_size": 4, "data_parallel_size": 2}, {})
    assert cfg.global_batch_size == 8
    assert cfg.grad_accum_steps == 1


def test_pinned_global_batch_sets_gradient_accumulation() -> None:
    cfg = validate_and_derive({"global_batch_size": 16, "micro_batch_size": 2}, {})
    assert cfg.global_batch_size == 16
    assert cfg.grad_accum_steps == 8


def test_grad_reduce_in_bf16_lowers_accumulation_dtype() -> None:
    assert validate_and_derive({}, {}).accumulate_grads_in_fp32 is True
    cfg = validate_and_derive({"grad_reduce_in_bf16": True}, {})
    assert cfg.accumulate_grads_in_fp32 is False


def test_fast_moe_dispatch_sets_a_capacity_factor() -> None:
    assert validate_and_derive({"moe_num_experts": 4}, {}).moe_capacity_factor is None
    cfg = validate_and_derive({"moe_num_experts": 4, "moe_fast_dispatch": True}, {})
    assert cfg.moe_capacity_factor == 1.0
    pinned = {"moe_num_experts": 4, "moe_fast_dispatch": True, "moe_capacity_factor": 2.0}
    assert validate_and_derive(pinned, {}).moe_capacity_factor == 2.0


def test_threads_default_from_environment() -> None:
    assert validate_and_derive({}, {}).threads == 1
    assert validate_and_derive({}, {"OMP_NUM_THREADS": "2"}).threads == 2
    assert validate_and_derive({"threads": 1}, {"OMP_NUM_THREADS": "2"}).threads == 1


@pytest.mark.parametrize(
    ("raw", "env", "key"),
    [
        ({"global_batch_size": 10, "micro_batch_size": 4}, {}, "micro_batch_size"),
        ({"global_batch_size": 6, "micro_batch_size": 1, "data_parallel_size": 4}, {}, "micro"),
        ({"d_model": 100, "n_head": 3}, {}, "n_head"),
        ({"moe_num_experts": 2, "moe_top_k": 3}, {}, "moe_top_k"),
        ({"moe_fast_dispatch": True}, {}, "moe_fast_dispatch"),
        ({"grad_accum_steps": 2}, {}, "grad_accum_steps"),
        ({}, {"OMP_NUM_THREADS": "many"}, "env.OMP_NUM_THREADS"),
    ],
)
def test_impossible_values_name_the_key(
    raw: dict[str, object], env: dict[str, str], key: str
) -> None:
    with pytest.raises(ValueError, match=rf"^{key}"):
        validate_and_derive(raw, env)


def test_expert_capacity_is_per_micro_batch() -> None:
    cfg = validate_and_derive(
        {"moe_num_experts": 4, "moe_top_k": 2, "moe_capacity_factor": 1.0}, {}
    )
    assert expert_capacity(64, cfg) == 32  # 64 tokens x 2 / 4 experts
    assert expert_capacity(128, cfg) == 64
    dropless = validate_and_derive({"moe_num_experts": 4}, {})
    assert expert_capacity(64, dropless) is None
