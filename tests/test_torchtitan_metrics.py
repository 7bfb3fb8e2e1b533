"""parse_torchtitan_log on the committed torchtitan logs (tests/fixtures/logs/SOURCES.md)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from gate.models import StepRecord
from runners.torchtitan.metrics import parse_torchtitan_log

LOGS = Path(__file__).parent / "fixtures" / "logs" / "torchtitan"


def gib(value: float) -> int:
    return round(value * 1024**3)


def parse(name: str, tokens_per_step: int, devices: int) -> list[StepRecord]:
    lines = (LOGS / name).read_text().splitlines()
    return parse_torchtitan_log(lines, tokens_per_step=tokens_per_step, devices=devices)


def rec(
    step: int,
    loss: float,
    grad_norm: float | None,
    tokens: int,
    seconds: float,
    peak_gib: float,
    tflops: float,
    tps: float,
) -> StepRecord:
    return StepRecord(
        step=step,
        loss=loss,
        grad_norm=grad_norm,
        tokens=tokens,
        step_seconds=seconds,
        peak_memory_bytes=gib(peak_gib),
        skipped=False,
        nan_iterations=0,
        framework_tflops=tflops,
        framework_tokens_per_second=tps,
    )


def assert_records(actual: list[StepRecord], expected: list[StepRecord]) -> None:
    """Every field of every record; floats to 1e-9 relative (timestamp differences)."""
    assert [r.step for r in actual] == [r.step for r in expected]
    for got, want in zip(actual, expected, strict=True):
        for field in StepRecord.model_fields:
            g, w = getattr(got, field), getattr(want, field)
            if isinstance(w, float):
                assert isinstance(g, float), f"step {want.step} {field}: {g!r}"
                assert math.isclose(g, w, rel_tol=1e-9), f"step {want.step} {field}: {g} != {w}"
            else:
                assert g == w and type(g) is type(w), f"step {want.step} {field}: {g!r} != {w!r}"


def test_healthy_single_node_with_colour() -> None:
    """Step 1 from tps (no earlier line); step 6 timed from the ``validate step:`` line, where
    torchtitan restarts its own timer; memory peaks at 52.19 GiB and stays there."""
    n = 65536
    assert_records(
        parse("healthy_single_node.log", n, 8),
        [
            rec(1, 12.26540, 4.1580, n, n / 8 / 830, 38.42, 45.63, 830.0),
            rec(2, 12.03112, 5.0217, n, 1.102, 52.17, 408.86, 7434.0),
            rec(3, 11.20871, 9.8842, n, 1.098, 52.19, 410.35, 7461.0),
            rec(4, 10.31002, 7.1215, n, 1.101, 52.19, 409.23, 7441.0),
            rec(5, 9.55719, 4.3306, n, 1.099, 52.19, 409.97, 7454.0),
            rec(6, 9.01338, 3.0112, n, 1.100, 52.19, 409.60, 7447.0),
            rec(7, 8.70526, 2.4478, n, 1.097, 52.19, 410.72, 7468.0),
            rec(8, 8.49170, 2.1902, n, 1.103, 52.19, 408.49, 7427.0),
        ],
    )


def test_healthy_multi_node_uses_rank_0_of_interleaved_ranks() -> None:
    """Rank 8's lines (other memory, tps and clock) are ignored, whichever comes first."""
    n = 131072
    assert_records(
        parse("healthy_multi_node.log", n, 16),
        [
            rec(1, 12.24118, 3.9917, n, n / 16 / 576, 41.06, 15.85, 576.0),
            rec(2, 12.01480, 4.8821, n, 1.251, 58.77, 180.08, 6548.0),
            rec(3, 11.17305, 9.6120, n, 1.249, 58.80, 180.37, 6559.0),
            rec(4, 10.28614, 6.9963, n, 1.252, 58.80, 179.94, 6543.0),
            rec(5, 9.53377, 4.2589, n, 1.248, 58.80, 180.51, 6564.0),
            rec(6, 8.99072, 2.9548, n, 1.250, 58.80, 180.22, 6554.0),
        ],
    )


def test_unprefixed_ranks_count_each_step_once() -> None:
    n = 32768
    assert_records(
        parse("unprefixed_ranks.log", n, 4),
        [
            rec(1, 12.27114, 4.0102, n, n / 4 / 1060, 36.02, 58.28, 1060.0),
            rec(2, 12.04431, 4.9913, n, 1.094, 49.88, 411.85, 7488.0),
            rec(3, 11.21590, 9.7702, n, 1.096, 49.91, 411.09, 7474.0),
        ],
    )


