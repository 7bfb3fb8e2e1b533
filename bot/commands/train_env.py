"""``attune train-env``: the GPU training environment a Megatron-LM or torchtitan benchmark runs in.

The bench action runs it on the self-hosted GPU runner before ``attune bench``. attune's own
virtual environment (CPU torch, the frameworks for resolving recipes) is not the one the
training runs in: that one needs a CUDA build of torch and the framework at the version the
training repository pins in its ``attune-bench.yml``. It is built once per (framework, version,
torch, CUDA) in the runner's tool cache and reused; what it makes is handed to the next steps
as runner settings (``ATTUNE_TRAIN_PYTHON``, ``ATTUNE_MEGATRON_PATH``) through ``$GITHUB_ENV``.
Megatron-LM is fetched first and pinned by commit or by content: the checkout must be the commit
its tag is pinned to (or the commit given), or, for a tag pinned by content only, its
``megatron/core`` and ``megatron/training`` Python files must be the released wheel's, before
anything of it is installed (``bot.commands.megatron_checkout``).

A runner whose administrator provides the environment sets ``ATTUNE_TRAIN_PYTHON`` (and
``ATTUNE_MEGATRON_PATH``) in the runner's own environment; nothing is built then.

The environment is built with its own interpreter, not attune's: Megatron-LM core_v0.19.0 needs
Python >= 3.12 (``runners.megatron.pins.MIN_PYTHON``), attune runs on 3.11. It is named by
``--python`` or the runner setting ``ATTUNE_TRAIN_INTERPRETER``, else found on PATH
or among pyenv's versions (``python3.14`` ... ``python3``, attune's own), each one asked for
its version; the oldest that is new enough is taken.
A Megatron-LM environment also gets Transformer Engine at the recipe's declared version (else
``runners.megatron.pins.TRANSFORMER_ENGINE``, the one the gate assumed), pybind11, and its
dataset helpers (``megatron/core/datasets/helpers_cpp``) built, so rank 0's ``make`` at
start-up (megatron/training/initialize.py:155-178) finds them up to date.

torch is installed first, from the pinned CUDA index; everything after it is installed under
the pip constraint ``torch==<pin>`` (``constraints.txt`` in the cache folder), so a framework
whose dependencies need another torch fails the build instead of silently replacing the pinned
one. Pins known to be incompatible (``runners.versions.TORCH_FLOORS``: torchtitan 0.3.0 needs
torch >= 2.11) are refused before anything is downloaded. The versions the training repository
should pin are ``runners.versions.PINS``, the set the gate resolves with.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from bot.commands.megatron_checkout import (
    checkout_megatron,
    pin_name,
    pinned_commit,
    release_of,
)
from bot.commands.train_interpreter import interpreter_version, training_interpreter
from bot.console import console
from bot.render.text import with_article
from gate.errors import AttuneError
from gate.recipe import load_recipe
from runners.megatron.pins import TRANSFORMER_ENGINE
from runners.versions import PINS, torch_problem

TORCH_INDEX = "https://download.pytorch.org/whl/{cuda}"
CONSTRAINTS = "constraints.txt"
"""In the cache folder: ``torch==<pin>``, the constraint every install after torch runs under."""
READY = ".ready"
"""Written last: a cache folder without it is a build that did not finish."""

VERSION = re.compile(r"^[0-9]+(\.[0-9]+){1,2}([.+-][A-Za-z0-9.]+)?$")
GIT_REF = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/-]{0,99}$")


class TrainEnvRequest(BaseModel):
    """What the training repository's ``attune-bench.yml`` pins."""

    torch: str = ""
    cuda: str = ""
    megatron: str = ""
    """A Megatron-LM tag ``runners.megatron.pins`` pins to a commit (``core_v0.19.0``,
    ``MEGATRON_COMMITS``) or to its released files (``core_v0.19.2``, ``MEGATRON_TREE_DIGESTS``),
    or a full 40-hex commit."""
    torchtitan: str = ""
    transformer_engine: str = ""
    """Megatron-LM: the Transformer Engine version; it must be the recipe's declared
    ``transformer_engine`` (or, undeclared, ``runners.megatron.pins.TRANSFORMER_ENGINE``), the
    version the gate checked the recipe against. Empty: that version."""
    python: str = ""
    """The interpreter the environment is built with (``--python``; else the runner setting
    ``ATTUNE_TRAIN_INTERPRETER``, else found on PATH)."""


