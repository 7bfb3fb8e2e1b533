"""Resolve Megatron-LM recipes with Megatron's own ``parse_args`` + ``validate_args`` and the
checks it makes when it builds the model (``runners.megatron.model_checks``).

Run as ``python -m runners.megatron.resolve_worker``: reads ``{"recipes": [{"args": [...],
"world_size": N, "gpu_arch": "sm90", "transformer_engine": "2.9" (optional), "env": {...}},
...]}`` on stdin and writes ``{"version": ..., "results": [...]}`` on stdout, one result per
recipe: ``{"values": ..., "env": ..., "explicit": [dests set on the command line], "warnings":
[{"message", "category", "source"}]}`` or ``{"error": ..., "key": "args" | "model", "source":
"megatron/...py:N"}``. Megatron is imported once; every recipe is resolved in this one process.
Anything Megatron prints goes to stderr so that stdout carries only the JSON answer.

This module and ``model_checks`` are the only ones that import Megatron (untyped): the adapter
talks to them over pipes.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import io
import json
import linecache
import os
import sys
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from runners.megatron.model_checks import check_model, declared_te, declared_te_note
from runners.source_lines import field_line, relative_to_package
from runners.worker_support import collect_warnings, json_safe, one_line, pinned, refusal


def _provide_override() -> None:
    """megatron-core 0.19 uses ``typing.override`` (Python 3.12); supply it on 3.11."""
    if not hasattr(typing, "override"):
        import typing_extensions

        typing.override = typing_extensions.override  # type: ignore[attr-defined]


class _ArgparseError(Exception):
    """argparse's message, captured instead of exiting the process."""


def option_dests(arguments: Any) -> dict[str, str]:
    """Megatron's option strings mapped to their argparse dests (``--fp8-format`` -> ``fp8``)."""
    parser = arguments.add_megatron_arguments(argparse.ArgumentParser(allow_abbrev=False))
    return {opt: action.dest for opt, action in parser._option_string_actions.items()}


_KINDS = {
    "_StoreAction": "store",
    "_StoreTrueAction": "true",
    "_StoreFalseAction": "false",
    "_StoreConstAction": "const",
    "BooleanOptionalAction": "optional",
    "_AppendAction": "store",
}


def option_table(arguments: Any) -> dict[str, list[dict[str, Any]]]:
    """Dest -> how the command line sets it: each option's strings, kind (``store``, ``true``,
    ``false``, ``const``, ``optional``), nargs and const; what a recipe edit needs to write a
    value back as Megatron's own tokens."""
    parser = arguments.add_megatron_arguments(argparse.ArgumentParser(allow_abbrev=False))
    table: dict[str, list[dict[str, Any]]] = {}
    for action in parser._actions:
        if not action.option_strings or action.dest == "help":
            continue
        table.setdefault(action.dest, []).append(
            {
                "options": list(action.option_strings),
                "kind": _KINDS.get(type(action).__name__, "store"),
                "nargs": action.nargs if isinstance(action.nargs, str | int) else None,
                "const": json_safe(action.const),
            }
        )
    return table


def explicit_dests(argv: list[str], dests: dict[str, str]) -> list[str]:
    """Dests of the options present in ``argv`` (``--flag`` and ``--flag=value`` forms)."""
    found = {dests[t.split("=", 1)[0]] for t in argv if t.split("=", 1)[0] in dests}
    return sorted(found - {"help"})


@contextlib.contextmanager
def _pinned_gpu(arguments: Any, major: int, minor: int) -> Iterator[None]:
    """The declared GPU architecture answers validation's probes; no GPU is looked at.

    validate_args (megatron-core 0.19.2) probes twice: ``get_device_arch_version()``, the module
    global imported at megatron/training/arguments.py:34 and called at lines 1414, 1444 and 1484
    (TP/CP/FSDP checks), and ``torch.cuda.get_device_capability()`` at line 1339 (grouped GEMM).
    """
    cuda = arguments.torch.cuda
    saved = arguments.get_device_arch_version, cuda.get_device_capability
    arguments.get_device_arch_version = lambda: major
    cuda.get_device_capability = lambda device=None: (major, minor)
    try:
        yield
    finally:
        arguments.get_device_arch_version, cuda.get_device_capability = saved


