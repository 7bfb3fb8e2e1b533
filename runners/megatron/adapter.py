"""Adapter for Megatron-LM: resolve recipes with Megatron's own argument validation.

Megatron is never imported here: ``resolve_many`` runs ``runners.megatron.resolve_worker`` in a
subprocess (one for any number of recipes, so the import is paid once) whose environment holds
no secrets. ``launch`` and ``parse_metrics`` are not implemented yet: launching Megatron needs a
GPU backend.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from gate.errors import AttuneError
from gate.models import EffectiveConfig, Recipe, StepRecord
from runners.adapter import LaunchSpec
from runners.megatron.recipe import MegatronRecipe

MEGATRON_PATH_VAR = "ATTUNE_MEGATRON_PATH"
"""Directory of a Megatron-LM checkout to resolve with, instead of the installed megatron-core."""

INSTALL_HINT = (
    "install megatron-core (pip install triton typing_extensions && pip install --no-deps "
    "--ignore-requires-python megatron-core==0.19.2) or set ATTUNE_MEGATRON_PATH to a "
    "Megatron-LM checkout"
)

_PASSED_ENV = ("PATH", "HOME", "LANG", "LC_ALL")
"""The only variables of the caller's environment the worker sees (besides PYTHONPATH)."""

_REPO_ROOT = Path(__file__).resolve().parents[2]
WORKER_TIMEOUT_S = 300.0


def worker_env(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The worker's environment: PATH, HOME, LANG, LC_ALL and PYTHONPATH, nothing else.

    PYTHONPATH is the Megatron checkout from ATTUNE_MEGATRON_PATH (when set), then this
    repository, then the caller's PYTHONPATH. Tokens, keys and cloud credentials stay behind.
    """
    source = os.environ if environ is None else environ
    env = {k: source[k] for k in _PASSED_ENV if k in source}
    paths = []
    megatron_path = source.get(MEGATRON_PATH_VAR)
    if megatron_path:
        paths.append(megatron_path)
    paths.append(str(_REPO_ROOT))
    if source.get("PYTHONPATH"):
        paths.append(source["PYTHONPATH"])
    env["PYTHONPATH"] = os.pathsep.join(paths)
    return env


def flag_dest(token: str) -> str | None:
    """The default argparse dest of a ``--flag`` / ``--flag=value`` token; None for a value.

    A fallback only: the worker reports the real dests from Megatron's parser (``--fp8-format``
    stores ``fp8``, ``--no-mmap-bin-files`` stores ``mmap_bin_files``).
    """
    if not token.startswith("--") or len(token) == 2:
        return None
    name = token[2:].split("=", 1)[0]
    return name.replace("-", "_")


def _parse_body(recipe: Recipe) -> MegatronRecipe:
    try:
        return MegatronRecipe.model_validate(recipe.body)
    except ValidationError as exc:
        err = exc.errors()[0]
        key = ".".join(str(p) for p in err["loc"]) or None
        msg = err["msg"].removeprefix("Value error, ")
        raise AttuneError(msg.lower(), path=recipe.path, key=key) from None


def _run_worker(request: dict[str, Any]) -> dict[str, Any]:
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "runners.megatron.resolve_worker"],
            input=json.dumps(request),
            capture_output=True,
            text=True,
            env=worker_env(),
            cwd=_REPO_ROOT,
            timeout=WORKER_TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise AttuneError(
            f"Megatron resolve worker timed out after {WORKER_TIMEOUT_S:g} s"
        ) from None
    if proc.returncode != 0:
        tail = proc.stderr.strip().splitlines()[-1:] or [f"exit status {proc.returncode}"]
        if "No module named 'megatron" in proc.stderr:
            raise AttuneError(f"Megatron is not importable: {INSTALL_HINT}")
        raise AttuneError(f"Megatron resolve worker failed: {tail[0]}")
    answer: dict[str, Any] = json.loads(proc.stdout)
    return answer


class MegatronAdapter:
    """Megatron-LM as a framework: effective config from its parse_args + validate_args."""

    name = "megatron"

    def resolve(self, recipe: Recipe) -> EffectiveConfig:
        return self.resolve_many([recipe])[0]

    def resolve_many(self, recipes: Sequence[Recipe]) -> list[EffectiveConfig]:
        """Resolve ``recipes`` in one worker process; the first failing one is an AttuneError."""
        bodies = [_parse_body(r) for r in recipes]
        if not bodies:
            return []
        request = {
            "recipes": [
                {
                    "args": b.args,
                    "world_size": b.total_devices,
                    "gpu_arch": b.gpu_arch,
                    "env": b.env,
                }
                for b in bodies
            ]
        }
        answer = _run_worker(request)
        version = str(answer["version"])
        configs = []
        for recipe, body, result in zip(recipes, bodies, answer["results"], strict=True):
            if "error" in result:
                message = str(result["error"])
                key, sep, rest = message.partition(": ")
                if key == "args" and sep:
                    raise AttuneError(rest, path=recipe.path, key="args")
                raise AttuneError(message, path=recipe.path, key="args")
            dests = result.get("explicit")
            if dests is None:
                dests = [d for d in (flag_dest(t) for t in body.args) if d is not None]
            explicit = set(dests)
            explicit.update(f"env.{k}" for k in body.env)
            configs.append(
                EffectiveConfig(
                    framework=self.name,
                    framework_version=version,
                    values=result["values"],
                    env=result["env"],
                    explicit=sorted(explicit),
                    devices=body.total_devices,
                )
            )
        return configs

    def launch(
        self, effective: EffectiveConfig, *, steps: int, workdir: Path, profile: bool
    ) -> LaunchSpec:
        """Not implemented yet: Megatron runs need a GPU backend."""
        raise AttuneError("launching Megatron needs a GPU backend; attune gate check works")

    def parse_metrics(self, lines: Iterable[str]) -> list[StepRecord]:
        """Not implemented yet (nothing launches Megatron); no records."""
        return []