def te_version(body: dict[str, Any], requested: str) -> str | None:
    """The Transformer Engine a Megatron-LM recipe's environment gets: its declared
    ``transformer_engine`` (None for ``none``), else the pin; a requested version that is not
    that one is refused (the gate judged the recipe against it)."""
    from packaging.version import InvalidVersion, Version

    declared = body.get("transformer_engine")
    if declared is not None and str(declared).lower() == "none":
        if requested:
            raise AttuneError(
                f"transformer-engine {requested} requested, but the recipe declares "
                "transformer_engine: none"
            )
        return None
    version = str(declared) if declared is not None else TRANSFORMER_ENGINE
    try:
        same = not requested or Version(requested) == Version(version)
    except InvalidVersion:
        same = False
    if not same:
        origin = "declares" if declared is not None else "declares none, so the gate assumed"
        raise AttuneError(
            f"transformer-engine {requested} requested, but the recipe {origin} "
            f"transformer_engine {version}: the runner must run the TE the gate checked the "
            "recipe against (set the recipe's transformer_engine, or pin the same version)"
        )
    return version


def _check(req: TrainEnvRequest, framework: str) -> None:
    problems = []
    if not VERSION.match(req.torch):
        problems.append(f"torch: a version such as {PINS.torch}, got {req.torch!r}")
    if not re.fullmatch(r"cu[0-9]{3}", req.cuda):
        problems.append(f"cuda: a CUDA wheel tag such as {PINS.cuda}, got {req.cuda!r}")
    if framework == "megatron" and not GIT_REF.match(req.megatron):
        problems.append(
            f"megatron: a Megatron-LM tag such as {PINS.megatron_tag}, got {req.megatron!r}"
        )
    if framework == "torchtitan" and not VERSION.match(req.torchtitan):
        problems.append(f"torchtitan: a version such as {PINS.torchtitan}, got {req.torchtitan!r}")
    if req.transformer_engine and not VERSION.match(req.transformer_engine):
        problems.append(f"transformer-engine: a version, got {req.transformer_engine!r}")
    if problems:
        raise AttuneError(
            "the GPU training environment is not pinned: "
            + "; ".join(problems)
            + " (set them in attune-bench.yml, or ATTUNE_TRAIN_PYTHON on the runner)"
        )
    if framework == "megatron":
        pinned_commit(req.megatron)  # a tag attune pins by neither commit nor content: refused
    version = release_of(req.megatron) if framework == "megatron" else req.torchtitan
    incompatible = torch_problem(framework, version, req.torch)
    if incompatible:
        raise AttuneError(
            f"the GPU training environment's pins do not fit together: {incompatible}; attune's "
            f"version set is torch {PINS.torch}, Megatron-LM {PINS.megatron_tag}, torchtitan "
            f"{PINS.torchtitan} (docs/gpu-runner.md)"
        )


def cache_key(framework: str, req: TrainEnvRequest, version: tuple[int, int] | None = None) -> str:
    """The cache folder's name: everything the build pins (the interpreter's minor version
    too, when known)."""
    pinned = req.torchtitan
    if framework == "megatron":  # the pin too: a build from an unverified checkout is not reused
        pinned = pin_name(req.megatron)
    te = f"-te{req.transformer_engine}" if req.transformer_engine else ""
    py = f"-py{version[0]}.{version[1]}" if version else ""
    key = f"{framework}-{pinned}-torch{req.torch}-{req.cuda}{te}{py}"
    return re.sub(r"[^A-Za-z0-9._-]", "_", key)