def test_oom_keeps_the_steps_before_it() -> None:
    n = 131072
    assert_records(
        parse("oom.log", n, 8),
        [
            rec(1, 12.25807, 4.0731, n, n / 8 / 1462, 61.88, 80.43, 1462.0),
            rec(2, 12.02245, 4.9519, n, 2.073, 76.94, 434.69, 7904.0),
        ],
    )


def test_nan_keeps_the_finite_steps_before_the_stop() -> None:
    n = 65536
    assert_records(
        parse("nan.log", n, 8),
        [
            rec(1, 12.26113, 4.1702, n, n / 8 / 827, 38.42, 45.50, 827.0),
            rec(2, 11.90472, 38.5521, n, 1.099, 52.17, 409.97, 7454.0),
            rec(3, 13.87710, 912.4409, n, 1.101, 52.19, 409.23, 7441.0),
            rec(4, 27.30155, 18870.1230, n, 1.100, 52.19, 409.60, 7447.0),
        ],
    )


def test_hang_returns_the_steps_so_far_and_ignores_the_torn_line() -> None:
    n = 65536
    assert_records(
        parse("hang.log", n, 8),
        [
            rec(1, 12.26021, 4.1493, n, n / 8 / 830, 38.42, 45.67, 830.0),
            rec(2, 12.02977, 5.0339, n, 1.103, 52.17, 408.49, 7427.0),
            rec(3, 11.20513, 9.8730, n, 1.099, 52.19, 409.97, 7454.0),
            rec(4, 10.30766, 7.1188, n, 1.100, 52.19, 409.60, 7447.0),
            rec(5, 9.55602, 4.3341, n, 1.102, 52.19, 408.86, 7434.0),
            rec(6, 9.01410, 3.0006, n, 1.098, 52.19, 410.35, 7461.0),
        ],
    )


def step(prefix: str, clock: str, n: int, tps: str = "7,000", extra: str = "") -> str:
    return (
        f"{prefix}[titan] 2025-06-01 {clock} - root - INFO - step: {n:2}  loss:  5.00000  "
        f"{extra}memory: 10.00GiB(12.64%)  tps: {tps}  tflops: 1,234.50  mfu: N/A"
    )


def test_log_freq_divides_the_interval_by_the_steps_in_it() -> None:
    lines = [
        step("", "12:00:10,000", 1, tps="1,000", extra="grad_norm:  1.0000  "),
        step("", "12:00:19,000", 10, extra="grad_norm:  1.0000  "),
        step("", "12:00:29,500", 20, extra="grad_norm:     nan  "),
    ]
    records = parse_torchtitan_log(lines, tokens_per_step=8000, devices=2)
    assert [r.step_seconds for r in records] == [4.0, 1.0, 1.05]
    assert records[2].grad_norm is not None and math.isnan(records[2].grad_norm)
    assert records[0].framework_tflops == 1234.5


def test_without_rank_0_the_lowest_rank_is_used() -> None:
    lines = [
        step("[rank5]:", "12:00:01,000", 1, tps="9,999"),
        step("[rank3]:", "12:00:01,500", 1),
        step("[rank3]:", "12:00:02,700", 2),
        step("[rank5]:", "12:00:02,000", 2),
    ]
    records = parse_torchtitan_log(lines, tokens_per_step=7000, devices=1)
    assert [(r.step, r.step_seconds, r.grad_norm) for r in records] == [
        (1, 1.0, None),
        (2, 1.2, None),
    ]


def test_same_local_rank_on_two_nodes_counts_each_step_once() -> None:
    lines = [
        step("0: [rank0]:", "12:00:01,000", 1),
        step("1: [rank0]:", "12:00:01,004", 1),
        step("1: [rank0]:", "12:00:02,001", 2),
        step("0: [rank0]:", "12:00:02,000", 2),
    ]
    records = parse_torchtitan_log(lines, tokens_per_step=7000, devices=1)
    assert [(r.step, r.step_seconds) for r in records] == [(1, 1.0), (2, 1.001)]


def test_arguments_must_be_positive() -> None:
    with pytest.raises(ValueError, match="tokens_per_step"):
        parse_torchtitan_log([], tokens_per_step=0, devices=1)
    with pytest.raises(ValueError, match="devices"):
        parse_torchtitan_log([], tokens_per_step=1, devices=0)