def resolve_one(arguments: Any, recipe: dict[str, Any], dests: dict[str, str]) -> dict[str, Any]:
    """Resolve one recipe with Megatron's ``arguments`` module and its model-build checks
    (``model_checks``); a refusal becomes ``{"error", "key", "source"}``, and the warnings
    raised on the way are listed in the result.

    The declared GPU architecture and Transformer Engine version answer every probe of both
    stages: ``validate_args`` asks for TE versions too (``--fp4-format`` needs 2.7.0.dev0,
    ``--qk-clip`` 2.9.0, ``--delay-wgrad-compute`` 2.7-2.12; docs/megatron.md lists them)."""
    world_size = int(recipe["world_size"])
    arch = str(recipe["gpu_arch"])
    major, minor = int(arch[2:-1]), int(arch[-1])
    declared: dict[str, str] = dict(recipe.get("env", {}))
    env = {**declared, "WORLD_SIZE": str(world_size), "RANK": "0", "LOCAL_RANK": "0"}
    argv = ["pretrain_gpt.py", *recipe["args"]]
    stderr = sys.stderr
    stage = "args"
    package = Path(arguments.__file__).parents[1]  # megatron/: where refusals are located
    try:
        with (
            pinned(env, argv),
            contextlib.redirect_stdout(stderr),
            _pinned_gpu(arguments, major, minor),
            declared_te(recipe.get("transformer_engine")),
            collect_warnings(package) as warned,
        ):
            capture = io.StringIO()
            try:
                with contextlib.redirect_stderr(capture):
                    args = arguments.parse_args()
            except SystemExit as exc:
                message = _argparse_message(capture.getvalue()) or f"exit {exc.code}"
                raise _ArgparseError(message) from None
            stderr.write(capture.getvalue())
            arguments.validate_args(args)
            stage = "model"
            check_model(args)
    except _ArgparseError as exc:
        return {"error": one_line(exc), "key": "args"}
    except (AssertionError, ValueError, TypeError, RuntimeError, SystemExit) as exc:
        message = f"{type(exc).__name__}: {one_line(exc)}"
        message = declared_te_note(message, recipe.get("transformer_engine"))
        return refusal(exc, package, key=stage, message=message)
    values = {k: json_safe(v) for k, v in sorted(vars(args).items()) if not k.startswith("_")}
    if "num_microbatches" not in values:
        # validate_args (0.19.2) checks global_batch_size % (micro_batch_size x dp) == 0 but
        # does not store the quotient; the microbatch calculator computes it at run time.
        # Compute it here the same way so a micro-batch change shows up as a derived change.
        dp = int(values["data_parallel_size"])
        values["num_microbatches"] = int(values["global_batch_size"]) // (
            int(values["micro_batch_size"]) * dp
        )
    if values.get("padded_vocab_size") is None and values.get("tokenizer_type") == "NullTokenizer":
        # The tokenizer pads the vocabulary to a multiple of make_vocab_size_divisible_by x TP
        # when it is built (megatron/core/tokenizers/utils/build_tokenizer.py:143), after
        # validation: a TP change can add dummy output rows, which enter the softmax. Derived
        # here with Megatron's own function when the size is known without a tokenizer file
        # (NullTokenizer's vocabulary is --vocab-size); otherwise it stays unset.
        from megatron.core.tokenizers.utils.build_tokenizer import (  # type: ignore[import-untyped]
            vocab_size_with_padding,
        )

        values["padded_vocab_size"] = vocab_size_with_padding(
            int(values["vocab_size"]), args, logging_enabled=False
        )
    # The effective env is the recipe's env: the launch inherits nothing else, so whatever
    # CUDA_DEVICE_MAX_CONNECTIONS / NVTE_* / NCCL_* Megatron, TE and NCCL read is declared there.
    return {
        "values": values,
        "env": dict(sorted(declared.items())),
        "explicit": explicit_dests(list(recipe["args"]), dests),
        "warnings": warned.items,
    }


