"""parse_megatron_log on the committed Megatron-LM logs (tests/fixtures/logs/SOURCES.md)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from gate.models import StepRecord
from gate.throughput import tokens_per_second_per_device
from runners.megatron.metrics import parse_megatron_log

LOGS = Path(__file__).parent / "fixtures" / "logs" / "megatron"
NAN = math.nan


def mib(value: float) -> int:
    """Megatron's "MB" (1024 * 1024 bytes) as bytes."""
    return round(value * 1024 * 1024)


def parse(name: str, seq_length: int) -> list[StepRecord]:
    return parse_megatron_log((LOGS / name).read_text().splitlines(), seq_length=seq_length)


def rec(
    step: int,
    loss: float | None,
    grad_norm: float | None,
    tokens: int,
    ms: float,
    peak: int,
    tflops: float | None = None,
    skipped: bool = False,
    nan: int = 0,
) -> StepRecord:
    return StepRecord(
        step=step,
        loss=loss,
        grad_norm=grad_norm,
        tokens=tokens,
        step_seconds=ms / 1000,
        peak_memory_bytes=peak,
        skipped=skipped,
        nan_iterations=nan,
        framework_tflops=tflops,
        framework_tokens_per_second=None,
    )


def same(a: object, b: object) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return (math.isnan(a) and math.isnan(b)) or math.isclose(a, b, rel_tol=1e-12)
    return a == b and type(a) is type(b)


def assert_records(actual: list[StepRecord], expected: list[StepRecord]) -> None:
    """Every field of every record, NaN equal to NaN."""
    assert [r.step for r in actual] == [r.step for r in expected]
    for got, want in zip(actual, expected, strict=True):
        for field in StepRecord.model_fields:
            g, w = getattr(got, field), getattr(want, field)
            assert same(g, w), f"step {want.step} {field}: {g!r} != {w!r}"


def test_healthy_single_node() -> None:
    """Memory of rank 0 printed before the iteration line it names, of rank 1 after it."""
    tokens = 64 * 4096
    first = mib(51880.12)
    second = mib(60121.05)
    assert_records(
        parse("healthy_single_node.log", 4096),
        [
            rec(1, 11.03568, 14.982, tokens, 6314.2, first, 125.4),
            rec(2, 11.01945, 15.107, tokens, 3482.9, second, 227.3),
            rec(3, 10.51377, 11.634, tokens, 1842.6, second, 429.7),
            rec(4, 9.874210, 8.902, tokens, 1838.1, second, 430.8),
            rec(5, 9.412038, 6.117, tokens, 1840.4, second, 430.2),
            rec(6, 9.106645, 4.580, tokens, 1839.7, second, 430.4),
        ],
    )


def test_healthy_multi_node_interleaved_ranks() -> None:
    """torchrun prefixes, MoE and num-zeros fields, no --log-throughput; the peak is the largest
    max-allocated of any data-parallel rank 0 (pipeline stage 1's rank 10)."""
    tokens = 32 * 8192
    first = mib(41104.36)
    second = mib(44006.00)
    assert_records(
        parse("healthy_multi_node.log", 8192),
        [
            rec(1, 10.88412, 21.504, tokens, 9718.6, first),
            rec(2, 10.87109, 21.339, tokens, 6055.3, second),
            rec(3, 10.30266, 16.420, tokens, 2391.8, second),
            rec(4, 9.695171, 10.083, tokens, 2388.2, second),
            rec(5, 9.257754, 6.771, tokens, 2390.5, second),
        ],
    )


def test_fp16_skipped_iterations() -> None:
    """No loss for a skipped step (None), not Megatron's printed 0.0 on a later skipped
    one; no grad norm on skipped steps; iteration 2 counts two skips (no reset after the
    first line)."""
    tokens = 32 * 2048
    low, high, last = mib(9877.10), mib(14508.66), mib(14511.92)
    assert_records(
        parse("fp16_skipped.log", 2048),
        [
            rec(1, None, None, tokens, 4012.7, low, 61.2, skipped=True),
            rec(2, None, None, tokens, 2288.4, low, 107.3, skipped=True),
            rec(3, None, None, tokens, 563.1, low, 436.0, skipped=True),
            rec(4, 10.41207, 9.318, tokens, 571.8, high, 429.4),
            rec(5, 10.12966, 7.902, tokens, 566.0, high, 433.8),
            rec(6, 9.803314, 6.225, tokens, 565.2, high, 434.4),
            rec(7, None, None, tokens, 561.9, high, 436.9, skipped=True),
            rec(8, 9.511084, 5.880, tokens, 566.4, last, 433.4),
        ],
    )


def test_nan_rerun_stops_before_the_failed_iteration() -> None:
    """Memory reported around the checkpoint save names iteration 4."""
    tokens = 16 * 4096
    assert_records(
        parse("nan_rerun.log", 4096),
        [
            rec(1, 10.92731, 18.114, tokens, 3120.5, mib(17710.42)),
            rec(2, 10.90285, 18.050, tokens, 1927.4, mib(22117.98)),
            rec(3, 10.21147, 12.372, tokens, 734.9, mib(22117.98)),
            rec(4, 9.560338, 7.716, tokens, 736.2, mib(23840.51)),
        ],
    )