def plan(
    framework: str, req: TrainEnvRequest, folder: Path, *, python: str | None = None
) -> list[list[str]]:
    """The commands that build the environment in ``folder``, in order, with ``python`` (the
    training interpreter; attune's own when None). They run with the new venv's ``bin`` first
    on PATH, so ``python3`` in Megatron's helpers Makefile is the venv's. Megatron-LM's
    checkout (``folder/Megatron-LM``) is fetched and verified before them."""
    venv_python = str(folder / "venv" / "bin" / "python")
    base = [venv_python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    pip = [*base, "--constraint", str(folder / CONSTRAINTS)]  # torch stays the pinned one
    steps = [
        [python or sys.executable, "-m", "venv", str(folder / "venv")],
        [*base, f"torch=={req.torch}", "--index-url", TORCH_INDEX.format(cuda=req.cuda)],
    ]
    if framework == "megatron":
        checkout = str(folder / "Megatron-LM")
        steps.append([*pip, checkout, "pybind11"])
        if req.transformer_engine:
            steps.append(
                [
                    *pip,
                    "--no-build-isolation",
                    f"transformer_engine[pytorch]=={req.transformer_engine}",
                ]
            )
        steps.append([venv_python, "-c", LINK_CONFIG, str(folder / "venv" / "bin")])
        steps.append(["make", "-C", str(Path(checkout) / HELPERS)])
    else:
        steps.append([*pip, f"torchtitan=={req.torchtitan}"])
    return steps


def constraints(req: TrainEnvRequest) -> str:
    """The pip constraints file every install after torch's runs under: the pinned torch
    (``2.11.0`` also admits the CUDA index's ``2.11.0+cu128``, which is what is installed)."""
    return f"torch=={req.torch}\n"


HELPERS = "megatron/core/datasets"
"""Megatron's dataset helpers: ``make`` there builds ``helpers_cpp<EXT_SUFFIX>`` with
``python3 -m pybind11 --includes`` and ``python3-config --extension-suffix`` from PATH."""

LINK_CONFIG = (
    "import os, sys, sysconfig; v = sys.version_info; "
    "src = os.path.join(sysconfig.get_config_var('BINDIR'), f'python{v[0]}.{v[1]}-config'); "
    "dst = os.path.join(sys.argv[1], 'python3-config'); "
    "os.path.exists(src) or sys.exit(f'no {src}: the interpreter has no development files "
    "(python3-config, Python.h); Megatron builds its dataset helpers with them'); "
    "os.path.lexists(dst) or os.symlink(src, dst)"
)
"""A venv has no ``python3-config``; the Makefile would take another Python's from PATH and name
the helpers for that Python. The venv gets its own interpreter's."""


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
    if cache.exists() and not cache.is_dir():
        raise AttuneError(
            "is not a directory; --cache takes the runner's tool cache folder", path=str(cache)
        )
    if github_env is not None and github_env.is_dir():
        raise AttuneError(
            "is a directory; --github-env takes a file to append to", path=str(github_env)
        )
    framework = load_recipe(recipe_path).framework
    if framework not in ("megatron", "torchtitan"):
        console.print(
            f"{with_article(framework)} recipe runs in attune's own environment: nothing to prepare"
        )
        return 0
    if os.environ.get("ATTUNE_TRAIN_PYTHON"):
        console.print("the runner provides ATTUNE_TRAIN_PYTHON: nothing to prepare")
        return 0
    _check(req, framework)
    if framework == "megatron":
        te = te_version(load_recipe(recipe_path).body, req.transformer_engine)
        req = req.model_copy(update={"transformer_engine": te or ""})
    python = training_interpreter(framework, req.python)
    version = interpreter_version(python)
    folder = (cache / "attune-train" / cache_key(framework, req, version)).resolve()
    if not (folder / READY).is_file():
        shutil.rmtree(folder, ignore_errors=True)  # an interrupted build
        folder.mkdir(parents=True)
        (folder / CONSTRAINTS).write_text(constraints(req))
        if framework == "megatron":  # verified before anything of it is installed or run
            checkout_megatron(req.megatron, folder / "Megatron-LM")
        path = f"{folder / 'venv' / 'bin'}{os.pathsep}{os.environ.get('PATH', os.defpath)}"
        env = {**os.environ, "PATH": path}
        for command in plan(framework, req, folder, python=python):
            console.print(f"$ {' '.join(command)}", markup=False, highlight=False)
            done = subprocess.run(command, check=False, env=env)
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