def _argparse_message(text: str) -> str:
    """The message of argparse's ``prog: error: message`` line (its usage text is dropped)."""
    for line in reversed(text.splitlines()):
        if ": error: " in line:
            return line.split(": error: ", 1)[1].strip()
    return ""


def _definition_site(frame: Any, action: argparse.Action) -> tuple[str, int]:
    """Where the argument ``action`` that ``frame`` is adding is defined.

    Arguments built from a config dataclass by ``ArgumentGroupFactory.build_group``
    (megatron/training/argument_utils.py) are defined by the dataclass field; the others by the
    ``add_argument`` call: the line of the call that names the dest (``dest='fp8'``) or, failing
    that, the first one that names an option string.
    """
    factory = frame.f_locals.get("self")
    attr = frame.f_locals.get("attr")
    if frame.f_code.co_name == "build_group" and factory is not None and attr is not None:
        site = field_line(factory.src_cfg_class, attr.name)
        if site is not None:
            return site
    path, first = frame.f_code.co_filename, frame.f_lineno
    call = linecache.getlines(path)[first - 1 : first + 11]
    dest_forms = (f"dest='{action.dest}'", f'dest="{action.dest}"')
    for offset, text in enumerate(call):
        if any(form in text for form in dest_forms):
            return path, first + offset
    for offset, text in enumerate(call):
        if any(f"'{opt}'" in text or f'"{opt}"' in text for opt in action.option_strings):
            return path, first + offset
    return path, first


def definition_sites(arguments: Any) -> dict[str, tuple[str, int]]:
    """Every dest of Megatron's parser and the source line that defines it."""
    sites: dict[str, tuple[str, int]] = {}
    original = argparse._ActionsContainer.add_argument

    def recording(container: Any, *args: Any, **kwargs: Any) -> Any:
        action = original(container, *args, **kwargs)
        frame = sys._getframe(1)
        sites.setdefault(action.dest, _definition_site(frame, action))
        return action

    argparse._ActionsContainer.add_argument = recording  # type: ignore[method-assign,assignment]
    try:
        arguments.add_megatron_arguments(argparse.ArgumentParser(allow_abbrev=False))
    finally:
        argparse._ActionsContainer.add_argument = original  # type: ignore[method-assign]
    sites.pop("help", None)
    return sites


def _installed_wheel() -> bool:
    """Whether ``megatron`` comes from an installed wheel rather than a git checkout."""
    spec = importlib.util.find_spec("megatron")
    locations = list(spec.submodule_search_locations or []) if spec else []
    return any(
        part in ("site-packages", "dist-packages") for loc in locations for part in Path(loc).parts
    )


def main() -> int:
    request = json.load(sys.stdin)
    _provide_override()
    if _installed_wheel():
        # megatron/core/package_info.py appends ``git rev-parse HEAD`` run beside its own file;
        # inside a virtualenv that is the enclosing repository's commit, not Megatron's.
        os.environ["NO_VCS_VERSION"] = "1"
    with contextlib.redirect_stdout(sys.stderr):
        import megatron  # type: ignore[import-untyped]
        import megatron.core  # type: ignore[import-untyped]
        from megatron.training import arguments  # type: ignore[import-untyped]

        dests = option_dests(arguments)
    version = str(megatron.core.__version__)
    if request.get("keys"):
        package = Path(megatron.__path__[0])
        keys = {
            dest: f"{relative_to_package(path, package)}:{line}"
            for dest, (path, line) in sorted(definition_sites(arguments).items())
        }
        answer: dict[str, Any] = {"version": version, "keys": keys}
    elif request.get("options"):
        answer = {"version": version, "options": option_table(arguments)}
    else:
        results = [resolve_one(arguments, recipe, dests) for recipe in request["recipes"]]
        answer = {"version": version, "results": results}
    sys.stdout.write(json.dumps(answer) + "\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
