"""A bench run's result artifact, read as untrusted input.

The self-hosted runner's job uploads ``result.json`` (a ``TrialResult``). The bot believes
none of its summary: the artifact must be for the trial and commit that were dispatched, with
the dispatched warm-up and step count and steps numbered 1, 2, 3, ...; the score, the step-1
loss and the NaN/Inf flag are recomputed here from its step records.
"""

from __future__ import annotations

import io
import zipfile

from pydantic import ValidationError

from gate.errors import AttuneError
from gate.models import TrialResult
from gate.postlaunch import first_loss
from gate.throughput import tokens_per_second_per_device
from runners.bench import Launch

RESULT_FILE = "result.json"
MAX_RESULT_BYTES = 8 * 1024 * 1024
"""A result artifact larger than this (zipped or not) is refused, not read."""


def read_result(archive: bytes) -> TrialResult:
    """The TrialResult inside a result artifact's zip; AttuneError for anything else."""
    if len(archive) > MAX_RESULT_BYTES:
        raise AttuneError(f"result artifact is {len(archive)} bytes (limit {MAX_RESULT_BYTES})")
    try:
        with zipfile.ZipFile(io.BytesIO(archive)) as zf:
            info = zf.getinfo(RESULT_FILE)
            if info.file_size > MAX_RESULT_BYTES:
                raise AttuneError(f"{RESULT_FILE} unpacks to {info.file_size} bytes")
            text = zf.read(info)
    except (zipfile.BadZipFile, KeyError) as exc:
        raise AttuneError(f"result artifact is not a zip holding {RESULT_FILE}: {exc}") from None
    try:
        return TrialResult.model_validate_json(text)
    except ValidationError as exc:
        raise AttuneError(f"{RESULT_FILE} is not a TrialResult: {exc.errors()[0]['msg']}") from None


def check_result(result: TrialResult, trial: str, sha: str | None, launch: Launch) -> str | None:
    """What is wrong with ``result`` for ``trial`` dispatched at ``sha``, or None; when nothing
    is, everything the bot decides on is set from the step records, never the artifact's own
    summary."""
    if result.trial != trial or result.sha != sha:
        return (
            f"the result is for trial {result.trial} at {str(result.sha)[:7]}, "
            f"not {trial} at {str(sha)[:7]}"
        )
    if result.fingerprint != launch.fingerprint:
        return f"benchmarked config {result.fingerprint}, not {launch.fingerprint}"
    if result.warmup != launch.warmup:
        return f"the result scores after {result.warmup} warm-up steps, not {launch.warmup}"
    numbers = [s.step for s in result.steps]
    if numbers != list(range(1, len(numbers) + 1)):
        return "its step records are not steps 1, 2, 3, ... in order"
    if result.status == "ok" and len(numbers) != launch.steps:
        return f"it ran {len(numbers)} steps, not the {launch.steps} dispatched"
    if len(numbers) > launch.steps:
        return f"it logged {len(numbers)} steps, more than the {launch.steps} dispatched"
    nonfinite = [s.step for s in result.steps if not s.finite()]
    if result.status == "ok" and nonfinite:
        return f"it claims ok, but step {nonfinite[0]} logged NaN/Inf"
    result.devices = launch.devices
    result.step1_loss = first_loss(result.steps)
    result.has_nonfinite = result.has_nonfinite or bool(nonfinite)
    result.score = None
    if result.status == "ok":
        result.score = tokens_per_second_per_device(
            result.steps, warmup=launch.warmup, devices=launch.devices
        )
    return None
