"""A torchtitan job config's command-line keys: what tyro's parser for it defines, which of them
a recipe's overrides set, and their values in a config dataclass tree.

Keys come in two spellings: tyro's (``training.seq-len``, what the parser defines) and dotted
field paths with underscores (``training.seq_len``, what the worker reports). Nothing here
imports torchtitan; the parser is built with the ``tyro`` module and registry it passes in.
Line numbers in comments are torchtitan 0.3.0's.
"""

from __future__ import annotations

import dataclasses
import functools
import typing
import warnings
from collections.abc import Iterator
from typing import Any


@dataclasses.dataclass
class Leaf:
    """One command-line key of a job config: its value and the dataclass field holding it."""

    key: str
    value: Any
    owner: Any
    """The dataclass whose field defines the key (for a dict entry, the dict field's)."""
    field: str
    default: Any
    """The field's dataclass default, or ``NO_DEFAULT``."""


NO_DEFAULT = object()


def cli_name(key: str) -> str:
    """tyro's spelling of a dotted key: underscores become hyphens (``training.seq-len``)."""
    return key.replace("_", "-")


def _field_default(field: dataclasses.Field[Any]) -> Any:
    if field.default is not dataclasses.MISSING:
        return field.default
    if field.default_factory is not dataclasses.MISSING:
        return field.default_factory()
    return NO_DEFAULT


@functools.cache
def _subcommands(owner: Any, name: str) -> dict[str, Any] | None:
    """``{subcommand name: config class or None}`` when field ``name`` of ``owner`` is a union
    of ``tyro.conf.subcommand`` alternatives (``Trainer.Config.activation_checkpoint``,
    torchtitan/distributed/activation_checkpoint.py:332)."""
    try:
        hint = typing.get_type_hints(owner, include_extras=True).get(name)
    except Exception:  # unresolvable forward references: not a subcommand field
        return None
    options: dict[str, Any] = {}
    for alternative in typing.get_args(hint):
        if typing.get_origin(alternative) is not typing.Annotated:
            return None
        base, *metadata = typing.get_args(alternative)
        names = [getattr(m, "name", None) for m in metadata if "Subcommand" in type(m).__name__]
        if not names or names[0] is None:
            return None
        options[names[0]] = None if base is type(None) else base
    return options or None


def subcommand_of(options: dict[str, Any], value: Any) -> str:
    """The subcommand name whose class ``value`` is an instance of (``None`` -> its name)."""
    for name, cls in options.items():
        if (cls is None and value is None) or (cls is not None and type(value) is cls):
            return name
    for name, cls in options.items():
        if cls is not None and isinstance(value, cls):
            return name
    return type(value).__qualname__


def prefixes(cli_keys: set[str]) -> set[str]:
    """``cli_keys`` and every dotted prefix of them: the paths worth walking into."""
    found: set[str] = set()
    for key in cli_keys:
        parts = key.split(".")
        found.update(".".join(parts[:i]) for i in range(1, len(parts) + 1))
    return found


def walk(obj: Any, wanted: set[str], prefix: str = "", *, variants: bool = False) -> Iterator[Leaf]:
    """The leaves of a config dataclass tree under the ``wanted`` paths (tyro spelling, see
    ``prefixes``), as dotted keys with underscores.

    Lists of dataclasses are indexed (``optimizer.param_groups.0.pattern``), dict fields are
    expanded per key (``...optimizer_kwargs.lr``) as tyro expands them. A subcommand union
    yields its selector (``activation_checkpoint`` = ``"selective"``) and the chosen
    alternative's fields; with ``variants`` also every other alternative's fields. Fields off
    the command line (``model_spec``, thousands of per-layer configs) are never visited.
    """
    owner: Any = type(obj)
    for field in dataclasses.fields(obj):
        key = f"{prefix}{field.name}"
        if field.name.startswith("_") or cli_name(key) not in wanted:
            continue
        value = getattr(obj, field.name)
        default = _field_default(field)
        options = _subcommands(owner, field.name)
        if options is not None:
            default_name = NO_DEFAULT if default is NO_DEFAULT else subcommand_of(options, default)
            yield Leaf(key, subcommand_of(options, value), owner, field.name, default_name)
            chosen = type(value)
            if value is not None and dataclasses.is_dataclass(value):
                yield from walk(value, wanted, f"{key}.", variants=variants)
            if variants:
                for cls in options.values():
                    if cls is not None and cls is not chosen:
                        yield from walk(cls(), wanted, f"{key}.", variants=variants)
            continue
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            yield from walk(value, wanted, f"{key}.", variants=variants)
        elif (
            isinstance(value, list)
            and value
            and all(dataclasses.is_dataclass(v) and not isinstance(v, type) for v in value)
        ):
            for i, item in enumerate(value):
                yield from walk(item, wanted, f"{key}.{i}.", variants=variants)
        elif isinstance(value, dict) and value and all(isinstance(k, str) for k in value):
            base = default if isinstance(default, dict) else {}
            for k, v in value.items():
                yield Leaf(f"{key}.{k}", v, owner, field.name, base.get(k, NO_DEFAULT))
        else:
            yield Leaf(key, value, owner, field.name, default)


def parser_options(tyro: Any, registry: Any, loaded: Any) -> tuple[set[str], dict[str, str]]:
    """What tyro's command line for ``loaded`` defines: its keys in tyro's spelling
    (``training.seq-len``), and every option string and subcommand name mapped to its key."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        parser = tyro.extras.get_parser(type(loaded), default=loaded, registry=registry)
    keys: set[str] = set()
    tokens: dict[str, str] = {}

    def visit(p: Any) -> None:
        for action in p._actions:
            if action.option_strings:
                if action.dest == "help":
                    continue
                keys.add(action.dest)
                for option in action.option_strings:
                    tokens[option] = action.dest
            elif isinstance(getattr(action, "choices", None), dict):
                for name, sub in action.choices.items():
                    selector = name.split(":", 1)[0]
                    keys.add(selector)
                    tokens[name] = selector
                    visit(sub)

    visit(parser)
    return keys, tokens


def explicit_keys(overrides: list[str], tokens: dict[str, str]) -> set[str]:
    """Keys (tyro spelling) the override tokens set: ``--flag``, ``--flag=value``,
    ``--no-flag`` forms with hyphens or underscores, and subcommand names."""
    found = set()
    for token in overrides:
        name = token.split("=", 1)[0] if token.startswith("--") else token
        normalized = "--" + cli_name(name[2:]) if name.startswith("--") else cli_name(name)
        if normalized in tokens:
            found.add(tokens[normalized])
    return found
