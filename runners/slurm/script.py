"""A launch rendered as a Slurm batch job: the script, its environment and its resources.

The script runs the launch once per node under ``srun``; a multi-node torchrun launch gets a
c10d rendezvous on the allocation's first node (torchrun's own flags for it replace whatever
rendezvous the launch named). Stdout and stderr go to the files the backend reads back
(``stdout.jsonl``, ``launch.log``), as with the local backend.
"""

from __future__ import annotations

import math
import shlex
from pathlib import Path

from gate.errors import AttuneError
from runners.adapter import LaunchSpec
from runners.launch_env import launch_environment
from runners.slurm.jobdesc import JobRequest

PROJECT_ROOT = Path(__file__).resolve().parents[2]
STDOUT, STDERR = "stdout.jsonl", "launch.log"
RDZV_PORT = 29500
_RDZV_FLAGS = (
    "--nnodes",
    "--rdzv-backend",
    "--rdzv_backend",
    "--rdzv-endpoint",
    "--rdzv_endpoint",
    "--rdzv-id",
    "--rdzv_id",
    "--node-rank",
    "--node_rank",
    "--master-addr",
    "--master_addr",
    "--master-port",
    "--master_port",
)
"""torchrun flags that say where the ranks meet: replaced on a multi-node allocation."""


def job_environment(spec: LaunchSpec, environ: dict[str, str] | None = None) -> dict[str, str]:
    """What the job sees (``runners.launch_env``): the bot's named safe variables, the
    recipe's ``env`` held to its framework's allow-list again (a name that is not on it never
    reaches Slurm: an ``EnvRefused``), and ``PYTHONPATH`` for attune's checkout. Nothing else of
    the bot's environment (no token, no keys) is sent to Slurm."""
    return launch_environment(spec, environ)


def _launcher_end(argv: list[str]) -> int | None:
    """Index just after the torchrun command in ``argv`` (``torchrun`` or ``python -m
    torch.distributed.run``), None when the launch is not torchrun."""
    if argv and Path(argv[0]).name == "torchrun":
        return 1
    for i in range(min(len(argv) - 1, 3)):
        if argv[i] == "-m" and argv[i + 1] == "torch.distributed.run":
            return i + 2
    return None


def command_line(argv: list[str], nodes: int) -> str:
    """The launch as a shell command; torchrun on several nodes meets at the first node."""
    end = _launcher_end(argv)
    if nodes == 1 or end is None:
        return shlex.join(argv)
    port, rest, i = RDZV_PORT, [], end
    while i < len(argv):
        token = argv[i]
        flag, has_value, value = token.partition("=")
        if flag in _RDZV_FLAGS or token == "--standalone":
            if flag in ("--rdzv-endpoint", "--rdzv_endpoint"):
                endpoint = value if has_value else (argv[i + 1] if i + 1 < len(argv) else "")
                port = int(endpoint.rpartition(":")[2] or RDZV_PORT)
            if token != "--standalone" and not has_value:
                i += 1  # the flag's value is the next token
        elif not token.startswith("-"):
            rest.extend(argv[i:])  # the training script and its own arguments
            break
        else:
            rest.append(token)
        i += 1
    rdzv = (
        f"--nnodes={nodes} --rdzv-backend=c10d "
        f'--rdzv-endpoint="$ATTUNE_RDZV_HOST":{port} --rdzv-id="$SLURM_JOB_ID"'
    )
    return f"{shlex.join(argv[:end])} {rdzv} {shlex.join(rest)}".rstrip()


def render_script(spec: LaunchSpec, *, title: str) -> str:
    """The batch script: ``srun`` runs the launch once on each node of the allocation."""
    per_node = devices_per_node(spec)
    srun = ["srun", f"--nodes={spec.nodes}", f"--ntasks={spec.nodes}", "--ntasks-per-node=1"]
    srun += ["--kill-on-bad-exit=1"]
    if spec.device_kind == "gpu":
        srun.append(f"--gpus-per-node={per_node}")
    else:
        srun.append(f"--cpus-per-task={per_node * spec.cpus_per_device}")
    lines = ["#!/bin/bash", f"# attune: {title}, rendered by runners/slurm/script.py", "set -u"]
    if spec.nodes > 1 and _launcher_end(spec.argv) is not None:
        lines.append(
            'ATTUNE_RDZV_HOST="$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)"'
        )
        lines.append("export ATTUNE_RDZV_HOST")
    lines.append(f"exec {shlex.join(srun)} {command_line(spec.argv, spec.nodes)}")
    return "\n".join(lines) + "\n"


def devices_per_node(spec: LaunchSpec) -> int:
    if spec.devices % spec.nodes:
        raise AttuneError(
            f"the launch's {spec.devices} devices do not split evenly over {spec.nodes} nodes"
        )
    return spec.devices // spec.nodes


def job_request(
    spec: LaunchSpec,
    *,
    workdir: Path,
    timeout_s: float,
    partition: str | None,
    account: str | None,
    margin_min: int,
    exclude: list[str],
) -> JobRequest:
    """The batch job for ``spec`` run in ``workdir`` under a wall-clock limit of
    ``timeout_s``: Slurm's time limit is that, rounded up to minutes, plus ``margin_min``."""
    per_node = devices_per_node(spec)
    title = f"trial {workdir.name}"
    return JobRequest(
        name=f"attune-{workdir.name}",
        script=render_script(spec, title=title),
        workdir=str(workdir),
        stdout=str(workdir / STDOUT),
        stderr=str(workdir / STDERR),
        environment=job_environment(spec),
        nodes=spec.nodes,
        tasks_per_node=1,
        cpus_per_task=per_node * spec.cpus_per_device if spec.device_kind == "cpu" else None,
        gpus_per_node=per_node if spec.device_kind == "gpu" else None,
        partition=partition,
        account=account,
        time_limit_min=max(1, math.ceil(timeout_s / 60)) + margin_min,
        exclude=exclude,
        comment=str(workdir),
    )
