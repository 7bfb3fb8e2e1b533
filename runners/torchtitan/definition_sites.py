"""Where each key of torchtitan's job-config command line is defined, for ``{"keys": true}``.

Every key tyro's parser defines, over every config function of every model shipped in
``torchtitan/models`` that builds on this install, mapped to the dataclass field defining it
(``torchtitan/config/configs.py:52``); ``--module`` and ``--config`` map to where ConfigManager
reads them. torchtitan's model registry is imported when the sites are asked for, not when this
module is.
"""

from __future__ import annotations

import importlib
import inspect
import sys
from collections.abc import Iterator
from typing import Any

from runners.source_lines import qualified_field_line, relative_to_package
from runners.torchtitan.cli_keys import cli_name, parser_options, prefixes, walk
from runners.torchtitan.config_manager import RecipeError, Torchtitan
from runners.torchtitan.machine import declared_gpu
from runners.worker_support import one_line

LISTING_GPU_ARCH = "sm100"
"""The device the config functions are built for when their keys are listed: the newest, so
that the low-precision ones build too, and the listing is the same on every host."""

SELECTOR_FLAGS = ("module", "config")
"""ConfigManager's own flags (torchtitan/config/manager.py:62-78), keys of the recipe too."""


def _selector_sites(tt: Torchtitan) -> dict[str, tuple[str, int]]:
    """Where ConfigManager reads ``--module`` and ``--config``."""
    method = tt.ConfigManager._load_config
    lines, start = inspect.getsourcelines(method)
    path = inspect.getsourcefile(method) or ""
    sites = {}
    for flag in SELECTOR_FLAGS:
        for offset, text in enumerate(lines):
            if f'arg == "--{flag}"' in text:
                sites[flag] = (path, start + offset)
                break
    return sites


def _config_functions(tt: Torchtitan) -> Iterator[tuple[str, str, Any]]:
    """``(module, function, Trainer.Config)`` for every config function of every model that
    ships in ``torchtitan/models`` and builds on this install (some need torchao, einops, ...)."""
    from torchtitan.models import _supported_models  # type: ignore[import-untyped]

    for module in sorted(_supported_models):
        try:
            registry = importlib.import_module(f"torchtitan.models.{module}.config_registry")
        except Exception as exc:
            sys.stderr.write(f"keys: skipping module {module}: {one_line(exc)}\n")
            continue
        for name, fn in inspect.getmembers(registry, inspect.isfunction):
            if fn.__module__ != registry.__name__ or name.startswith("_"):
                continue
            params = inspect.signature(fn).parameters.values()
            if any(p.default is inspect.Parameter.empty for p in params):
                continue  # a helper that edits a config, not a config function
            try:
                with declared_gpu(tt.torch, LISTING_GPU_ARCH):
                    loaded = tt.load(module, name)
                yield module, name, loaded
            except RecipeError as exc:
                sys.stderr.write(f"keys: skipping {module}.{name}: {exc}\n")


def definition_sites(tt: Torchtitan) -> dict[str, str]:
    """Every key the job config's command line defines, over every config function that builds,
    and the dataclass field defining it (``torchtitan/config/configs.py:52``)."""
    sites: dict[str, str] = {}

    def site(path: str, line: int) -> str:
        return f"{relative_to_package(path, tt.package)}:{line}"

    for flag, (path, line) in _selector_sites(tt).items():
        sites[flag] = site(path, line)
    for module, name, loaded in _config_functions(tt):
        cli_keys, _ = parser_options(tt.tyro, tt.registry, loaded)
        wanted = prefixes(cli_keys)
        leaves = {cli_name(leaf.key): leaf for leaf in walk(loaded, wanted, variants=True)}
        missing = sorted(cli_keys - leaves.keys())
        if missing:
            raise RuntimeError(f"{module}.{name}: command-line keys not in the config: {missing}")
        for cli in cli_keys:
            leaf = leaves[cli]
            if leaf.key in sites:
                continue
            found = qualified_field_line(leaf.owner, leaf.field)
            if found is None:
                raise RuntimeError(f"no definition line for {leaf.key}")
            sites[leaf.key] = site(*found)
    return dict(sorted(sites.items()))
