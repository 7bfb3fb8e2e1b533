"""Step records from a torchtitan training log (the stdout of ``torchtitan.train``).

Format read in torchtitan 0.3.0 (the PyPI wheel ``torchtitan==0.3.0``; the pytorch/torchtitan
snapshot we read has no ``v0.3.0`` tag, and its ``v0.2.2`` has the same line at 462-470):

- ``torchtitan/components/metrics.py:523-532`` (``MetricsProcessor.log``)::

      step: {step:2}  loss: {loss:8.5f}  grad_norm: {grad_norm:7.4f}
      memory: {max_reserved_gib:5.2f}GiB({max_reserved_pct:.2f}%)  tps: {round(tps):,}
      tflops: {tflops:,.2f}  mfu: {mfu:.2f}%            (mfu "N/A" under quantization)

  each field preceded by an ANSI colour code unless ``--metrics.disable_color_printing``
  (``torchtitan/tools/utils.py:262-289``); ``v0.1.0`` had no ``grad_norm`` field.
- ``torchtitan/tools/logging.py:20-22``: the logger's format
  ``[titan] %(asctime)s - %(name)s - %(levelname)s - %(message)s``; ``asctime`` is
  ``YYYY-mm-dd HH:MM:SS,mmm``.
- ``torchtitan/components/metrics.py:474-479``: ``tps`` is this rank's tokens (padding
  included, ``torchtitan/trainer.py:685``) over the seconds since the previous log line,
  divided by the non-data-parallel degree: tokens per second per device.
- ``torchtitan/components/metrics.py:363``: a step is logged when it is step 1 or a multiple
  of ``--metrics.log_freq``; ``memory`` is the peak reserved since the previous log line
  (the peak is reset at metrics.py:537).
- ``torchtitan/components/metrics.py:566-572``: ``validate step:`` lines, which restart the
  timer behind ``tps`` (metrics.py:575).

torchrun ``--tee`` prefixes each line with ``[{role}{rank}]:`` (``[rank0]:`` under
``--role rank``, the local rank unless ``TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE`` says
``${rank}``); without ``--local-ranks-filter`` every rank logs the same step.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import datetime

from gate.models import StepRecord

GIB = 1024**3
"""torchtitan's GiB (``DeviceMemoryMonitor._to_gib``, metrics.py:52-56)."""

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_PREFIX = re.compile(r"^\s*(?:\d+:\s*)?\[(?P<role>[A-Za-z_]*)(?P<rank>\d+)\]:")
"""torchrun's line prefix, after an optional ``srun --label`` prefix (``0: ``)."""
_TIME = re.compile(r"\[titan\] (?P<time>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) - ")
_NUMBER = r"[-+]?(?:[0-9][0-9,]*(?:\.[0-9]*)?|nan|inf)"
_STEP = re.compile(
    rf"(?<!validate )\bstep:\s*(?P<step>\d+)\s+loss:\s*(?P<loss>{_NUMBER})\s+"
    rf"(?:grad_norm:\s*(?P<grad_norm>{_NUMBER})\s+)?"
    rf"memory:\s*(?P<memory>{_NUMBER})\s*GiB\([^)]*\)\s+"
    rf"tps:\s*(?P<tps>{_NUMBER})\s+tflops:\s*(?P<tflops>{_NUMBER})\s+"
    r"mfu:\s*(?:N/A|[0-9.]+%|nan%|inf%)"
)
_VALIDATE = re.compile(r"\bvalidate step:\s*\d+\s+loss:")


def _float(text: str) -> float:
    return float(text.replace(",", ""))


def _stamp(line: str) -> datetime | None:
    found = _TIME.search(line)
    return datetime.strptime(found["time"], "%Y-%m-%d %H:%M:%S,%f") if found else None


def _rank(line: str) -> int | None:
    found = _PREFIX.match(line)
    return int(found["rank"]) if found else None


PP_PLACEHOLDER_LOSS = -1.0
"""What a pipeline stage without the loss logs (``torch.tensor([-1.0])``, torchtitan/trainer.py:
866-869 in 0.3.0): never a cross-entropy, which is not negative."""


