"""A finished launch, read: its status and error (``log_failures.run_status`` over its exit,
its limits and its log's tail) and the lines it wrote."""

from __future__ import annotations

from pathlib import Path

from gate.models import TrialStatus
from runners.local import RunOutcome
from runners.log_failures import RunEnd, run_status


def _tail(path: str, lines: int = 12) -> str:
    try:
        text = Path(path).read_text(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.strip().splitlines()[-lines:])


def classify(
    outcome: RunOutcome,
    *,
    steps_logged: int,
    steps_wanted: int,
    nonfinite: bool,
    lines: list[str] | None = None,
) -> tuple[TrialStatus, str | None]:
    """Status and error text of a finished launch (``log_failures.run_status``): NaN/Inf in any
    step record first (unless the log shows an OOM), then the wall-clock limit, a hang, what the
    log says of a failed exit, missing steps."""
    end = RunEnd(
        returncode=outcome.returncode,
        timed_out=outcome.timed_out,
        hung=outcome.hung,
        backend_failure=outcome.failure,
    )
    return run_status(
        end,
        steps_logged=steps_logged,
        steps_wanted=steps_wanted,
        nonfinite=nonfinite,
        lines=lines or [],
        tail=_tail(outcome.log_path),
    )


def output_lines(outcome: RunOutcome) -> list[str]:
    """The launch's output: stdout, then stderr (torchtitan logs its steps on stderr)."""
    lines: list[str] = []
    for path in (outcome.stdout_path, outcome.log_path):
        try:
            with open(path, errors="replace") as f:
                lines.extend(f)
        except OSError:
            continue
    return lines
