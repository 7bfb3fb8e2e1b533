"""The Slurm backend: each launch a batch job submitted through slurmrestd.

``start`` submits and returns the job's id in the handle; ``wait`` polls the job until Slurm
says it is over (also for a handle an earlier bot process stored in the ledger). What a trial
is charged comes from Slurm alone: the job's ``start_time`` and ``end_time`` once the job is in
a terminal state (before that ``end_time`` is a projection), times the devices it held.

attune cancels the job itself at the trial's wall-clock limit (``timed_out``), after
``hang_timeout_s`` without new output (``hung``), when the campaign is asked to stop, and when
the bot shuts down (Ctrl-C, SIGTERM); a bot killed outright leaves the job running and a resumed
campaign waits for it by id. A job cancelled, timed out, failed on a node, or preempted is a
failed trial charged for what it held.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable
from pathlib import Path

from gate.errors import AttuneError
from runners.adapter import LaunchSpec
from runners.local import RunHandle, RunOutcome
from runners.slurm.api import SlurmJob
from runners.slurm.client import SlurmApiError, SlurmClient, SlurmUnreachable
from runners.slurm.placement import exclude_nodes
from runners.slurm.script import STDERR, STDOUT, job_request
from runners.slurm.settings import SlurmSettings

CANCEL_FILE = "slurm-cancel.json"
"""Why attune cancelled a job (``timeout``, ``hang``, ``stop``, ``shutdown``, ``cancel``):
written before the cancel, so a bot that dies right after still knows."""
SUBMIT_ERROR = "slurm-submit-error.txt"
SUBMIT_WARNINGS = "slurm-submit-warnings.txt"
INTERRUPTED = frozenset({"NODE_FAIL", "PREEMPTED", "BOOT_FAIL", "DEADLINE"})
"""Ends that are the cluster's doing, not the recipe's (like a cancel other than attune's own
at the wall-clock limit or on silence): the trial is failed and charged, ``interrupted``."""
INVALID_JOB_ID = 2017
"""ESLURM_INVALID_JOB_ID: slurmctld does not know the job (never, or no more)."""


class SlurmBackend:
    """Runs launches as Slurm jobs on the cluster ``settings`` name."""

    name = "slurm"

    def __init__(
        self,
        settings: SlurmSettings,
        *,
        client: SlurmClient | None = None,
        should_stop: Callable[[], bool] | None = None,
    ) -> None:
        self.settings = settings
        self.client = client or SlurmClient(settings)
        self.should_stop = should_stop or (lambda: False)
        """Polled while a job runs: True cancels it (``attune stop``, ``/attune stop``)."""

    def check(self) -> str:
        """Reach slurmctld through slurmrestd as the configured user; the API version."""
        version = self.client.version
        self.client.ping()
        return version

    # --- Backend ---

    def start(self, spec: LaunchSpec, *, workdir: Path, timeout_s: float) -> RunHandle:
        workdir = workdir.resolve()
        workdir.mkdir(parents=True, exist_ok=True)
        for stale in (STDOUT, STDERR, CANCEL_FILE, SUBMIT_ERROR, SUBMIT_WARNINGS):
            (workdir / stale).unlink(missing_ok=True)
        exclude: list[str] = []
        handle = RunHandle(
            backend=self.name,
            pid=0,
            workdir=str(workdir),
            allocated_at=time.time(),
            timeout_s=timeout_s,
            hang_timeout_s=spec.hang_timeout_s,
        )
        try:
            if spec.avoid_nodes:
                exclude = exclude_nodes(
                    self.client.nodes(),
                    spec.avoid_nodes,
                    needed=spec.nodes,
                    partition=self.settings.partition,
                )
            request = job_request(
                spec,
                workdir=workdir,
                timeout_s=timeout_s,
                partition=self.settings.partition,
                account=self.settings.account,
                margin_min=self.settings.time_margin_min,
                exclude=exclude,
            )
            (workdir / "slurm-job.sh").write_text(request.script)
            job_id, warnings = self.client.submit(request)
            if warnings:  # queued, with Slurm's word on why it may wait (nodes down...)
                (workdir / SUBMIT_WARNINGS).write_text("\n".join(warnings) + "\n")
        except SlurmUnreachable as exc:
            # never submitted: the trial fails, holding nothing
            (workdir / SUBMIT_ERROR).write_text(str(exc) + "\n")
            return handle
        return handle.model_copy(update={"job_id": job_id})

    def wait(self, handle: RunHandle) -> RunOutcome:
        """Poll the job until it is over; cancel it at its limits, on a stop request and on
        shutdown (the exception goes on). Slurm unreachable for longer than the retries is an
        AttuneError: the job may still run, and a resumed campaign waits for it again."""
        workdir = Path(handle.workdir)
        if handle.job_id is None:
            error = (
                (workdir / SUBMIT_ERROR).read_text().strip()
                if (workdir / SUBMIT_ERROR).exists()
                else "the job was never submitted"
            )
            never = outcome(handle, None, failure=error)
            return never.model_copy(update={"interrupted": True, "submitted": False})
        try:
            job = self._poll(handle)
        except SlurmApiError as exc:
            if INVALID_JOB_ID not in exc.numbers:
                raise  # the job goes on; a resumed campaign waits for it again
            return self._forgotten(handle)
        except SlurmUnreachable as exc:
            raise AttuneError(
                f"{exc}; job {handle.job_id} may still be running: `attune tune --resume` "
                "waits for it again"
            ) from None
        except BaseException:  # Ctrl-C, SIGTERM, a crash: give the allocation back
            self._cancel_quietly(handle, "shutdown")
            raise
        marker = workdir / CANCEL_FILE
        reason = json.loads(marker.read_text())["reason"] if marker.exists() else None
        return job_outcome(handle, job, reason)

    def cancel(self, handle: RunHandle, reason: str = "cancel") -> None:
        """Cancel the job of ``handle`` (``reason`` is kept beside the run for ``wait``)."""
        if handle.job_id is None:
            return
        marker = Path(handle.workdir) / CANCEL_FILE
        if not marker.exists():
            marker.write_text(json.dumps({"reason": reason, "at": time.time()}))
        self.client.cancel(handle.job_id)

    # --- internals ---

    def _poll(self, handle: RunHandle) -> SlurmJob:
        assert handle.job_id is not None
        workdir = Path(handle.workdir)
        last_size, last_growth = -1, time.time()
        cancelled = (workdir / CANCEL_FILE).exists()
        gpus = None
        while True:
            job = self.client.job(handle.job_id)
            gpus = job.gpus or gpus  # gres_detail is cleared when the job ends
            if job.terminal:
                return job.model_copy(update={"gpus": gpus})
            now = time.time()
            if job.running and job.start_time is not None and not cancelled:
                size = sum(
                    (workdir / f).stat().st_size for f in (STDOUT, STDERR) if (workdir / f).exists()
                )
                if size != last_size:
                    last_size, last_growth = size, now
                reason = None
                if handle.timeout_s is not None and now - job.start_time > handle.timeout_s:
                    reason = "timeout"
                elif handle.hang_timeout_s is not None and now - last_growth > (
                    handle.hang_timeout_s
                ):
                    reason = "hang"
                elif self.should_stop():
                    reason = "stop"
                if reason is not None:
                    self.cancel(handle, reason)
                    cancelled = True
            elif not cancelled and self.should_stop():
                self.cancel(handle, "stop")
                cancelled = True
            time.sleep(self.settings.poll_s)

    def _forgotten(self, handle: RunHandle) -> RunOutcome:
        """A job slurmctld no longer knows (purged ``MinJobAge`` after it ended, while no bot
        watched): charged from its submission to its last output, like a local run whose
        supervisor was killed."""
        workdir = Path(handle.workdir)
        outputs = [workdir / f for f in (STDOUT, STDERR) if (workdir / f).exists()]
        released = max([handle.allocated_at, *(p.stat().st_mtime for p in outputs)])
        lost = outcome(
            handle, None, failure=f"Slurm no longer knows job {handle.job_id}: its end was not seen"
        )
        return lost.model_copy(update={"released_at": released})

    def _cancel_quietly(self, handle: RunHandle, reason: str) -> None:
        with contextlib.suppress(AttuneError):  # unreachable: Slurm's time limit still holds
            self.cancel(handle, reason)


def job_outcome(handle: RunHandle, job: SlurmJob, reason: str | None) -> RunOutcome:
    """What a job over in Slurm means for the trial; ``reason``: why attune cancelled it.

    COMPLETED and FAILED are the launch's own exit; TIMEOUT (Slurm's limit) and attune's cancel
    at the wall-clock limit are ``timed_out``; a cancel for silence is ``hung``; anything else
    (cancelled, NODE_FAIL, PREEMPTED, BOOT_FAIL, DEADLINE, OUT_OF_MEMORY) ends it with Slurm's
    account as the failure. Whatever the end, the charge is the job's own start to end."""
    failure = None
    returncode = job.returncode
    if job.state == "COMPLETED":
        returncode = 0
    elif job.state == "FAILED":
        returncode = 1 if returncode in (None, 0) else returncode
    elif job.state == "OUT_OF_MEMORY":
        failure = f"{job.describe()}: out of memory"
    elif job.state == "CANCELLED" and reason in ("timeout", "hang"):
        pass
    elif job.state == "CANCELLED" and reason is not None:
        failure = f"{job.describe()}: cancelled by attune ({reason})"
    elif job.state != "TIMEOUT":
        failure = job.describe()
    ran = outcome(
        handle,
        job,
        returncode=returncode,
        timed_out=job.state == "TIMEOUT" or (job.state == "CANCELLED" and reason == "timeout"),
        hung=job.state == "CANCELLED" and reason == "hang",
        failure=failure,
    )
    interrupted = job.state in INTERRUPTED or (
        job.state == "CANCELLED" and reason not in ("timeout", "hang")
    )
    return ran.model_copy(update={"interrupted": interrupted})


def outcome(
    handle: RunHandle,
    job: SlurmJob | None,
    *,
    returncode: int | None = None,
    timed_out: bool = False,
    hung: bool = False,
    failure: str | None = None,
) -> RunOutcome:
    """Allocation and release from Slurm's own times (a job that never started held nothing:
    both at its end); the nodes it ran on; the GPUs it held, when it held any."""
    workdir = Path(handle.workdir)
    end = job.end_time if job is not None and job.end_time else handle.allocated_at
    start = job.start_time if job is not None and job.start_time else end
    return RunOutcome(
        returncode=returncode,
        timed_out=timed_out,
        hung=hung,
        allocated_at=min(start, end),
        released_at=end,
        stdout_path=str(workdir / STDOUT),
        log_path=str(workdir / STDERR),
        nodes=job.nodes if job is not None and job.nodes else None,
        devices=job.gpus if job is not None else None,
        failure=failure,
    )
