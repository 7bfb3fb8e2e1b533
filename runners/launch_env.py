"""The one builder of a launch's environment, used by every backend (local, Slurm, the
Actions bench job through ``attune bench``).

A launch sees the runner's named safe variables (``BASE_ENV``, the operator's
``ATTUNE_LAUNCH_PASS_ENV``, the adapter's own ``pass_env``), then the recipe's ``env``, which is
checked against its framework's allow-list once more here (defence in depth: the recipe was
checked when it was parsed), then ``PYTHONPATH`` for attune's checkout. Nothing else of the
runner's environment (API keys, tokens, cloud credentials) reaches a run.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from gate.env_allowlist import EnvRefused, secret_like
from gate.registry import recipe_allowlist
from runners.adapter import LaunchSpec
from runners.runner_settings import BASE_ENV, RunnerSettings

PROJECT_ROOT = Path(__file__).resolve().parent.parent


def recipe_env_refusal(spec: LaunchSpec) -> EnvRefused | None:
    """The refusal of the launch's recipe ``env`` by its framework's allow-list (of every
    variable, when the launch names no framework), or None."""
    if not spec.env:
        return None
    if not spec.framework:
        problems = [
            (f"env.{n}", f"env.{n}: a launch that names no framework may set none")
            for n in spec.env
        ]
        return EnvRefused(problems, path=None)
    return recipe_allowlist(spec.framework).refusal(spec.env, path=None)


def launch_environment(
    spec: LaunchSpec, environ: Mapping[str, str] | None = None
) -> dict[str, str]:
    """What the launch's processes see. A recipe variable that is not allowed is an
    ``EnvRefused`` (nothing starts); a secret-like name among the runner's is never passed."""
    refusal = recipe_env_refusal(spec)
    if refusal is not None:
        raise refusal
    source = os.environ if environ is None else environ
    settings = RunnerSettings.from_env(source)
    names = [*BASE_ENV, *settings.pass_env, *spec.pass_env]
    env = {k: source[k] for k in names if k in source and not secret_like(k)}
    env.update(spec.env)
    env.setdefault("PATH", os.defpath)
    # the training interpreter's bin first: Megatron's rank 0 runs `make` for its dataset
    # helpers with `python3` and `python3-config` from PATH (megatron/core/datasets/Makefile)
    first = str(Path(settings.python).parent)
    rest = [p for p in env["PATH"].split(os.pathsep) if p != first]
    env["PATH"] = os.pathsep.join([first, *rest])
    env["PYTHONPATH"] = str(PROJECT_ROOT)  # the launch imports runners.* from this checkout
    return env
