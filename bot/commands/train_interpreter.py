"""Which Python builds a framework's training environment (``attune train-env``): the one
named (``--python`` or ``ATTUNE_TRAIN_INTERPRETER``) when it runs and is new enough, else the
oldest new enough found on PATH, among pyenv's versions, or attune's own."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from gate.errors import AttuneError
from runners.megatron.pins import MIN_PYTHON

INTERPRETER_VAR = "ATTUNE_TRAIN_INTERPRETER"
CANDIDATES = ("python3.14", "python3.13", "python3.12", "python3.11", "python3.10", "python3")
"""Interpreters looked for on PATH, newest first."""
MIN_PYTHON_FOR = {"megatron": MIN_PYTHON, "torchtitan": (3, 10)}
"""torchtitan 0.3.0 declares requires-python >= 3.10."""


def interpreter_version(python: str) -> tuple[int, int] | None:
    """``python``'s (major, minor), asked of the interpreter itself; None when it does not run
    (a pyenv shim of a version that is not selected fails here, as it would in the build)."""
    try:
        done = subprocess.run(
            [python, "-c", "import sys; print(sys.version_info[0], sys.version_info[1])"],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    parts = done.stdout.split()
    if done.returncode != 0 or len(parts) != 2 or not all(p.isdigit() for p in parts):
        return None
    return int(parts[0]), int(parts[1])


def _pyenv_interpreters() -> list[str]:
    """The interpreters pyenv has installed, newest first: a pyenv shim runs only the versions
    pyenv selects, so ``python3.12`` on PATH may fail while pyenv holds a 3.12."""
    if shutil.which("pyenv") is None:
        return []
    try:
        root = subprocess.run(["pyenv", "root"], capture_output=True, text=True, timeout=30)
        bare = subprocess.run(
            ["pyenv", "versions", "--bare"], capture_output=True, text=True, timeout=30
        )
    except (OSError, subprocess.TimeoutExpired):
        return []
    found = []
    for name in bare.stdout.split():
        match = re.fullmatch(r"(\d+)\.(\d+)\.\d+", name)
        if match:
            minor = (int(match[1]), int(match[2]))
            path = (
                Path(root.stdout.strip())
                / "versions"
                / name
                / "bin"
                / f"python{match[1]}.{match[2]}"
            )
            found.append((minor, str(path)))
    return [path for _, path in sorted(found, reverse=True)]


def training_interpreter(framework: str, named: str = "") -> str:
    """The interpreter to build ``framework``'s environment with: ``named`` (or
    ``ATTUNE_TRAIN_INTERPRETER``) when it runs and is new enough, else the oldest new enough
    of ``CANDIDATES`` on PATH, pyenv's versions and attune's own. AttuneError saying how to
    get one."""
    need = MIN_PYTHON_FOR[framework]
    wanted = ".".join(map(str, need))
    named = named or os.environ.get(INTERPRETER_VAR, "")
    if named:
        found = interpreter_version(named)
        if found is None:
            raise AttuneError(f"the training interpreter {named!r} does not run")
        if found < need:
            raise AttuneError(
                f"the training interpreter {named} is Python {found[0]}.{found[1]}; {framework} "
                f"needs Python >= {wanted}"
            )
        return named
    tried: list[str] = []
    usable: list[tuple[tuple[int, int], str]] = []
    for name in (*CANDIDATES, *_pyenv_interpreters(), sys.executable):
        path = shutil.which(name) or (name if os.path.isabs(name) else None)
        if path is None or path in tried:
            continue
        tried.append(path)
        found = interpreter_version(path)
        if found is not None and found >= need:
            usable.append((found, path))
    if usable:  # the oldest that is new enough: the widest choice of prebuilt wheels
        return min(usable, key=lambda item: item[0])[1]
    raise AttuneError(
        f"{framework} needs Python >= {wanted} for its training environment and none was found "
        f"(tried {', '.join(CANDIDATES)} on PATH, pyenv's versions and attune's own Python "
        f"{sys.version_info[0]}.{sys.version_info[1]}): install one (pyenv install {wanted}, "
        f"uv python install {wanted}, or the distribution's python{wanted}) and name it with "
        f"--python or {INTERPRETER_VAR}"
    )
