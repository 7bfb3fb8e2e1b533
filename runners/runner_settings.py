"""What the machine that runs a benchmark says about itself: where the framework is, which
interpreter and launcher to use, what of its environment a launch may see.

These come from the runner's own environment (the self-hosted runner's service, the Slurm
job's), never from a recipe: a candidate pull request cannot point a launch at other code.
"""

from __future__ import annotations

import os
import shlex
import sys
from collections.abc import Mapping
from pathlib import Path

from pydantic import BaseModel, Field

from gate.env_allowlist import secret_like
from gate.errors import AttuneError

BASE_ENV = (
    "PATH",
    "HOME",
    "USER",
    "LANG",
    "LC_ALL",
    "TMPDIR",
    "CUDA_VISIBLE_DEVICES",
    "CUDA_HOME",
    "LD_LIBRARY_PATH",
    "HF_HOME",
    "HF_HUB_OFFLINE",
)
"""Variables every launch inherits from the runner (``runners.launch_env``); everything else
must be named by ``ATTUNE_LAUNCH_PASS_ENV``."""


class RunnerSettings(BaseModel):
    """The runner's launch settings (``ATTUNE_*`` variables of the runner's environment)."""

    python: str = Field(default_factory=lambda: sys.executable)
    """``ATTUNE_TRAIN_PYTHON``: the interpreter with the framework and a CUDA torch."""
    launcher: list[str] | None = None
    """``ATTUNE_LAUNCHER``: the command that starts the ranks, before its own flags (default:
    ``<python> -m torch.distributed.run``)."""
    megatron_path: Path | None = None
    """``ATTUNE_MEGATRON_PATH``: a Megatron-LM checkout (``pretrain_gpt.py`` is not in the
    megatron-core wheel)."""
    rdzv_endpoint: str = "127.0.0.1:29500"
    """``ATTUNE_RDZV_ENDPOINT``: the c10d rendezvous of a multi-node launch (first node)."""
    pass_env: list[str] = Field(default_factory=list)
    """``ATTUNE_LAUNCH_PASS_ENV`` (comma-separated): more of the runner's variables a launch
    may see (``NCCL_SOCKET_IFNAME``, ``NCCL_IB_HCA``...). Never secrets."""
    hang_timeout_s: float = 300.0
    """``ATTUNE_HANG_TIMEOUT_S``: no new output line for this long and the launch is killed
    as hung (charged like any other run). Below the default 600 s run limit; one at or past a
    run's limit is cut to half of it (``runners.supervise.hang_limit``)."""

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> RunnerSettings:
        env = os.environ if environ is None else environ
        values: dict[str, object] = {}
        if env.get("ATTUNE_TRAIN_PYTHON"):
            values["python"] = env["ATTUNE_TRAIN_PYTHON"]
        if env.get("ATTUNE_LAUNCHER"):
            values["launcher"] = shlex.split(env["ATTUNE_LAUNCHER"])
        if env.get("ATTUNE_MEGATRON_PATH"):
            values["megatron_path"] = Path(env["ATTUNE_MEGATRON_PATH"])
        if env.get("ATTUNE_RDZV_ENDPOINT"):
            values["rdzv_endpoint"] = env["ATTUNE_RDZV_ENDPOINT"]
        if env.get("ATTUNE_LAUNCH_PASS_ENV"):
            names = [v.strip() for v in env["ATTUNE_LAUNCH_PASS_ENV"].split(",") if v.strip()]
            for name in names:
                if secret_like(name) or name.startswith("ATTUNE_"):
                    raise AttuneError(
                        f"ATTUNE_LAUNCH_PASS_ENV names {name}, which looks like a credential or "
                        "attune's own setting: a launch never sees those"
                    )
            values["pass_env"] = names
        if env.get("ATTUNE_HANG_TIMEOUT_S"):
            try:
                values["hang_timeout_s"] = float(env["ATTUNE_HANG_TIMEOUT_S"])
            except ValueError:
                raise AttuneError(
                    f"ATTUNE_HANG_TIMEOUT_S must be seconds, got {env['ATTUNE_HANG_TIMEOUT_S']!r}"
                ) from None
        return cls.model_validate(values)

    def torchrun(self, *, nodes: int, gpus_per_node: int) -> list[str]:
        """The launcher and its flags for ``nodes`` x ``gpus_per_node`` ranks."""
        launcher = self.launcher or [self.python, "-m", "torch.distributed.run"]
        flags = [f"--nnodes={nodes}", f"--nproc-per-node={gpus_per_node}"]
        if nodes > 1:
            flags += ["--rdzv-backend=c10d", f"--rdzv-endpoint={self.rdzv_endpoint}"]
        else:
            flags += ["--standalone"]
        return [*launcher, *flags]
