"""Resolve torchtitan recipes with torchtitan's own ConfigManager and the trainer's derivations.

Run as ``python -m runners.torchtitan.resolve_worker``: reads
``{"recipes": [{"module": ..., "config": ..., "overrides": [...], "world_size": N,
"env": {...}, "gpu_arch": "sm90" | null}, ...]}`` on stdin and writes ``{"version": ...,
"results": [...]}`` on stdout, one result per recipe: ``{"values": ..., "env": ...,
"explicit": [...], "warnings": [{"message", "category", "source"}]}`` or ``{"error": ...,
"key": <recipe key>, "source": "torchtitan/path.py:123"}`` (``source``: where torchtitan raised,
when the refusal came from torchtitan's code). torchtitan's device probes are answered from
``gpu_arch`` (``runners.torchtitan.machine``). ``{"keys": true}`` asks instead for every key the job
config's command line defines and the line defining it. torchtitan is imported once; every recipe
is resolved in this one process. Anything torchtitan prints goes to stderr so that stdout carries
only the JSON answer.

This worker (with its modules in ``runners/torchtitan/``: ``config_manager``, ``cli_keys``,
``trainer_derivations``, ``definition_sites``) is the only code that imports torchtitan
(untyped), and only once ``main`` runs: the adapter talks to it over pipes.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import json
import logging
import os
import sys
from typing import Any

from runners.torchtitan.cli_keys import NO_DEFAULT, cli_name, explicit_keys, prefixes, walk
from runners.torchtitan.config_manager import RecipeError, Torchtitan
from runners.torchtitan.definition_sites import definition_sites
from runners.torchtitan.machine import DEFAULT_GPU_ARCH, declared_gpu, undeclared_hint
from runners.torchtitan.recipe import MODEL_PACKAGE, MODULE_RE, model_module
from runners.torchtitan.trainer_derivations import derive
from runners.worker_support import collect_warnings, json_safe


def _stable(value: Any) -> Any:
    """A JSON-able image of a model config tree with no memory addresses in it."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {
            "class": f"{type(value).__module__}.{type(value).__qualname__}",
            "fields": {f.name: _stable(getattr(value, f.name)) for f in dataclasses.fields(value)},
        }
    if isinstance(value, functools.partial):
        return {
            "partial": _stable(value.func),
            "args": [_stable(a) for a in value.args],
            "keywords": {k: _stable(v) for k, v in sorted(value.keywords.items())},
        }
    if isinstance(value, list | tuple):
        return [_stable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _stable(v) for k, v in sorted(value.items(), key=lambda kv: str(kv[0]))}
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if callable(value):
        return f"{getattr(value, '__module__', '?')}.{getattr(value, '__qualname__', '?')}"
    return str(value)


def model_digest(model_config: Any) -> str:
    """Digest of the model config the config function built (converters applied)."""
    text = json.dumps(_stable(model_config), sort_keys=True, separators=(",", ":"))
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()[:16]


HOST_WARNINGS = ("HF assets path ",)
"""Warnings about the resolving host's files (ConfigManager._validate_config checks that
hf_assets_path exists here, torchtitan/config/manager.py:203-208): the launch host is another
machine, so they say nothing about the recipe."""

QUANTIZED = "torchtitan.components.quantization."
"""Module prefix of the config classes the float8 / MXFP8 / NVFP4 converters swap in."""


def quantized_modules(model_config: Any) -> list[str]:
    """The low-precision modules in a model config tree, ``"Float8Linear x 224"`` per class
    (torchao's recipe in brackets where the module carries one), sorted; [] when none."""
    counts: dict[str, int] = {}

    def visit(value: Any) -> None:
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            cls = type(value)
            if cls.__module__.startswith(QUANTIZED):
                name = cls.__qualname__.removesuffix(".Config").rsplit(".", 1)[-1]
                recipe = getattr(value, "_torchao_config", None)
                cast = getattr(recipe, "cast_config_weight", None)
                granularity = getattr(cast, "scaling_granularity", None)
                if granularity is not None:
                    name += f" [{getattr(granularity, 'name', granularity)}]".lower()
                counts[name] = counts.get(name, 0) + 1
            for f in dataclasses.fields(value):
                visit(getattr(value, f.name))
        elif isinstance(value, list | tuple):
            for v in value:
                visit(v)
        elif isinstance(value, dict):
            for v in value.values():
                visit(v)

    visit(model_config)
    return [f"{name} x {n}" for name, n in sorted(counts.items())]


