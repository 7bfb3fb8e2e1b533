"""``attune doctor RECIPE``: does this machine run RECIPE, before anything is charged?

One line per check, ``ok`` or ``FAIL`` with what to do; exit 1 on any failure; ``--json``. The
checks ask the *training* interpreter (``ATTUNE_TRAIN_PYTHON``, else attune's own), in a child
process, what it has: its Python, torch and its CUDA build, the GPUs it sees (count,
architecture, memory), NCCL, Transformer Engine and Megatron-LM's dataset helpers, or
torchtitan with its local tokenizer and dataset; then the free disk of the work folder. On a CPU
machine it says precisely which of them are missing.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from bot.console import console
from bot.render.text import with_article
from gate.errors import AttuneError
from gate.recipe import load_recipe
from runners.megatron.pins import MIN_PYTHON
from runners.runner_settings import RunnerSettings
from runners.torchtitan.offline import OfflineData

MIN_FREE_DISK_GIB = 20.0
"""Room for a campaign's logs, traces and the training environment's caches."""

PROBE = r"""
import json, sys, sysconfig
out = {"python": list(sys.version_info[:2]), "ext_suffix": sysconfig.get_config_var("EXT_SUFFIX")}
try:
    import torch
    out["torch"] = torch.__version__
    out["cuda"] = torch.version.cuda
    out["gpus"] = torch.cuda.device_count() if torch.cuda.is_available() else 0
    out["capabilities"] = [list(torch.cuda.get_device_capability(i)) for i in range(out["gpus"])]
    out["memory"] = [torch.cuda.get_device_properties(i).total_memory for i in range(out["gpus"])]
    out["names"] = [torch.cuda.get_device_name(i) for i in range(out["gpus"])]
    try:
        out["nccl"] = ".".join(map(str, torch.cuda.nccl.version())) if out["gpus"] else None
    except Exception as exc:
        out["nccl_error"] = f"{type(exc).__name__}: {exc}"
except Exception as exc:
    out["torch_error"] = f"{type(exc).__name__}: {exc}"
for name in sys.argv[1:]:
    try:
        module = __import__(name)
        out[name] = getattr(module, "__version__", "?")
    except Exception as exc:
        out[name + "_error"] = f"{type(exc).__name__}: {exc}"
print(json.dumps(out))
"""


class Check(BaseModel):
    name: str
    ok: bool
    detail: str
    """What was found; for a failure, what to do."""


def probe(python: str, modules: list[str]) -> dict[str, Any]:
    """What ``python`` has (see ``PROBE``); AttuneError when it does not run."""
    try:
        done = subprocess.run(
            [python, "-c", PROBE, *modules], capture_output=True, text=True, timeout=300
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise AttuneError(f"the training interpreter {python} does not run: {exc}") from None
    if done.returncode != 0 or not done.stdout.strip():
        raise AttuneError(f"the training interpreter {python} failed: {done.stderr.strip()[-400:]}")
    found: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return found


def _arch(capability: list[int]) -> str:
    return f"sm{capability[0]}{capability[1]}"


def gpu_checks(found: dict[str, Any], *, per_node: int, arch: str | None) -> list[Check]:
    """torch's CUDA build, the GPUs (count, architecture, memory) and NCCL."""
    if "torch_error" in found:
        return [Check(name="torch", ok=False, detail=f"not importable ({found['torch_error']})")]
    checks = [Check(name="torch", ok=True, detail=str(found["torch"]))]
    cuda = found.get("cuda")
    checks.append(
        Check(name="torch CUDA build", ok=True, detail=f"CUDA {cuda}")
        if cuda
        else Check(
            name="torch CUDA build",
            ok=False,
            detail=f"torch {found['torch']} is a CPU build: install the CUDA wheel "
            "(attune train-env --cuda cu128 ...)",
        )
    )
    gpus = int(found.get("gpus") or 0)
    short = "" if gpus >= per_node else " per node (CUDA_VISIBLE_DEVICES, the driver)"
    checks.append(
        Check(
            name="GPUs",
            ok=gpus >= per_node,
            detail=f"{gpus} visible, the recipe needs {per_node}{short}",
        )
    )
    seen = sorted({_arch(c) for c in found.get("capabilities", [])})
    if arch is not None:
        checks.append(
            Check(
                name="GPU architecture",
                ok=seen == [arch],
                detail=f"{', '.join(seen) or 'none'}; the recipe declares gpu_arch {arch}",
            )
        )
    memory = found.get("memory") or []
    checks.append(
        Check(
            name="device memory",
            ok=bool(memory),
            detail=f"{min(memory) / 1024**3:.1f} GiB per device" if memory else "no device",
        )
    )
    nccl = found.get("nccl")
    checks.append(
        Check(
            name="NCCL",
            ok=bool(nccl),
            detail=f"NCCL {nccl}" if nccl else found.get("nccl_error", "no GPU, no NCCL"),
        )
    )
    return checks


