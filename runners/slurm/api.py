"""slurmrestd's answers, whatever the API version, as one typed job record.

The shapes differ by version; the fields read here, as slurmrestd's OpenAPI description names
them (``src/plugins/openapi/v0.0.38/openapi.json`` at slurm-22-05-8-1, schema
``v0.0.38_job_response_properties``; ``src/plugins/data_parser/v0.0.42/parsers.c`` at
slurm-24-11-7-1, ``PARSER_ARRAY(JOB_INFO)``, the same in v0.0.40 and v0.0.41):

- ``job_state``: v0.0.38 a string, the base state or one flag that hides it (``COMPLETING``);
  v0.0.40+ a list, the base state and its flags (``JOB_STATE`` flags, parsers.c:9028).
- ``exit_code``: v0.0.38 the raw wait status; v0.0.40+ ``{status, return_code, signal: {id,
  name}}`` (``PROCESS_EXIT_CODE_VERBOSE``, parsers.c:9083).
- ``start_time``, ``end_time``: v0.0.38 epoch seconds, 0 unset; v0.0.40+ ``{set, infinite,
  number}`` (``TIMESTAMP_NO_VAL``, parsers.c:7808, 7884).
- ``nodes``: a hostlist string (``gpu[01-04]``) in both; ``tres_alloc_str``:
  ``cpu=8,node=2,gres/gpu=8`` in both (parsers.c:7907).
- ``errors[]``: ``{description, error_number, error, source}`` (``OPENAPI_ERROR``,
  parsers.c:8611); v0.0.38's submit answer spells the number ``error_code``.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, Field

TERMINAL_STATES = frozenset(
    {
        "COMPLETED",
        "CANCELLED",
        "FAILED",
        "TIMEOUT",
        "NODE_FAIL",
        "PREEMPTED",
        "BOOT_FAIL",
        "DEADLINE",
        "OUT_OF_MEMORY",
    }
)
"""Base states of a job that is over (``job_state_string``, src/common/slurm_protocol_defs.c)."""
BASE_STATES = TERMINAL_STATES | {"PENDING", "RUNNING", "SUSPENDED"}
UNSETTLED_FLAGS = frozenset(
    {
        "COMPLETING",
        "STAGE_OUT",
        "CONFIGURING",
        "REQUEUED",
        "REQUEUE_FED",
        "REQUEUE_HOLD",
        "SPECIAL_EXIT",
        "RESIZING",
        "SIGNALING",
        "STOPPED",
        "POWER_UP_NODE",
    }
)
"""Flags of a job whose processes or resources are still being handled: not over yet."""


class SlurmError(BaseModel):
    """One entry of a response's ``errors[]``."""

    error: str = ""
    number: int | None = None
    description: str = ""
    source: str = ""

    def text(self) -> str:
        parts = [p for p in (self.description, self.error) if p]
        text = ": ".join(dict.fromkeys(parts)) or "no message"
        extra = ", ".join(
            p for p in (f"error {self.number}" if self.number else "", self.source) if p
        )
        return f"{text} ({extra})" if extra else text


class SlurmJob(BaseModel):
    """A job as attune needs it, from any API version."""

    job_id: int
    name: str = ""
    state: str = ""
    """Base state (``RUNNING``, ``COMPLETED``...); empty when v0.0.38 shows only a flag."""
    flags: list[str] = Field(default_factory=list)
    reason: str = ""
    """``state_reason`` (``NonZeroExitCode``, ``NodeDown``...), with ``state_description``."""
    returncode: int | None = None
    """Exit status of the batch script; negative for a signal; None when unknown."""
    start_time: float | None = None
    end_time: float | None = None
    nodes: list[str] = Field(default_factory=list)
    gpus: int | None = None
    """GPUs allocated: ``gres/gpu`` in ``tres_alloc_str`` (where the cluster tracks it,
    ``AccountingStorageTRES=gres/gpu``), else ``gres_detail`` while the job runs; None when
    neither says."""
    cpus: int | None = None

    @property
    def terminal(self) -> bool:
        """Over: a terminal base state and no flag that says resources are still held."""
        return self.state in TERMINAL_STATES and not UNSETTLED_FLAGS.intersection(self.flags)

    @property
    def running(self) -> bool:
        return self.state == "RUNNING"

    def describe(self) -> str:
        state = "+".join([self.state or "?", *self.flags])
        reason = f" ({self.reason})" if self.reason and self.reason != "None" else ""
        on = f" on {','.join(self.nodes)}" if self.nodes else ""
        return f"Slurm job {self.job_id} {state}{reason}{on}"


def parse_errors(body: Any) -> list[SlurmError]:
    """``errors[]`` of a response body (both spellings of the number: ``error_number`` and,
    in v0.0.38's submit answer, ``error_code``)."""
    if not isinstance(body, dict):
        return []
    found = []
    for item in body.get("errors") or []:
        if not isinstance(item, dict):
            continue
        number = item.get("error_number", item.get("error_code"))
        found.append(
            SlurmError(
                error=str(item.get("error") or ""),
                number=number if isinstance(number, int) else None,
                description=str(item.get("description") or ""),
                source=str(item.get("source") or ""),
            )
        )
    return found


def number(value: Any) -> int | None:
    """An integer field: a plain number (v0.0.38) or ``{set, infinite, number}`` (v0.0.40+);
    None when unset or infinite."""
    if isinstance(value, dict):
        if not value.get("set", False) or value.get("infinite", False):
            return None
        value = value.get("number")
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value


def timestamp(value: Any) -> float | None:
    """Epoch seconds; None when unset (0 in v0.0.38, ``set: false`` in v0.0.40+)."""
    n = number(value)
    return float(n) if n else None


