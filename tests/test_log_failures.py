"""detect_failure on the committed logs and on its precedence (tests/fixtures/logs/SOURCES.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gate.models import TrialStatus
from runners.log_failures import MAX_MESSAGE, PRECEDENCE, LogFailure, detect_failure

LOGS = Path(__file__).parent / "fixtures" / "logs"

OOM = (
    "[rank0]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 3.91 GiB. GPU 0 has a "
    "total capacity of 79.11 GiB of which 2.87 GiB is free."
)
NAN = (
    "ERROR:megatron.core.rerun_state_machine:Unexpected result nan on rank 3 at iteration #5 "
    "invocation #1 (message='found NaN in local grad norm for bucket #0 in backward pass before "
    "data-parallel communication collective')"
)
TIMEOUT = (
    "[rank2]:[E606 10:15:05.118427361 ProcessGroupNCCL.cpp:629] [Rank 2] Watchdog caught "
    "collective operation timeout: WorkNCCL(SeqNum=2841, OpType=ALLREDUCE, NumelIn=1, NumelOut=1,"
    " Timeout(ms)=600000) ran for 600011 milliseconds before timing out."
)
DIED = "  traceback : Signal 9 (SIGKILL) received by PID 40217"


def lines(name: str) -> list[str]:
    return (LOGS / name).read_text().splitlines()


@pytest.mark.parametrize(
    ("name", "status", "message"),
    [
        ("megatron/nan_rerun.log", "nan", NAN),
        ("megatron/nccl_timeout.log", "comm_timeout", TIMEOUT),
        ("megatron/rank_died.log", "rank_died", DIED.strip()),
        (
            "torchtitan/nan.log",
            "nan",
            "[rank0]: RuntimeError: Loss is not finite (global_avg_loss=nan) at step 5. "
            "Stopping training.",
        ),
    ],
)
def test_failed_logs(name: str, status: TrialStatus, message: str) -> None:
    assert detect_failure(lines(name), 1) == LogFailure(status=status, message=message)


def test_oom_quotes_the_allocator_line() -> None:
    failure = detect_failure(lines("torchtitan/oom.log"), 1)
    assert failure is not None
    assert failure.status == "oom"
    assert failure.message.startswith(OOM)
    assert failure.message.endswith(
        "See documentation for Memory Management  (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)"
    )


@pytest.mark.parametrize(
    "name",
    [
        "megatron/healthy_single_node.log",
        "megatron/healthy_multi_node.log",
        "megatron/fp16_skipped.log",
        "megatron/nan_unchecked.log",
        "megatron/hang.log",
        "torchtitan/healthy_single_node.log",
        "torchtitan/healthy_multi_node.log",
        "torchtitan/unprefixed_ranks.log",
        "torchtitan/hang.log",
    ],
)
@pytest.mark.parametrize("returncode", [None, 1, -9, -15])
def test_nothing_recognised_leaves_the_status_to_the_caller(
    name: str, returncode: int | None
) -> None:
    """A hang (no more lines), a killed or a NaN-without-checks run: no decisive line."""
    assert detect_failure(lines(name), returncode) is None


@pytest.mark.parametrize("name", ["megatron/nan_rerun.log", "torchtitan/oom.log"])
def test_a_run_that_exited_0_did_not_fail(name: str) -> None:
    assert detect_failure(lines(name), 0) is None


def test_an_unknown_exit_status_still_reads_the_log() -> None:
    failure = detect_failure(lines("megatron/nccl_timeout.log"), None)
    assert failure == LogFailure(status="comm_timeout", message=TIMEOUT)


def test_precedence_is_documented_order() -> None:
    assert [status for status, _ in PRECEDENCE] == ["oom", "nan", "comm_timeout", "rank_died"]


@pytest.mark.parametrize(
    ("log", "status"),
    [
        ([DIED, TIMEOUT, NAN, OOM], "oom"),
        ([OOM, NAN, TIMEOUT, DIED], "oom"),
        ([DIED, TIMEOUT, NAN], "nan"),
        ([TIMEOUT, NAN], "nan"),
        ([DIED, TIMEOUT], "comm_timeout"),
        ([TIMEOUT, DIED], "comm_timeout"),
        ([DIED], "rank_died"),
    ],
)
def test_root_cause_wins_over_its_symptoms_in_any_order(
    log: list[str], status: TrialStatus
) -> None:
    failure = detect_failure(log, 1)
    assert failure is not None
    assert failure.status == status


def test_the_first_line_of_the_most_informative_pattern_is_quoted() -> None:
    log = [
        "    raise ChildFailedError(",
        "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ",
        "E0314 22:08:42.110000 40150 site-packages/torch/distributed/elastic/multiprocessing/"
        "api.py:869] failed (exitcode: -9) local_rank: 5 (pid: 40217) of binary: /usr/bin/python3",
        "  exitcode  : -9 (pid: 40217)",
        DIED,
        "  traceback : Signal 9 (SIGKILL) received by PID 40218",
    ]
    assert detect_failure(log, 1) == LogFailure(status="rank_died", message=DIED.strip())
    assert detect_failure(log[:4], 1) == LogFailure(status="rank_died", message=log[2])
    assert detect_failure(log[:2], 1) == LogFailure(status="rank_died", message=log[1].strip())


@pytest.mark.parametrize(
    ("line", "status"),
    [
        ("RuntimeError: CUDA error: out of memory", "oom"),
        ("torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB", "oom"),
        ("node01:1234:1240 [0] NCCL WARN Cuda failure 'out of memory'", "oom"),
        ("OSError: [Errno 12] Cannot allocate memory", "oom"),
        (
            "RuntimeError: Rank 0, node n1, device 0, iteration 7: Unexpected result "
            "tensor(nan, device='cuda:0') (message='found NaN in local forward loss calculation')",
            "nan",
        ),
        ("found Inf in local forward loss calculation", "nan"),
        ("[Megatron-FSDP](check_for_nan_in_grad=True) Detected NaN or Inf in wgrad: ...", "nan"),
        (
            "[rank6]:[E429 13:55:49.384372190 ProcessGroupNCCL.cpp:1743] [PG ID 0 PG GUID "
            "0(default_pg) Rank 6] ProcessGroupNCCL's watchdog got stuck for 480 seconds without "
            "making progress in monitoring enqueued collectives.",
            "comm_timeout",
        ),
        (
            "[PG ID 0 PG GUID 0(default_pg) Rank 1] Heartbeat monitor timed out! Process will be "
            "terminated after dumping debug info. workMetaList_.size()=2",
            "comm_timeout",
        ),
        (
            "[PG ID 0 PG GUID 0(default_pg) Rank 0] Work WorkNCCL(SeqNum=9, OpType=BROADCAST, "
            "NumelIn=4, NumelOut=4, Timeout(ms)=60000) timed out in blocking wait.",
            "comm_timeout",
        ),
        (
            "torch.multiprocessing.spawn.ProcessExitedException: process 1 terminated with signal "
            "SIGKILL",
            "rank_died",
        ),
    ],
)
def test_other_real_strings(line: str, status: TrialStatus) -> None:
    failure = detect_failure(["noise", line], None)
    assert failure == LogFailure(status=status, message=line)


def test_non_fatal_lines_are_not_failures() -> None:
    log = [
        "WARNING:megatron.core.rerun_state_machine:Rank 0, node n1, device 0, iteration #9: "
        "Unexpected result 11.2 (message='Spiky loss')",
        "[rank0]:[titan] 2025-06-01 12:00:00,000 - root - WARNING - 1 CUDA OOM errors thrown.",
        "[rank0]:[E601 12:00:00.000 ProcessGroupNCCL.cpp:681] [Rank 0] Some NCCL operations have "
        "failed or timed out. Due to the asynchronous nature of CUDA kernels, subsequent GPU "
        "operations might run on corrupted/incomplete data.",
    ]
    assert detect_failure(log, 1) is None


def test_message_drops_colour_codes_and_is_bounded() -> None:
    coloured = "\x1b[31m[rank0]: torch.OutOfMemoryError: CUDA out of memory." + "x" * 2000
    failure = detect_failure([coloured], 1)
    assert failure is not None
    assert failure.message.startswith("[rank0]: torch.OutOfMemoryError")
    assert "\x1b" not in failure.message
    assert len(failure.message) == MAX_MESSAGE


def test_lines_may_be_a_generator() -> None:
    assert detect_failure((line for line in [TIMEOUT]), 1) == LogFailure(
        status="comm_timeout", message=TIMEOUT
    )
