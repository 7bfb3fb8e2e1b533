"""``attune train-env``: the GPU training environment a Megatron-LM or torchtitan benchmark runs in.

The bench action runs it on the self-hosted GPU runner before ``attune bench``. attune's own
virtual environment (CPU torch, the frameworks for resolving recipes) is not the one the
training runs in: that one needs a CUDA build of torch and the framework at the version the
training repository pins in its ``attune-bench.yml``. It is built once per (framework, version,
torch, CUDA) in the runner's tool cache and reused; what it makes is handed to the next steps
as runner settings (``ATTUNE_TRAIN_PYTHON``, ``ATTUNE_MEGATRON_PATH``) through ``$GITHUB_ENV``.

A runner whose administrator provides the environment sets ``ATTUNE_TRAIN_PYTHON`` (and
``ATTUNE_MEGATRON_PATH``) in the runner's own environment; nothing is built then.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from pydantic import BaseModel

from bot.console import console
from gate.errors import AttuneError
from gate.recipe import load_recipe

MEGATRON_REPO = "https://github.com/NVIDIA/Megatron-LM"
TORCH_INDEX = "https://download.pytorch.org/whl/{cuda}"
READY = ".ready"
"""Written last: a cache folder without it is a build that did not finish."""

VERSION = re.compile(r"^[0-9]+(\.[0-9]+){1,2}([.+-][A-Za-z0-9.]+)?$")
GIT_REF = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/-]{0,99}$")


class TrainEnvRequest(BaseModel):
    """What the training repository's ``attune-bench.yml`` pins."""

    torch: str = ""
    cuda: str = ""
    megatron: str = ""
    """A Megatron-LM git tag or branch (``core_v0.19.0``)."""
    torchtitan: str = ""
    transformer_engine: str = ""
    """Optional: a Transformer Engine version for FP8 Megatron-LM recipes."""


def _check(req: TrainEnvRequest, framework: str) -> None:
    problems = []
    if not VERSION.match(req.torch):
        problems.append(f"torch: a version such as 2.9.0, got {req.torch!r}")
    if not re.fullmatch(r"cu[0-9]{3}", req.cuda):
        problems.append(f"cuda: a CUDA wheel tag such as cu128, got {req.cuda!r}")
    if framework == "megatron" and not GIT_REF.match(req.megatron):
        problems.append(f"megatron: a Megatron-LM tag such as core_v0.19.0, got {req.megatron!r}")
    if framework == "torchtitan" and not VERSION.match(req.torchtitan):
        problems.append(f"torchtitan: a version such as 0.3.0, got {req.torchtitan!r}")
    if req.transformer_engine and not VERSION.match(req.transformer_engine):
        problems.append(f"transformer-engine: a version, got {req.transformer_engine!r}")
    if problems:
        raise AttuneError(
            "the GPU training environment is not pinned: "
            + "; ".join(problems)
            + " (set them in attune-bench.yml, or ATTUNE_TRAIN_PYTHON on the runner)"
        )


def cache_key(framework: str, req: TrainEnvRequest) -> str:
    version = req.megatron if framework == "megatron" else req.torchtitan
    te = f"-te{req.transformer_engine}" if req.transformer_engine else ""
    key = f"{framework}-{version}-torch{req.torch}-{req.cuda}{te}"
    return re.sub(r"[^A-Za-z0-9._-]", "_", key)


def plan(framework: str, req: TrainEnvRequest, folder: Path) -> list[list[str]]:
    """The commands that build the environment in ``folder``, in order."""
    python = str(folder / "venv" / "bin" / "python")
    pip = [python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    steps = [
        [sys.executable, "-m", "venv", str(folder / "venv")],
        [*pip, f"torch=={req.torch}", "--index-url", TORCH_INDEX.format(cuda=req.cuda)],
    ]
    if framework == "megatron":
        checkout = str(folder / "Megatron-LM")
        steps.append(["git", "clone", "--quiet", "--depth", "1", "--branch", req.megatron,
                      MEGATRON_REPO, checkout])  # fmt: skip
        steps.append([*pip, checkout])
        if req.transformer_engine:
            steps.append(
                [
                    *pip,
                    "--no-build-isolation",
                    f"transformer_engine[pytorch]=={req.transformer_engine}",
                ]
            )
    else:
        steps.append([*pip, f"torchtitan=={req.torchtitan}"])
    return steps


def settings_for(framework: str, folder: Path) -> dict[str, str]:
    """The runner settings the environment in ``folder`` stands for."""
    found = {"ATTUNE_TRAIN_PYTHON": str(folder / "venv" / "bin" / "python")}
    if framework == "megatron":
        found["ATTUNE_MEGATRON_PATH"] = str(folder / "Megatron-LM")
    return found


def train_env(
    recipe_path: Path, req: TrainEnvRequest, *, cache: Path, github_env: Path | None
) -> int:
    """Prepare (or reuse) the environment for ``recipe_path``'s framework; exit 0 when ready."""
    framework = load_recipe(recipe_path).framework
    if framework not in ("megatron", "torchtitan"):
        console.print(f"a {framework} recipe runs in attune's own environment: nothing to prepare")
        return 0
    if os.environ.get("ATTUNE_TRAIN_PYTHON"):
        console.print("the runner provides ATTUNE_TRAIN_PYTHON: nothing to prepare")
        return 0
    _check(req, framework)
    folder = (cache / "attune-train" / cache_key(framework, req)).resolve()
    if not (folder / READY).is_file():
        shutil.rmtree(folder, ignore_errors=True)  # an interrupted build
        folder.mkdir(parents=True)
        for command in plan(framework, req, folder):
            console.print(f"$ {' '.join(command)}")
            done = subprocess.run(command, check=False)
            if done.returncode != 0:
                raise AttuneError(f"building the training environment failed: {command[:4]}...")
        (folder / READY).write_text("")
    settings = settings_for(framework, folder)
    for name, value in settings.items():
        console.print(f"{name}={value}")
    if github_env is not None:
        with github_env.open("a") as out:
            out.writelines(f"{name}={value}\n" for name, value in settings.items())
    return 0