def parse_torchtitan_log(
    lines: Iterable[str], *, tokens_per_step: int, devices: int, pipeline_parallel: int = 1
) -> list[StepRecord]:
    """One record per logged training step of one rank, in log order.

    The rank: the lowest ``[roleN]:`` prefix any step line has, or the unprefixed lines when
    no step line has one; a step number already seen in that stream (every rank, or the
    local rank 0 of each node, logging the same step) is skipped.

    - ``step``, ``loss``, ``grad_norm`` (None when the field is absent),
      ``framework_tflops`` (``tflops``), ``framework_tokens_per_second`` (``tps``).
    - ``tokens``: ``tokens_per_step`` (all devices; torchtitan counts padding too).
    - ``step_seconds``: the log's own clock, this step line's timestamp minus the previous
      step (or ``validate step:``) line's of the same stream, divided by the steps between
      them (``log_freq``). The first step line has no previous one (nor has any line
      without a ``[titan]`` timestamp): ``tokens_per_step / devices / tps``, torchtitan's own
      measurement of the same interval, to a rounding of ``tps``.
    - ``peak_memory_bytes``: the largest ``memory`` (GiB, peak reserved) so far.

    A torn last line (a killed run) does not match and is ignored.

    With pipeline parallelism (``pipeline_parallel`` > 1) only the last stage computes the
    loss; the other stages log ``PP_PLACEHOLDER_LOSS``. The stream read is then the highest
    ``[roleN]:`` prefix (the last stage's ranks come last in torchtitan's mesh, ``pp``
    outermost), and a step line with the placeholder loss is never read, whichever rank wrote
    it (an unprefixed log of every rank).
    """
    if tokens_per_step < 1 or devices < 1:
        raise ValueError(f"tokens_per_step and devices must be >= 1: {tokens_per_step}, {devices}")
    steps: list[tuple[int | None, datetime | None, re.Match[str]]] = []
    validations: list[tuple[int | None, datetime | None]] = []
    for raw in lines:
        line = _ANSI.sub("", raw)
        found = _STEP.search(line)
        if found and pipeline_parallel > 1 and _float(found["loss"]) == PP_PLACEHOLDER_LOSS:
            continue
        if found:
            steps.append((_rank(line), _stamp(line), found))
        elif _VALIDATE.search(line):
            validations.append((_rank(line), _stamp(line)))
    if not steps:
        return []
    ranks = {rank for rank, _, _ in steps if rank is not None}
    chosen = (max(ranks) if pipeline_parallel > 1 else min(ranks)) if ranks else None
    return _records(
        [(stamp, found) for rank, stamp, found in steps if rank == chosen],
        {stamp for rank, stamp in validations if rank == chosen and stamp is not None},
        tokens_per_step=tokens_per_step,
        devices=devices,
    )


def _records(
    stream: list[tuple[datetime | None, re.Match[str]]],
    restarts: set[datetime],
    *,
    tokens_per_step: int,
    devices: int,
) -> list[StepRecord]:
    records: list[StepRecord] = []
    seen: set[int] = set()
    previous: tuple[int, datetime | None] | None = None
    peak = 0
    for stamp, found in stream:
        step = int(found["step"])
        if step in seen:
            continue
        seen.add(step)
        tps = _float(found["tps"])
        start = previous[1] if previous else None
        if start is not None and stamp is not None:
            later = [r for r in restarts if start < r <= stamp]
            start = max(later, default=start)
        if previous and start is not None and stamp is not None and step > previous[0]:
            seconds = (stamp - start).total_seconds() / (step - previous[0])
        else:
            seconds = tokens_per_step / devices / tps if tps > 0 else 0.0
        peak = max(peak, round(_float(found["memory"]) * GIB))
        grad_norm = found["grad_norm"]
        records.append(
            StepRecord(
                step=step,
                loss=_float(found["loss"]),
                grad_norm=_float(grad_norm) if grad_norm is not None else None,
                tokens=tokens_per_step,
                step_seconds=seconds,
                peak_memory_bytes=peak,
                framework_tflops=_float(found["tflops"]),
                framework_tokens_per_second=tps,
            )
        )
        previous = (step, stamp)
    return records