def wait_status(status: int) -> int:
    """A raw wait status (v0.0.38's ``exit_code``) as a return code: the exit code, or minus
    the signal that killed the process."""
    signal = status & 0x7F
    return -signal if signal else (status >> 8) & 0xFF


def exit_code(value: Any) -> int | None:
    """``exit_code`` of any version as a return code (None when not known yet)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return wait_status(value)
    if not isinstance(value, dict):
        return None
    status = value.get("status")
    flags = status if isinstance(status, list) else [status]
    if "SIGNALED" in flags or "CORE_DUMPED" in flags:
        signal = value.get("signal")
        sig = number(signal.get("id")) if isinstance(signal, dict) else None
        return -sig if sig else None
    if "PENDING" in flags or "INVALID" in flags:
        return None
    return number(value.get("return_code"))


def job_state(value: Any) -> tuple[str, list[str]]:
    """(base state, flags) from a string (v0.0.38) or a list (v0.0.40+)."""
    names = [str(v) for v in value] if isinstance(value, list) else [str(value or "")]
    base = next((n for n in names if n in BASE_STATES), "")
    return base, [n for n in names if n and n != base]


_TRES_GPU = re.compile(r"(?:^|,)gres/gpu(?::[^=,]+)?=(\d+)")
_GRES_GPU = re.compile(r"^gpu(?::[^:(]+)?:(\d+)")
_TRES_CPU = re.compile(r"(?:^|,)cpu=(\d+)")


def tres_count(tres: str, pattern: re.Pattern[str]) -> int | None:
    """The count of one TRES in ``cpu=8,node=2,gres/gpu=8`` (typed GRES counted once: the
    untyped total ``gres/gpu=N`` comes first when both are listed)."""
    match = pattern.search(tres or "")
    return int(match.group(1)) if match else None


def gres_gpus(detail: Any) -> int | None:
    """GPUs in ``gres_detail`` (one ``gpu[:type]:N(IDX:...)`` entry per node, while the job
    holds them: Slurm clears it when the job ends)."""
    counts = [int(m.group(1)) for d in detail or [] if (m := _GRES_GPU.match(str(d)))]
    return sum(counts) if counts else None


def expand_hostlist(hostlist: str) -> list[str]:
    """Slurm's compressed host list (``gpu[01-03,7],login1``) as node names, in order."""
    names: list[str] = []
    depth, start = 0, 0
    for i, ch in enumerate(hostlist + ","):
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
        elif ch == "," and depth == 0:
            part = hostlist[start:i].strip()
            if part:
                names.extend(_expand_one(part))
            start = i + 1
    return names


def _expand_one(part: str) -> list[str]:
    open_at = part.find("[")
    if open_at < 0:
        return [part]
    close_at = part.index("]", open_at)
    prefix, ranges, rest = part[:open_at], part[open_at + 1 : close_at], part[close_at + 1 :]
    out: list[str] = []
    for item in ranges.split(","):
        lo, _, hi = item.partition("-")
        width = len(lo)
        for n in range(int(lo), int(hi or lo) + 1):
            out.extend(f"{prefix}{n:0{width}d}{tail}" for tail in _expand_one(rest))
    return out


def parse_job(record: dict[str, Any]) -> SlurmJob:
    """One entry of ``jobs[]`` of ``GET /slurm/<version>/job/{job_id}``, any version."""
    state, flags = job_state(record.get("job_state"))
    reason = str(record.get("state_reason") or "")
    description = str(record.get("state_description") or "")
    if description:
        reason = f"{reason}: {description}" if reason else description
    tres = str(record.get("tres_alloc_str") or "")
    return SlurmJob(
        job_id=int(record["job_id"]),
        name=str(record.get("name") or ""),
        state=state,
        flags=flags,
        reason=reason,
        returncode=exit_code(record.get("exit_code")),
        start_time=timestamp(record.get("start_time")),
        end_time=timestamp(record.get("end_time")),
        nodes=expand_hostlist(str(record.get("nodes") or "")),
        gpus=tres_count(tres, _TRES_GPU) or gres_gpus(record.get("gres_detail")),
        cpus=tres_count(tres, _TRES_CPU),
    )


class SlurmNode(BaseModel):
    """A node of ``GET /slurm/<version>/nodes``: its name, state and partitions."""

    name: str
    state: list[str]
    """The base state and its flags (``IDLE``, ``MIXED``, ``DOWN``, ``DRAIN``...)."""
    partitions: list[str] = Field(default_factory=list)

    @property
    def usable(self) -> bool:
        """Can take a job now or soon: up, not drained, not being powered down."""
        bad = {"DOWN", "DRAIN", "DRAINED", "DRAINING", "FAIL", "FUTURE", "POWERED_DOWN"}
        bad |= {"POWERING_DOWN", "NOT_RESPONDING", "MAINTENANCE", "REBOOT_REQUESTED"}
        return not bad.intersection(self.state)


def parse_node(record: dict[str, Any]) -> SlurmNode:
    """One entry of ``nodes[]``: ``state`` is a string and ``state_flags`` a list in v0.0.38,
    ``state`` a list in v0.0.40+."""
    raw = record.get("state")
    state = [str(s).upper() for s in raw] if isinstance(raw, list) else [str(raw or "").upper()]
    state += [str(s).upper() for s in record.get("state_flags") or []]
    partitions = record.get("partitions") or []
    return SlurmNode(
        name=str(record.get("name") or ""),
        state=[s for s in state if s],
        partitions=[str(p) for p in partitions] if isinstance(partitions, list) else [],
    )
