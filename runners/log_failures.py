"""Why a GPU training run failed, from the lines of its log (Megatron-LM, torchtitan, torchrun).

Precedence, root cause before symptom: ``oom`` > ``nan`` > ``comm_timeout`` > ``rank_died``.
A rank that runs out of memory or trips a NaN check raises; its peers then wait in their next
collective until the NCCL watchdog fires, and torchrun reports the dead rank last. So a log
holding several of these is classified by the first category in that order that matches, and
within a category by its first pattern (the most informative) on the earliest line it matches.

The strings, and where they come from:

- ``oom``: ``CUDA out of memory. Tried to allocate ...`` raised as ``torch.OutOfMemoryError``
  (``torch.cuda.OutOfMemoryError`` before torch 2.5) by ``c10/cuda/CUDACachingAllocator.cpp``
  (``DeviceCachingAllocator::malloc``); ``CUDA error: out of memory`` (a CUDA API call) and
  NCCL's ``Cuda failure 'out of memory'``; host memory: ``[Errno 12] Cannot allocate memory``.
- ``nan``: Megatron-LM's result validation (``megatron/core/rerun_state_machine.py:531`` and
  ``:605-611`` at core_v0.19.0) quoting ``found NaN in local forward loss calculation``
  (``pretrain_gpt.py:254``), ``found Inf ...`` (``:261``), ``found NaN in local grad norm for
  bucket #i ...`` (``megatron/core/distributed/param_and_grad_buffer.py:352``, Inf at ``:360``);
  Megatron-FSDP's ``Detected NaN or Inf in wgrad``
  (``megatron/core/distributed/fsdp/src/megatron_fsdp/param_and_grad_buffer.py:4765``);
  torchtitan's ``Loss is not finite (global_avg_loss=nan) at step N`` (``torchtitan/trainer.py:
  996`` in 0.3.0). Megatron's ``Spiky loss`` check is not fatal and is not a NaN.
- ``comm_timeout``: ``torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp``:
  ``Watchdog caught collective operation timeout: WorkNCCL(...) ran for N milliseconds before
  timing out.`` (``WorkNCCL::checkTimeout``), ``Work WorkNCCL(...) timed out in blocking wait``
  (``TORCH_NCCL_BLOCKING_WAIT=1``), and the heartbeat monitor's ``Heartbeat monitor timed
  out!`` / ``ProcessGroupNCCL's watchdog got stuck for N seconds`` (the watchdog itself hung in
  a NCCL or CUDA call).
- ``rank_died``: torchrun's report (``torch/distributed/elastic/multiprocessing/errors/
  __init__.py``: ``Signal N (SIGNAME) received by PID N`` at 141-143 in torch 2.13, the
  ``exitcode  : N (pid: N)`` field of ``_FAILURE_FORMAT_TEMPLATE`` at 184-190, the
  ``ChildFailedError`` exception), its agent's ``failed (exitcode: N) local_rank: N (pid: N)
  of binary: ...`` (``torch/distributed/elastic/multiprocessing/api.py:1003``), and
  ``torch.multiprocessing.spawn``'s ``process N terminated with signal SIGNAME`` /
  ``... with exit code N`` (``torch/multiprocessing/spawn.py:193,201``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from pydantic import BaseModel, ConfigDict

from gate.models import TrialStatus

_ANSI = re.compile(r"\x1b\[[0-9;]*m")

PRECEDENCE: tuple[tuple[TrialStatus, tuple[re.Pattern[str], ...]], ...] = (
    (
        "oom",
        (
            re.compile(r"CUDA out of memory"),
            re.compile(r"CUDA error: out of memory|Cuda failure 'out of memory'"),
            re.compile(r"\btorch\.(?:cuda\.)?OutOfMemoryError\b"),
            re.compile(r"\[Errno 12\] Cannot allocate memory"),
        ),
    ),
    (
        "nan",
        (
            re.compile(r"found (?:NaN|Inf) in local (?:forward loss calculation|grad norm)"),
            re.compile(r"Detected NaN or Inf in wgrad"),
            re.compile(r"Loss is not finite \(global_avg_loss="),
        ),
    ),
    (
        "comm_timeout",
        (
            re.compile(r"Watchdog caught collective operation timeout"),
            re.compile(r"\bWork WorkNCCL\(.*\) timed out in blocking wait"),
            re.compile(r"Heartbeat monitor timed out|watchdog got stuck for \d+ seconds"),
        ),
    ),
    (
        "rank_died",
        (
            re.compile(r"Signal \d+ \(SIG[A-Z0-9]+\) received by PID \d+"),
            re.compile(r"failed \(exitcode: -?\d+\) local_rank: \d+ \(pid: \d+\)"),
            re.compile(r"process \d+ terminated with (?:signal SIG[A-Z0-9]+|exit code -?\d+)"),
            re.compile(r"multiprocessing\.errors\.ChildFailedError\b"),
            re.compile(r"^\s*exitcode\s*:\s*-?\d+ \(pid: \d+\)"),
        ),
    ),
)
"""Each status with its patterns, in precedence order (see the module docstring)."""

MAX_MESSAGE = 1000
"""Longest quoted line (an NCCL timeout line can hold a whole desync report)."""


class LogFailure(BaseModel):
    """The failure a log shows: its status and the decisive line, quoted."""

    model_config = ConfigDict(frozen=True)

    status: TrialStatus
    message: str
    """The log line that decided the status, stripped of colour codes and surrounding space
    (cut to ``MAX_MESSAGE`` characters)."""


def detect_failure(lines: Iterable[str], returncode: int | None) -> LogFailure | None:
    """The most specific failure the log shows, or None.

    A run that exited 0 did not fail, whatever its log says (an OOM a framework caught and
    retried, a non-fatal check): None. Otherwise (``returncode`` None when the exit status is
    unknown) the lines are searched by ``PRECEDENCE``; None when nothing matches, which leaves
    the status to the caller (a hang, a timeout, a plain failure).
    """
    if returncode == 0:
        return None
    text = [_ANSI.sub("", line).strip() for line in lines]
    for status, patterns in PRECEDENCE:
        for pattern in patterns:
            for line in text:
                if pattern.search(line):
                    return LogFailure(status=status, message=line[:MAX_MESSAGE])
    return None
