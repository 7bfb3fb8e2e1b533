"""A batch job request, and its body for each slurmrestd API version.

v0.0.38 (Slurm 22.05) reads the job through sbatch's own option table
(``src/plugins/openapi/v0.0.38/jobs.c``, ``job_params`` at slurm-22-05-8-1): ``script`` beside
``job``; ``environment`` a non-empty dictionary (the submission is refused without it,
jobs.c:423); ``nodes`` sbatch's ``-N`` text; ``exclude_nodes`` a comma list; ``gpus_per_node``;
``time_limit`` in minutes. Its ``requeue`` key means ``--requeue`` whatever its value
(``arg_set_data_requeue`` in src/common/slurm_opt.c sets it to 1), so a job that must not be
requeued after a node failure says ``no_requeue``.

v0.0.40-v0.0.42 (Slurm 23.11-24.11) read ``JOB_DESC_MSG`` (``src/plugins/data_parser/
v0.0.42/parsers.c:8409`` at slurm-24-11-7-1): the script inside ``job`` (``JOB_SUBMIT_REQ``,
parsers.c:8646), ``environment`` a list of ``NAME=value``, ``excluded_nodes`` a list,
``tres_per_node`` (``gres/gpu:N``), ``requeue`` a boolean and ``time_limit`` as
``{set, infinite, number}``.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field


class JobRequest(BaseModel):
    """A batch job, independent of the API version."""

    name: str
    script: str
    workdir: str
    stdout: str
    stderr: str
    environment: dict[str, str] = Field(min_length=1)
    nodes: int = Field(ge=1)
    tasks_per_node: int = Field(1, ge=1)
    cpus_per_task: int | None = Field(None, ge=1)
    gpus_per_node: int | None = Field(None, ge=1)
    partition: str | None = None
    account: str | None = None
    time_limit_min: int = Field(ge=1)
    exclude: list[str] = Field(default_factory=list)
    comment: str = ""

    def body(self, version: str) -> dict[str, Any]:
        """The ``POST /slurm/<version>/job/submit`` body."""
        return body_v0038(self) if version == "v0.0.38" else body_v0040(self)


def _common(req: JobRequest) -> dict[str, Any]:
    job: dict[str, Any] = {
        "name": req.name,
        "current_working_directory": req.workdir,
        "standard_output": req.stdout,
        "standard_error": req.stderr,
        "tasks_per_node": req.tasks_per_node,
    }
    if req.comment:
        job["comment"] = req.comment
    if req.cpus_per_task is not None:
        job["cpus_per_task"] = req.cpus_per_task
    if req.partition:
        job["partition"] = req.partition
    if req.account:
        job["account"] = req.account
    return job


def body_v0038(req: JobRequest) -> dict[str, Any]:
    job = _common(req)
    job.update(
        environment=dict(req.environment),
        nodes=str(req.nodes),
        time_limit=req.time_limit_min,
        no_requeue=True,
    )
    if req.gpus_per_node:
        job["gpus_per_node"] = str(req.gpus_per_node)
    if req.exclude:
        job["exclude_nodes"] = ",".join(req.exclude)
    return {"script": req.script, "job": job}


def body_v0040(req: JobRequest) -> dict[str, Any]:
    job = _common(req)
    job.update(
        script=req.script,
        environment=[f"{k}={v}" for k, v in req.environment.items()],
        nodes=str(req.nodes),
        time_limit={"set": True, "infinite": False, "number": req.time_limit_min},
        requeue=False,
    )
    if req.gpus_per_node:
        job["tres_per_node"] = f"gres/gpu:{req.gpus_per_node}"
    if req.exclude:
        job["excluded_nodes"] = list(req.exclude)
    return {"job": job}