def _differs(value: Any, default: Any) -> bool:
    return default is NO_DEFAULT or json_safe(value) != json_safe(default)


def resolve_one(tt: Torchtitan, recipe: dict[str, Any]) -> dict[str, Any]:
    """Resolve one recipe; a refused one becomes ``{"error", "key"}``."""
    module, config = str(recipe["module"]), str(recipe["config"])
    overrides = [str(t) for t in recipe["overrides"]]
    world_size = int(recipe["world_size"])
    declared: dict[str, str] = dict(recipe.get("env", {}))
    gpu_arch = recipe.get("gpu_arch") or DEFAULT_GPU_ARCH
    if not MODULE_RE.match(module):  # the recipe model refuses it; never import it here
        return {"error": f"not a model of {MODEL_PACKAGE}: {module!r}", "key": "module"}
    qualified = model_module(module)  # ConfigManager imports nothing outside the package
    tt.forget_logged_warnings()
    tt.import_registry(qualified)
    try:
        with declared_gpu(tt.torch, gpu_arch), collect_warnings(tt.package) as warned:
            loaded, cli_keys, tokens = tt.function(qualified, config, gpu_arch)
            cfg = tt.parse(qualified, config, overrides)
            spec = cfg.model_spec
            model = (
                {
                    "model_spec.name": spec.name,
                    "model_spec.flavor": spec.flavor,
                    "model_spec.model": model_digest(spec.model),
                    "model_spec.quantization": quantized_modules(spec.model),
                }
                if spec is not None
                else {}
            )
            derived = derive(tt, cfg, world_size)
    except RecipeError as exc:
        hint = "" if recipe.get("gpu_arch") else undeclared_hint(exc.source)
        refusal = {"error": f"{exc}{hint}", "key": exc.key}
        if exc.source:
            refusal["source"] = exc.source
        return refusal
    values: dict[str, Any] = {"module": module, "config": config}
    explicit = {"module", "config"}
    wanted = prefixes(cli_keys)
    by_cli = {cli_name(leaf.key): leaf for leaf in walk(cfg, wanted)}
    for name in sorted(cli_keys):
        leaf = by_cli.get(name)
        if leaf is not None:
            values[leaf.key] = json_safe(leaf.value)
    # Keys the config function moved away from the dataclass defaults count as set by the recipe.
    for leaf in walk(loaded, wanted):
        if cli_name(leaf.key) in cli_keys and _differs(leaf.value, leaf.default):
            explicit.add(leaf.key)
    set_on_command_line = explicit_keys(overrides, tokens)
    explicit.update(leaf.key for name, leaf in by_cli.items() if name in set_on_command_line)
    values.update(derived)
    values.update(model)
    # The effective env is the recipe's env: the launch inherits nothing else.
    return {
        "values": dict(sorted(values.items())),
        "env": dict(sorted(declared.items())),
        "explicit": sorted(explicit),
        "warnings": [w for w in warned.items if not w["message"].startswith(HOST_WARNINGS)],
    }


def main() -> int:
    request = json.load(sys.stdin)
    # tyro prints its errors in a box as wide as the terminal: keep each message on one line.
    os.environ["COLUMNS"] = "1000"
    with contextlib.redirect_stdout(sys.stderr):
        # torchtitan logs through the root logger: its warnings are collected per recipe
        # (collect_warnings), its info lines are noise.
        logging.disable(logging.INFO)
        tt = Torchtitan()
        if request.get("keys"):
            answer: dict[str, Any] = {"version": tt.version, "keys": definition_sites(tt)}
        else:
            results = [resolve_one(tt, recipe) for recipe in request["recipes"]]
            answer = {"version": tt.version, "results": results}
    sys.stdout.write(json.dumps(answer) + "\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