def test_nan_without_checks_is_a_missing_loss_and_a_nan_grad_norm() -> None:
    tokens = 32 * 4096
    first, second = mib(20118.37), mib(23990.05)
    records = parse("nan_unchecked.log", 4096)
    assert_records(
        records,
        [
            rec(1, 10.95503, 17.443, tokens, 2811.0, first, 212.6),
            rec(2, 10.63378, 24.906, tokens, 1766.3, second, 338.4),
            rec(3, 9.877512, 88.213, tokens, 722.4, second, 827.2),
            rec(4, NAN, NAN, tokens, 721.8, second, 827.9),
            rec(5, NAN, NAN, tokens, 720.9, second, 828.9),
        ],
    )
    assert [r.finite() for r in records] == [True, True, True, False, False]


def test_nccl_timeout_log_keeps_the_steps_before_the_hang() -> None:
    tokens = 64 * 4096
    first, second = mib(33410.02), mib(39987.64)
    assert_records(
        parse("nccl_timeout.log", 4096),
        [
            rec(1, 10.97151, 16.337, tokens, 4410.7, first),
            rec(2, 10.95038, 16.281, tokens, 2655.0, second),
            rec(3, 10.37724, 11.945, tokens, 901.2, second),
            rec(4, 9.770013, 8.052, tokens, 899.6, second),
            rec(5, 9.318846, 5.911, tokens, 900.3, second),
            rec(6, 8.995527, 4.367, tokens, 898.8, second),
        ],
    )


def test_rank_died_older_format_without_microseconds() -> None:
    """core_v0.12.0 lines: no microseconds, memory as Python's full float repr."""
    tokens = 64 * 4096
    peak = mib(58410.3408203125)
    assert_records(
        parse("rank_died.log", 4096),
        [
            rec(1, 10.98302, 15.881, tokens, 5127.3, peak, 183.9),
            rec(2, 10.64117, 13.205, tokens, 1003.4, peak, 939.8),
            rec(3, 10.02284, 9.764, tokens, 1001.9, peak, 941.2),
        ],
    )


def test_hang_returns_the_steps_so_far() -> None:
    tokens = 64 * 4096
    first, second = mib(51880.12), mib(60113.87)
    assert_records(
        parse("hang.log", 4096),
        [
            rec(1, 11.03611, 14.977, tokens, 6290.8, first, 125.9),
            rec(2, 11.02037, 15.113, tokens, 4067.2, second, 194.7),
            rec(3, 10.51402, 11.640, tokens, 1841.5, second, 429.9),
            rec(4, 9.874977, 8.899, tokens, 1839.0, second, 430.5),
        ],
    )


@pytest.mark.parametrize(
    ("name", "seq_length", "devices", "warmup", "batch", "elapsed_ms"),
    [
        ("healthy_single_node.log", 4096, 8, 2, 64, [1842.6, 1838.1, 1840.4, 1839.7]),
        ("healthy_multi_node.log", 8192, 16, 1, 32, [6055.3, 2391.8, 2388.2, 2390.5]),
        # iterations 4, 5, 6 and 8: the skipped ones are not scored
        ("fp16_skipped.log", 2048, 4, 0, 32, [571.8, 566.0, 565.2, 566.4]),
    ],
)
def test_score_is_global_batch_times_seq_length_over_elapsed_per_device(
    name: str, seq_length: int, devices: int, warmup: int, batch: int, elapsed_ms: list[float]
) -> None:
    score = tokens_per_second_per_device(parse(name, seq_length), warmup=warmup, devices=devices)
    expected = len(elapsed_ms) * batch * seq_length / (sum(elapsed_ms) / 1000) / devices
    assert score == pytest.approx(expected, rel=1e-12)


LINE = (
    " [2025-06-01 12:00:{s:02d}.000000] iteration {it:8d}/     100 | consumed samples: {c:12d} |"
    " elapsed time per iteration (ms): 1000.0 | learning rate: 1.000000E-05 |"
    " global batch size:     8 | lm loss: 5.000000E+00 | loss scale: 1.0 | grad norm: 1.000 |"
    " number of skipped iterations:   0 | number of nan iterations:   0 |"
)


def line(it: int) -> str:
    return LINE.format(s=it, it=it, c=8 * it)


def memory(it: int, rank: int, max_allocated: float) -> str:
    return (
        f"[Rank {rank}] (after {it} iterations) memory (MB) | allocated: 10.00 | "
        f"max allocated: {max_allocated:.2f} | reserved: 20.00 | max reserved: 20.00"
    )


def test_a_memory_report_applies_to_the_step_it_names_wherever_it_is_printed() -> None:
    records = parse_megatron_log(
        [line(1), line(2), line(3), memory(2, 0, 50.0), memory(1, 1, 70.0), line(4)],
        seq_length=16,
    )
    assert [r.peak_memory_bytes for r in records] == [mib(70.0)] * 4
    records = parse_megatron_log([line(1), line(2), memory(2, 0, 50.0)], seq_length=16)
    assert [r.peak_memory_bytes for r in records] == [0, mib(50.0)]


def test_torn_validation_and_other_lines_are_ignored() -> None:
    torn = line(3)[:150]
    validation = (
        " validation loss at iteration 2 | lm loss value: 4.900000E+00 | lm loss PPL: 1.342E+02 |"
    )
    theoretical = (
        "Theoretical memory footprints: weight and optimizer=10.00 MB, activation=5.00 MB, "
        "total=15.00 MB"
    )
    records = parse_megatron_log([theoretical, line(1), validation, line(2), torn], seq_length=16)
    assert [(r.step, r.tokens, r.step_seconds) for r in records] == [(1, 128, 1.0), (2, 128, 1.0)]


def test_seq_length_must_be_positive() -> None:
    with pytest.raises(ValueError, match="seq_length"):
        parse_megatron_log([line(1)], seq_length=0)
