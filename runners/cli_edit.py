"""Write a configuration change back into a recipe's command-line tokens.

An agent proposes changes as effective-configuration keys and values (``micro_batch_size: 2``,
``parallelism.tensor_parallel_degree: 2``). A Megatron-LM or torchtitan recipe holds command-line
tokens, so a change becomes tokens: every token that set the key is taken out, and the tokens
that set the new value are appended, spelled as the framework's own parser spells them. The
result is resolved again by the framework's validation before anyone uses it.
"""

from __future__ import annotations

import json
from typing import Any

from gate.errors import AttuneError

OptionTable = dict[str, list[dict[str, Any]]]
"""Megatron dest -> its options (``options``, ``kind``, ``nargs``, ``const``), as the resolve
worker reads them from Megatron's own parser."""


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def take_out(tokens: list[str], options: dict[str, int]) -> tuple[list[str], list[str], int]:
    """``tokens`` without ``options`` (option -> how many values follow it; -1: every token up
    to the next option), in the ``--opt v`` and ``--opt=v`` forms: (what is kept, each option
    taken out with its values as one string, where in the kept tokens the first one was)."""
    kept: list[str] = []
    removed: list[str] = []
    at: int | None = None
    i = 0
    while i < len(tokens):
        flag = tokens[i].split("=", 1)[0]
        if flag not in options:
            kept.append(tokens[i])
            i += 1
            continue
        at = len(kept) if at is None else at
        end = i + 1
        if "=" not in tokens[i]:
            count = options[flag]
            while end < len(tokens) and count != 0 and not tokens[end].startswith("--"):
                end, count = end + 1, count - 1
        removed.append(" ".join(tokens[i:end]))
        i = end
    return kept, removed, len(kept) if at is None else at


def _replace(tokens: list[str], options: dict[str, int], new: list[str]) -> list[str]:
    """``tokens`` with every one of ``options`` taken out and ``new`` put where the first of
    them was (at the end when none was there), so an edit shows as a one-line change."""
    kept, _removed, at = take_out(tokens, options)
    return kept[:at] + new + kept[at:]


def _arity(option: dict[str, Any]) -> int:
    if option["kind"] != "store":
        return 0
    nargs = option["nargs"]
    return nargs if isinstance(nargs, int) else (-1 if nargs in ("+", "*") else 1)


def _megatron_tokens(key: str, value: Any, options: list[dict[str, Any]]) -> list[str]:
    kinds = {o["kind"]: o for o in options}
    if "store" in kinds:
        flag = kinds["store"]["options"][-1]
        if value is None:
            return []
        if isinstance(value, list):
            return [flag, *(_text(v) for v in value)]
        return [flag, _text(value)]
    for option in options:
        kind = option["kind"]
        if (kind, value) in (("true", True), ("false", False)) or (
            kind == "const" and option["const"] == value
        ):
            return [option["options"][-1]]
        if kind == "optional" and isinstance(value, bool):
            positive = next(o for o in option["options"] if not o.startswith("--no-"))
            return [positive if value else f"--no-{positive[2:]}"]
    if (value is False and "true" in kinds) or (value is True and "false" in kinds):
        return []  # the option's absence is the value
    raise AttuneError(f"Megatron's command line cannot set {key} to {value!r}")


def edit_megatron_args(tokens: list[str], changes: dict[str, Any], table: OptionTable) -> list[str]:
    """Megatron ``args`` with each changed dest set by its own option (``--micro-batch-size``,
    ``--sequence-parallel``, ``--no-gradient-accumulation-fusion``...)."""
    out = list(tokens)
    for key, value in changes.items():
        options = table.get(key)
        if not options:
            raise AttuneError(f"{key} is not an option of Megatron's command line")
        arity = {flag: _arity(o) for o in options for flag in o["options"]}
        out = _replace(out, arity, _megatron_tokens(key, value, options))
    return out


TORCHTITAN_SUBCOMMANDS = frozenset({"activation_checkpoint"})
"""Keys torchtitan 0.3.0 selects with a tyro subcommand token (``activation-checkpoint:full``)
rather than a flag: the effective value is the subcommand's name."""


def edit_torchtitan_overrides(tokens: list[str], changes: dict[str, Any]) -> list[str]:
    """torchtitan ``overrides`` with each changed key set as tyro spells it: ``--a.b v``,
    ``--a.b`` / ``--a.no-b`` for a boolean, ``a-b:value`` for a subcommand."""
    out = list(tokens)
    for key, value in changes.items():
        if key in TORCHTITAN_SUBCOMMANDS:
            names = (key, key.replace("_", "-"))
            at = next((i for i, t in enumerate(out) if t.split(":", 1)[0] in names), len(out))
            out = [t for t in out if t.split(":", 1)[0] not in names]
            out.insert(min(at, len(out)), f"{key.replace('_', '-')}:{value}")
            continue
        prefix, _, last = key.rpartition(".")
        lead = f"{prefix}." if prefix else ""
        spellings = {last, last.replace("_", "-")}
        switches = {f"--{lead}{n}{s}" for s in spellings for n in ("no-", "no_")}
        flags = {f"--{lead}{s}" for s in spellings}
        arity = 0 if isinstance(value, bool) else (-1 if isinstance(value, list) else 1)
        if isinstance(value, bool):
            new = [f"--{key}" if value else f"--{lead}no-{last}"]
        elif isinstance(value, list):
            new = [f"--{key}", *(_text(v) for v in value)]
        else:
            new = [] if value is None else [f"--{key}", _text(value)]
        out = _replace(out, {**{f: arity for f in flags}, **{f: 0 for f in switches}}, new)
    return out
