"""torchtitan's ConfigManager, driven for the resolve worker: load a config function's job config,
parse a recipe as ``torchtitan/train.py`` does, and turn what torchtitan refuses into a
``RecipeError`` naming the recipe key to look at.

torchtitan (untyped) is imported when ``Torchtitan`` is built, not when this module is.
"""

from __future__ import annotations

import contextlib
import importlib
import io
from pathlib import Path
from typing import Any

from runners.torchtitan.cli_keys import parser_options
from runners.worker_support import one_line, raise_site


class RecipeError(Exception):
    """A recipe torchtitan (or its trainer) refuses; ``key`` is the recipe key to look at and
    ``source`` the torchtitan line that raised (``torchtitan/path.py:123``) when known."""

    def __init__(self, key: str, message: str, source: str | None = None) -> None:
        super().__init__(message)
        self.key = key
        self.source = source


def raised_at(exc: BaseException, package: Path) -> str | None:
    """The innermost torchtitan line ``exc`` was raised at, following the exceptions it was
    raised while handling (tyro turns a config's ``__post_init__`` error into a SystemExit, the
    ValueError being its context)."""
    site, seen = None, set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        site = raise_site(current, package) or site
        current = current.__cause__ or current.__context__
    return site


def _tyro_message(text: str) -> str:
    """The message of tyro's error box, without its title, rules and help pointers.

    tyro draws either ``title / ---- / message / ---- / help`` or a rounded box with the title
    in its top border; both reduce to the first block of text that is not the title.
    """
    blocks: list[list[str]] = [[]]
    boxed = False
    for raw in text.splitlines():
        line = raw.strip().strip("│┃|").strip()
        if line and line[0] in "╭╰┏┗":
            boxed = True
            continue
        if not line:
            continue
        if set(line) <= set("-─━═"):
            blocks.append([])
        else:
            blocks[-1].append(line)
    blocks = [b for b in blocks if b]
    if not boxed and len(blocks) >= 3 and len(blocks[0]) == 1:
        blocks = blocks[1:]  # the title above the first rule
    message = " ".join(" ".join(blocks[0]).split()) if blocks else ""
    return message or " ".join(text.split())[-300:]


class Torchtitan:
    """The torchtitan pieces the worker calls, imported once."""

    def __init__(self) -> None:
        import torchtitan  # type: ignore[import-untyped]
        from torchtitan.components.optimizer import (  # type: ignore[import-untyped]
            OptimizersContainer,
        )
        from torchtitan.config.manager import (  # type: ignore[import-untyped]
            ConfigManager,
            custom_registry,
        )
        from torchtitan.distributed import ParallelDims  # type: ignore[import-untyped]

        self.package = Path(torchtitan.__path__[0])
        self.version = _version(torchtitan, self.package)
        self.tyro: Any = importlib.import_module("tyro")  # torchtitan's own CLI library
        self.registry = custom_registry
        self.ConfigManager = ConfigManager
        # One manager for every recipe: its constructor registers torchtitan's tyro rules
        # (list[str] as A,B,C, --override.imports) on the module-level registry.
        self.manager = ConfigManager()
        self._functions: dict[tuple[str, str, str], tuple[Any, set[str], dict[str, str]]] = {}
        self.ParallelDims = ParallelDims
        self.OptimizersContainer = OptimizersContainer
        self.torch: Any = importlib.import_module("torch")
        self._logged: set[str] = importlib.import_module("torchtitan.tools.logging")._logged

    def import_registry(self, module: str) -> None:
        """Import ``module``'s config_registry (and with it torchao, for the low-precision
        converters) as ConfigManager would, before any device probe is answered: torchao
        decides at import what this machine's torch can do, and must see the real one. A
        module that does not import is left for ``load`` to report."""
        prefixes = ("torchtitan.models", "torchtitan.experiments")
        names = [f"{p}.{module}.config_registry" for p in prefixes]
        for name in (*names, f"{module}.config_registry", module):
            try:
                importlib.import_module(name)
                return
            except Exception:
                continue

    def forget_logged_warnings(self) -> None:
        """torchtitan's ``warn_once`` (tools/logging.py:32) logs a message once per process:
        forget the ones logged, so that each recipe's warnings are its own."""
        self._logged.clear()

    def load(self, module: str, config: str) -> Any:
        """The config function's Trainer.Config, as ConfigManager._load_config builds it."""
        argv = ["--module", module, "--config", config]
        try:
            loaded, _ = self.manager._load_config(argv)
        except Exception as exc:
            site = raised_at(exc, self.package)
            if _ran(exc, config):  # the config function itself refused (a converter's check)
                raise RecipeError("config", f"{config}(): {one_line(exc)}", site) from None
            if isinstance(exc, ImportError):
                raise RecipeError("module", _import_failure(module, exc), site) from None
            key = "config" if "Config function" in str(exc) else "module"
            raise RecipeError(key, one_line(exc), site) from None
        return loaded

    def function(
        self, module: str, config: str, machine: str = ""
    ) -> tuple[Any, set[str], dict[str, str]]:
        """The config function's config and its command line (``parser_options``), built once
        per function and declared ``machine`` (its device probes can change what the function
        builds) for all the recipes of a request; nothing mutates them."""
        if (module, config, machine) not in self._functions:
            loaded = self.load(module, config)
            keys, tokens = parser_options(self.tyro, self.registry, loaded)
            self._functions[module, config, machine] = (loaded, keys, tokens)
        return self._functions[module, config, machine]

    def parse(self, module: str, config: str, overrides: list[str]) -> Any:
        """``ConfigManager().parse_args`` exactly as torchtitan's train.py calls it."""
        argv = ["--module", module, "--config", config, *overrides]
        capture = io.StringIO()
        try:
            with contextlib.redirect_stderr(capture):
                return self.manager.parse_args(argv)
        except SystemExit as exc:
            message = _tyro_message(capture.getvalue()) or f"exit {exc.code}"
            raise RecipeError("overrides", message, raised_at(exc, self.package)) from None
        except Exception as exc:
            site = raised_at(exc, self.package)
            raise RecipeError("overrides", one_line(exc), site) from None


def _version(torchtitan: Any, package: Path) -> str:
    """torchtitan's version; a checkout's ``assets/version.txt`` beside the package when the
    package does not come from an installed wheel (its metadata would be the wheel's)."""
    installed = any(part in ("site-packages", "dist-packages") for part in package.parts)
    version_file = package.parent / "assets" / "version.txt"
    if not installed and version_file.is_file():
        return version_file.read_text().strip()
    return str(torchtitan.__version__)


def _ran(exc: BaseException, function: str) -> bool:
    """Whether ``exc`` was raised inside a call of the config function ``function``."""
    tb = exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_name == function:
            return True
        tb = tb.tb_next
    return False


def _import_failure(module: str, exc: ImportError) -> str:
    """ConfigManager hides why a model's config_registry did not import; find the cause."""
    for prefix in ("torchtitan.models", "torchtitan.experiments"):
        try:
            importlib.import_module(f"{prefix}.{module}.config_registry")
        except ModuleNotFoundError as cause:
            if cause.name and not cause.name.startswith(f"{prefix}.{module}"):
                return (
                    f"cannot import {prefix}.{module}.config_registry: it needs the optional "
                    f"package {cause.name.split('.')[0]!r}, not installed where attune resolves "
                    f"recipes ({one_line(cause)})"
                )
        except Exception as cause:
            return f"cannot import {prefix}.{module}.config_registry: {one_line(cause)}"
        else:
            break
    return one_line(exc)
