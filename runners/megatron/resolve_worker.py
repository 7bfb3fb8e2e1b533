"""Resolve Megatron-LM recipes with Megatron's own ``parse_args`` + ``validate_args``.

Run as ``python -m runners.megatron.resolve_worker``: reads
``{"recipes": [{"args": [...], "world_size": N, "gpu_arch": "sm90", "env": {...}}, ...]}``
on stdin and writes ``{"version": ..., "results": [...]}`` on stdout, one result per recipe:
``{"values": ..., "env": ..., "explicit": [dests set on the command line]}`` or
``{"error": ...}``. Megatron is imported once; every recipe is resolved in this one process.
Anything Megatron prints goes to stderr so that stdout carries only the JSON answer.

This is the only module that imports Megatron (untyped): the adapter talks to it over pipes.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import sys
import typing
from collections.abc import Iterator
from typing import Any


def _provide_override() -> None:
    """megatron-core 0.19 uses ``typing.override`` (Python 3.12); supply it on 3.11."""
    if not hasattr(typing, "override"):
        import typing_extensions

        typing.override = typing_extensions.override  # type: ignore[attr-defined]


def json_safe(value: Any) -> Any:
    """``value`` with tuples as lists and anything JSON cannot hold (dtypes, enums) as str."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, list | tuple):
        return [json_safe(v) for v in value]
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    return str(value)


def one_line(exc: BaseException) -> str:
    """A one-line message for ``exc``."""
    text = " ".join(str(exc).split())
    return text or type(exc).__name__


@contextlib.contextmanager
def _pinned(env: dict[str, str], argv: list[str]) -> Iterator[None]:
    """``os.environ`` and ``sys.argv`` set to ``env`` / ``argv``, restored on exit."""
    saved_env = dict(os.environ)
    saved_argv = sys.argv
    os.environ.update(env)
    sys.argv = argv
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved_env)
        sys.argv = saved_argv


class _ArgparseError(Exception):
    """argparse's message, captured instead of exiting the process."""


def option_dests(arguments: Any) -> dict[str, str]:
    """Megatron's option strings mapped to their argparse dests (``--fp8-format`` -> ``fp8``)."""
    parser = arguments.add_megatron_arguments(argparse.ArgumentParser(allow_abbrev=False))
    return {opt: action.dest for opt, action in parser._option_string_actions.items()}


def explicit_dests(argv: list[str], dests: dict[str, str]) -> list[str]:
    """Dests of the options present in ``argv`` (``--flag`` and ``--flag=value`` forms)."""
    found = {dests[t.split("=", 1)[0]] for t in argv if t.split("=", 1)[0] in dests}
    return sorted(found - {"help"})


def resolve_one(arguments: Any, recipe: dict[str, Any], dests: dict[str, str]) -> dict[str, Any]:
    """Resolve one recipe with Megatron's ``arguments`` module; errors become ``{"error"}``."""
    world_size = int(recipe["world_size"])
    arch = str(recipe["gpu_arch"])
    major = int(arch[2:-1])
    declared: dict[str, str] = dict(recipe.get("env", {}))
    env = {**declared, "WORLD_SIZE": str(world_size), "RANK": "0", "LOCAL_RANK": "0"}
    argv = ["pretrain_gpt.py", *recipe["args"]]
    stderr = sys.stderr
    try:
        with _pinned(env, argv), contextlib.redirect_stdout(stderr):
            # validate_args looks the probe up as the module global imported at
            # megatron/training/arguments.py:34 (``from megatron.training.utils import (...
            # get_device_arch_version``) and calls it at lines 1414, 1444 and 1484
            # (megatron-core 0.19.2); pin it to the declared architecture, with no GPU probed.
            saved_probe = arguments.get_device_arch_version
            arguments.get_device_arch_version = lambda: major
            try:
                capture = io.StringIO()
                try:
                    with contextlib.redirect_stderr(capture):
                        args = arguments.parse_args()
                except SystemExit as exc:
                    message = _argparse_message(capture.getvalue()) or f"exit {exc.code}"
                    raise _ArgparseError(message) from None
                stderr.write(capture.getvalue())
                arguments.validate_args(args)
            finally:
                arguments.get_device_arch_version = saved_probe
    except _ArgparseError as exc:
        return {"error": f"args: {one_line(exc)}"}
    except (AssertionError, ValueError, TypeError, RuntimeError, SystemExit) as exc:
        return {"error": f"{type(exc).__name__}: {one_line(exc)}"}
    values = {k: json_safe(v) for k, v in sorted(vars(args).items()) if not k.startswith("_")}
    if "num_microbatches" not in values:
        # validate_args (0.19.2) checks global_batch_size % (micro_batch_size x dp) == 0 but
        # does not store the quotient; the microbatch calculator computes it at run time.
        # Compute it here the same way so a micro-batch change shows up as a derived change.
        dp = int(values["data_parallel_size"])
        values["num_microbatches"] = int(values["global_batch_size"]) // (
            int(values["micro_batch_size"]) * dp
        )
    # The effective env is the recipe's env: the launch inherits nothing else, so whatever
    # CUDA_DEVICE_MAX_CONNECTIONS / NVTE_* / NCCL_* Megatron, TE and NCCL read is declared there.
    return {
        "values": values,
        "env": dict(sorted(declared.items())),
        "explicit": explicit_dests(list(recipe["args"]), dests),
    }


def _argparse_message(text: str) -> str:
    """The message of argparse's ``prog: error: message`` line (its usage text is dropped)."""
    for line in reversed(text.splitlines()):
        if ": error: " in line:
            return line.split(": error: ", 1)[1].strip()
    return ""


def main() -> int:
    request = json.load(sys.stdin)
    _provide_override()
    with contextlib.redirect_stdout(sys.stderr):
        import megatron.core  # type: ignore[import-untyped]
        from megatron.training import arguments  # type: ignore[import-untyped]

        dests = option_dests(arguments)
    results = [resolve_one(arguments, recipe, dests) for recipe in request["recipes"]]
    answer = {"version": str(megatron.core.__version__), "results": results}
    sys.stdout.write(json.dumps(answer) + "\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
