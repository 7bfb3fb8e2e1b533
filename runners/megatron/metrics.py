"""Step records from a Megatron-LM training log (the stdout of ``pretrain_gpt.py``).

Format strings read, all at tag ``core_v0.19.0`` of NVIDIA/Megatron-LM:

- ``megatron/training/training.py:2844-2897`` (``training_log``): one line per logged
  iteration, printed at training.py:2909 by ``print_rank_last``
  (``megatron/training/utils/common_utils.py:468``), i.e. by the last rank only::

      [2025-06-01 12:00:00.123456] iteration       10/     100 | consumed samples: ... |
      elapsed time per iteration (ms): 1234.5 | throughput per GPU (TFLOP/s/GPU): 400.1 |
      learning rate: 3.000000E-04 | global batch size:    64 | lm loss: 1.023456E+01 |
      loss scale: 1.0 | grad norm: 12.345 | number of skipped iterations:   0 |
      number of nan iterations:   0 |

  The throughput field needs ``--log-throughput`` (training.py:2854), the grad norm is absent
  when the optimizer skipped the step (training.py:2888), a loss is printed only when its
  interval mean is ``>= 0`` (training.py:2881), so a NaN loss is simply missing, and MoE runs
  add fields such as ``load_balancing_loss`` (training.py:2886). Older releases print the
  timestamp without microseconds; the timestamp is not needed, the line carries its own
  elapsed time.
- ``megatron/training/utils/common_utils.py:313-334`` (``report_memory``), called at
  training.py:2916 and 2927 after an iteration line and at 3083/3111 around checkpoint saves,
  by every data-parallel rank 0::

      [Rank 0] (after 10 iterations) memory (MB) | allocated: 1234.50 | max allocated: ...

  "MB" there is ``1024 * 1024`` bytes (common_utils.py:320).

Each iteration line covers the iterations since the previous line (``--log-interval``); its
elapsed time is the mean per iteration, so a record is one mean iteration of its interval.
Megatron does not reset its counters after the first iteration's line (training.py:2594), so
the second line averages over the first two iterations.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable

from gate.models import StepRecord

MIB = 1024 * 1024
"""Megatron's "MB" (``mega_bytes`` in ``report_memory``)."""

_ITERATION = re.compile(r"\biteration\s+(?P<step>\d+)/\s*\d+\s*\|(?P<fields>.*)$")
"""The head of a ``training_log`` line; ``validation loss at iteration N`` lines do not match."""

_COMPLETE = re.compile(r"number of nan iterations:\s*\d+\s*\|")
"""The field printed last (training.py:2897): a line without it was torn by a kill."""

_MEMORY = re.compile(
    r"\((?:after (?P<after>\d+) iterations"
    r"|(?:before|after) save_checkpoint for iteration (?P<save>\d+))\)"
    r" memory \(MB\) \|.*?\| max allocated: (?P<max_allocated>[0-9.]+)"
)


def _fields(text: str) -> dict[str, str]:
    """``name: value`` pairs of the ``|``-separated fields after ``iteration N/M |``."""
    fields: dict[str, str] = {}
    for part in text.split("|"):
        name, sep, value = part.rpartition(":")
        if sep:
            fields[name.strip()] = value.strip()
    return fields


def _number(fields: dict[str, str], name: str) -> float | None:
    value = fields.get(name)
    if value is None:
        return None
    try:
        return float(value)
    except ValueError:
        return None


def parse_megatron_log(lines: Iterable[str], *, seq_length: int) -> list[StepRecord]:
    """One record per complete iteration line, in log order; everything else is ignored.

    - ``step``: the iteration number; ``tokens``: ``global batch size`` x ``seq_length``;
      ``step_seconds``: ``elapsed time per iteration (ms)`` / 1000.
    - ``loss``: ``lm loss``. Absent on a non-skipped line means Megatron dropped a NaN mean
      (training.py:2881): NaN. A skipped step (fp16 overflow) has None: Megatron accumulates
      no loss for it, and the 0.0 it prints once the key exists is not a loss.
    - ``grad_norm``: ``grad norm``, None when absent (skipped step).
    - ``skipped``: ``number of skipped iterations`` > 0; ``nan_iterations``: ``number of nan
      iterations``; ``framework_tflops``: ``throughput per GPU (TFLOP/s/GPU)`` or None.
    - ``peak_memory_bytes``: the largest ``max allocated`` of any rank's memory report for this
      iteration or an earlier one, whichever comes first in the log (ranks print
      independently); 0 before any report.
    """
    if seq_length < 1:
        raise ValueError(f"seq_length must be >= 1, got {seq_length}")
    rows: list[tuple[int, dict[str, str]]] = []
    reports: list[tuple[int, int]] = []
    for line in lines:
        memory = _MEMORY.search(line)
        if memory:
            at = int(memory["after"] or memory["save"])
            reports.append((at, round(float(memory["max_allocated"]) * MIB)))
            continue
        head = _ITERATION.search(line)
        if head and _COMPLETE.search(head["fields"]):
            rows.append((int(head["step"]), _fields(head["fields"])))

    records = []
    for step, fields in rows:
        elapsed_ms = _number(fields, "elapsed time per iteration (ms)")
        batch = _number(fields, "global batch size")
        if elapsed_ms is None or batch is None:
            continue
        skipped_count = int(_number(fields, "number of skipped iterations") or 0)
        loss = _number(fields, "lm loss")
        if skipped_count > 0:
            loss = None
        elif loss is None:
            loss = math.nan
        peaks = [peak for at, peak in reports if at <= step]
        records.append(
            StepRecord(
                step=step,
                loss=loss,
                grad_norm=_number(fields, "grad norm"),
                tokens=int(batch) * seq_length,
                step_seconds=elapsed_ms / 1000.0,
                peak_memory_bytes=max(peaks, default=0),
                skipped=skipped_count > 0,
                nan_iterations=int(_number(fields, "number of nan iterations") or 0),
                framework_tflops=_number(fields, "throughput per GPU (TFLOP/s/GPU)"),
            )
        )
    return records
