"""``attune log parse``: read a training run's log the way a campaign reads it.

The same functions a campaign's ``runners.bench.collect`` calls: the framework adapter's step
parser (``parse_metrics``), ``runners.log_failures.run_status`` for the status and the line
that decided it, ``gate.throughput.tokens_per_second_per_device`` for the score. A run folder
that holds the supervisor's ``exit.json`` beside the log gives the exit status, the wall-clock
kill and the hang kill; otherwise ``--exit-code`` / ``--ended`` say them, and with neither the
log alone decides (a log that shows no failure and has its steps is ``ok``).
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Literal

from pydantic import BaseModel

from bot.console import console
from gate.errors import AttuneError
from gate.models import StepRecord, TrialStatus
from gate.throughput import tokens_per_second_per_device
from runners.adapters import get_adapter
from runners.log_failures import RunEnd, run_status
from runners.supervise import EXIT_FILE

Framework = Literal["megatron", "torchtitan"]


class LogReading(BaseModel):
    """What a campaign learns from one run's log."""

    framework: Framework
    status: TrialStatus
    steps_parsed: int
    step1_loss: float | None
    step1_grad_norm: float | None
    tokens_per_second_per_device: float | None
    """Over the steps after the warm-up; None when none is scored or the run did not end ok."""
    peak_memory_bytes: int
    decided_by: str | None
    """The status's reason: the log line that decided a failure, or what was missing."""


def _context(
    framework: Framework,
    *,
    world_size: int,
    seq_length: int | None,
    global_batch_size: int | None,
    pipeline_parallel: int,
) -> dict[str, int]:
    if framework == "megatron":
        if seq_length is None:
            raise AttuneError("--seq-length is needed to count a Megatron-LM step's tokens")
        return {"seq_length": seq_length}
    if seq_length is None or global_batch_size is None:
        raise AttuneError(
            "--seq-length and --global-batch-size are needed to count a torchtitan step's tokens"
        )
    return {
        "tokens_per_step": seq_length * global_batch_size,
        "devices": world_size,
        "pipeline_parallel": pipeline_parallel,
    }


def _end(log: Path, exit_code: int | None, ended: str | None) -> RunEnd:
    """How the run ended: the options, else the supervisor's ``exit.json`` beside the log."""
    record = log.parent / EXIT_FILE
    if exit_code is None and ended is None and record.is_file():
        try:
            data = json.loads(record.read_text())
            return RunEnd(
                returncode=data.get("returncode"),
                timed_out=bool(data.get("timed_out")),
                hung=bool(data.get("hung")),
            )
        except (ValueError, TypeError) as exc:
            raise AttuneError(f"unreadable: {exc}", path=str(record)) from None
    return RunEnd(returncode=exit_code, timed_out=ended == "timeout", hung=ended == "hang")


def read_log(
    log: Path,
    *,
    framework: Framework,
    world_size: int = 1,
    seq_length: int | None = None,
    global_batch_size: int | None = None,
    pipeline_parallel: int = 1,
    steps: int | None = None,
    warmup: int = 0,
    exit_code: int | None = None,
    ended: str | None = None,
) -> LogReading:
    """Read ``log`` as the campaign does (see the module docstring)."""
    if world_size < 1 or warmup < 0 or (steps is not None and steps < 1):
        raise AttuneError("--world-size and --steps must be positive, --warmup 0 or more")
    try:
        lines = log.read_text(errors="replace").splitlines(keepends=True)
    except OSError as exc:
        raise AttuneError(f"cannot read the log: {exc.strerror}", path=str(log)) from None
    context = _context(
        framework,
        world_size=world_size,
        seq_length=seq_length,
        global_batch_size=global_batch_size,
        pipeline_parallel=pipeline_parallel,
    )
    logged: list[StepRecord] = get_adapter(framework).parse_metrics(lines, context)
    wanted = steps if steps is not None else len(logged)
    records = [r for r in logged if r.step <= wanted]
    nonfinite = any(not r.finite() for r in logged)
    status, error = run_status(
        _end(log, exit_code, ended),
        steps_logged=len(records),
        steps_wanted=wanted,
        nonfinite=nonfinite,
        lines=lines,
        tail="".join(lines[-12:]).strip(),
    )
    score = None
    if status == "ok":
        try:
            score = tokens_per_second_per_device(records, warmup=warmup, devices=world_size)
        except ValueError:
            score = None
    first = next((r for r in records if r.step == 1), None)
    return LogReading(
        framework=framework,
        status=status,
        steps_parsed=len(logged),
        step1_loss=first.loss if first else None,
        step1_grad_norm=first.grad_norm if first else None,
        tokens_per_second_per_device=score if score is None or math.isfinite(score) else None,
        peak_memory_bytes=max((r.peak_memory_bytes for r in logged), default=0),
        decided_by=error.splitlines()[0] if error else None,
    )


def _number(value: float | None, spec: str = ".4g") -> str:
    return "-" if value is None else format(value, spec)


def print_reading(reading: LogReading, *, as_json: bool) -> None:
    if as_json:
        sys.stdout.write(reading.model_dump_json(indent=2) + "\n")
        return
    gib = reading.peak_memory_bytes / 1024**3
    rows = [
        ("status", reading.status),
        ("steps parsed", str(reading.steps_parsed)),
        ("step-1 loss", _number(reading.step1_loss)),
        ("step-1 grad norm", _number(reading.step1_grad_norm)),
        ("tokens/s/device", _number(reading.tokens_per_second_per_device, ",.0f")),
        ("peak memory", f"{gib:.2f} GiB" if reading.peak_memory_bytes else "-"),
    ]
    if reading.decided_by:
        rows.append(("decided by", reading.decided_by))
    for name, value in rows:
        console.print(f"{name:<17} {value}", markup=False, highlight=False, soft_wrap=True)