def megatron_checks(
    found: dict[str, Any], body: dict[str, Any], settings: RunnerSettings
) -> list[Check]:
    from bot.commands.train_env import te_version

    checks = []
    te = te_version(body, "")
    have = found.get("transformer_engine")
    if te is not None:
        checks.append(
            Check(
                name="Transformer Engine",
                ok=have is not None and have.split("+")[0].startswith(te),
                detail=f"{have or 'not importable'}; the gate checked the recipe against {te}"
                + ("" if have else " (attune train-env installs it)"),
            )
        )
    if settings.megatron_path is None:
        unset = "ATTUNE_MEGATRON_PATH is not set (attune train-env sets it)"
        checks.append(Check(name="Megatron-LM", ok=False, detail=unset))
        return checks
    helpers = settings.megatron_path / "megatron" / "core" / "datasets"
    built = helpers / f"helpers_cpp{found.get('ext_suffix') or ''}"
    checks.append(
        Check(
            name="Megatron dataset helpers",
            ok=built.is_file(),
            detail=str(built)
            if built.is_file()
            else f"{built} missing: make -C {helpers} "
            "with the training venv first on PATH (attune train-env builds it)",
        )
    )
    args = list(body.get("args", []))
    if "--mock-data" not in args:
        for flag in ("--data-path", "--tokenizer-model"):
            if flag in args and args.index(flag) + 1 < len(args):
                path = Path(args[args.index(flag) + 1])
                present = path.exists() or any(path.parent.glob(path.name + ".*"))
                checks.append(Check(name=flag.lstrip("-"), ok=present, detail=str(path)))
    return checks


def doctor_checks(recipe_path: Path, *, workdir: Path) -> list[Check]:
    """Every check for ``recipe_path`` on this machine."""
    recipe = load_recipe(recipe_path)
    framework = recipe.framework
    if framework not in ("megatron", "torchtitan"):
        raise AttuneError(
            f"{with_article(framework)} recipe runs on attune's own CPU workload: no GPU checks"
        )
    body = recipe.body
    settings = RunnerSettings.from_env()
    modules = ["transformer_engine", "megatron"] if framework == "megatron" else ["torchtitan"]
    found = probe(settings.python, modules)
    need = MIN_PYTHON if framework == "megatron" else (3, 10)
    have = tuple(found["python"])
    checks = [
        Check(
            name="interpreter",
            ok=have >= need,
            detail=f"{settings.python}: Python {have[0]}.{have[1]}"
            + ("" if have >= need else f"; {framework} needs >= {need[0]}.{need[1]} "
               "(attune train-env builds one; ATTUNE_TRAIN_PYTHON names it)"),
        )
    ]  # fmt: skip
    world = int(body.get("world_size") or 0) or int(body["nodes"]) * int(body["gpus_per_node"])
    per_node = int(body.get("gpus_per_node") or world)
    checks += gpu_checks(found, per_node=per_node, arch=body.get("gpu_arch"))
    if framework == "megatron":
        checks += megatron_checks(found, body, settings)
    else:
        version = found.get("torchtitan")
        checks.append(
            Check(name="torchtitan", ok=version is not None,
                  detail=version or found.get("torchtitan_error", "not importable"))
        )  # fmt: skip
        problems = OfflineData.from_env().problems()
        checks.append(
            Check(name="tokenizer and dataset", ok=not problems,
                  detail="; ".join(problems) or "local (ATTUNE_TORCHTITAN_ASSETS, _DATASET)")
        )  # fmt: skip
    where = workdir if workdir.exists() else Path.cwd()
    free = shutil.disk_usage(where).free / 1024**3
    checks.append(
        Check(name="free disk", ok=free >= MIN_FREE_DISK_GIB,
              detail=f"{free:.0f} GiB free at {where} (>= {MIN_FREE_DISK_GIB:.0f} wanted)")
    )  # fmt: skip
    return checks


def doctor(recipe_path: Path, *, workdir: Path, as_json: bool) -> int:
    checks = doctor_checks(recipe_path, workdir=workdir)
    failed = [c for c in checks if not c.ok]
    if as_json:
        payload = {"ok": not failed, "checks": [c.model_dump() for c in checks]}
        sys.stdout.write(json.dumps(payload, indent=2) + "\n")
    else:
        for c in checks:
            line = f"{'ok  ' if c.ok else 'FAIL'} {c.name}: {c.detail}"
            console.print(line, markup=False, highlight=False, soft_wrap=True)
    return 1 if failed else 0
