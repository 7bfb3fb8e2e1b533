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


OOM_TEXT = re.compile(
    r"out of memory|can't allocate memory|MemoryError|Cannot allocate memory", re.IGNORECASE
)
"""Out-of-memory wording in a backend's reason or a log's tail (a plainer net than ``oom``'s
patterns, for output no framework formatted)."""


class RunEnd(BaseModel):
    """How a launch ended, as its backend saw it."""

    returncode: int | None = None
    """The launch's exit status (None: unknown, as for a log read on its own: the log decides)."""
    timed_out: bool = False
    """Killed at the wall-clock limit."""
    hung: bool = False
    """Killed after too long without output."""
    backend_failure: str | None = None
    """The backend ended it (cancelled, a node failed, preempted): its reason."""


def run_status(
    end: RunEnd,
    *,
    steps_logged: int,
    steps_wanted: int,
    nonfinite: bool,
    lines: list[str],
    tail: str = "",
) -> tuple[TrialStatus, str | None]:
    """A finished launch's status and error text: the one decision a campaign, ``attune bench``
    and ``attune log parse`` make from a launch's end, its step records and its log.

    A non-finite loss or gradient norm in any step record makes the run ``nan`` whatever came
    after it (the framework may stop with an error, exit 0 early, hang or be killed), except
    when the log shows an out-of-memory failure, the root cause that ``PRECEDENCE`` puts first.
    Then: the wall-clock limit, a hang, the backend's own failure, what the log says of a failed
    exit (``detect_failure``), missing steps, ok.
    """
    found = detect_failure(lines, end.returncode) if end.returncode != 0 else None
    if nonfinite and not (found is not None and found.status == "oom"):
        first = f"{found.message}\n" if found is not None and found.status == "nan" else ""
        return "nan", f"{first}NaN/Inf loss or gradient norm ({steps_logged} steps logged)"
    if end.timed_out:
        return "timeout", f"killed after the wall-clock limit ({steps_logged} steps logged)"
    if end.hung:
        return "hang", f"killed: no output for too long after {steps_logged} steps\n{tail}"
    if end.backend_failure:
        status: TrialStatus = "oom" if OOM_TEXT.search(end.backend_failure) else "failed"
        return status, f"{end.backend_failure} ({steps_logged} steps logged)\n{tail}".strip()
    if found is not None:  # the decisive line first, then the rest of the tail
        rest = [line for line in tail.splitlines() if line.strip() != found.message]
        return found.status, "\n".join([found.message, *rest])
    if end.returncode is not None and end.returncode != 0:
        # SIGKILL with no timeout is what the kernel's OOM killer sends
        if OOM_TEXT.search(tail) or end.returncode == -9:
            return "oom", tail or "killed by SIGKILL (out of memory?)"
        return "failed", f"exit status {end.returncode}\n{tail}".strip()
    if steps_logged < steps_wanted:
        how = "exited 0" if end.returncode == 0 else "the log ends"
        return "failed", f"{how} after {steps_logged} of {steps_wanted} steps\n{tail}"
    return "ok", None
