"""Write a candidate recipe: the incumbent's text with one lever changed, comments kept.

Editing the line in place (instead of re-dumping the YAML) keeps the candidate's diff to the
lines that changed, which is what a reviewer reads.
"""

from __future__ import annotations

import difflib
import json
import re
from typing import Any, Protocol, runtime_checkable

import yaml

from gate.errors import AttuneError
from runners.adapters import get_adapter


def _scalar(value: Any) -> str:
    text = yaml.safe_dump(value, default_flow_style=True).strip()
    return text.removesuffix("\n...").strip()


def apply_changes(text: str, changes: dict[str, Any]) -> str:
    """The recipe ``text`` with ``changes`` (effective-configuration keys) written in: keys of
    the embedded workload's ``config`` section, or command-line tokens of a Megatron-LM or
    torchtitan recipe (``args`` / ``overrides``), spelled by the framework's own parser."""
    data = yaml.safe_load(text)
    framework = data.get("framework") if isinstance(data, dict) else None
    if framework in (None, "embedded"):
        return set_section_keys(text, changes)
    adapter = get_adapter(str(framework))
    if not isinstance(adapter, TokenEditor):
        raise AttuneError(f"attune cannot edit {framework} recipes")
    key = adapter.tokens_key
    tokens = [str(t) for t in data.get(key) or []]
    return set_token_list(text, key, adapter.edit_tokens(tokens, changes))


@runtime_checkable
class TokenEditor(Protocol):
    """An adapter whose recipes hold command-line tokens under ``tokens_key``."""

    tokens_key: str

    def edit_tokens(self, tokens: list[str], changes: dict[str, Any]) -> list[str]: ...


def _token(token: str) -> str:
    """A token as a block-list item: bare when YAML reads it back as that string, else in
    double quotes (``"2"``, ``"true"``)."""
    try:
        plain = yaml.safe_load(token) == token and "#" not in token
    except yaml.YAMLError:
        plain = False
    return token if plain else json.dumps(token)


def set_token_list(text: str, section: str, tokens: list[str]) -> str:
    """Replace the items of the block list ``section`` (one ``- token`` per line) by
    ``tokens``: the lines of tokens that stay keep their place and comments; new tokens are
    marked ``# attune``. The result is checked by parsing it back."""
    lines = text.splitlines()
    try:
        start = next(i for i, line in enumerate(lines) if line.rstrip() == f"{section}:")
    except StopIteration:
        raise AttuneError(f"recipe has no block list '{section}:' to edit") from None
    end, items = start + 1, []
    for i in range(start + 1, len(lines)):
        if lines[i] and not lines[i][0].isspace() and not lines[i].startswith("-"):
            break
        end = i + 1
        if lines[i].lstrip().startswith("- "):
            items.append(i)
    old = [str(yaml.safe_load(lines[i].lstrip()[2:])) for i in items]
    indent = lines[items[0]][: -len(lines[items[0]].lstrip())] if items else "  "
    before: dict[int, list[str]] = {}
    dropped: set[int] = set()
    ops = difflib.SequenceMatcher(a=old, b=tokens, autojunk=False).get_opcodes()
    for tag, a0, a1, b0, b1 in ops:
        if tag != "equal":
            dropped.update(range(a0, a1))
            before.setdefault(a0, []).extend(tokens[b0:b1])
    added = [f"{indent}- {_token(t)}  # attune" for t in before.get(len(old), [])]
    out = lines[: start + 1]
    for i in range(start + 1, end):
        if i in items:
            k = items.index(i)
            out += [f"{indent}- {_token(t)}  # attune" for t in before.get(k, [])]
            if k not in dropped:
                out.append(lines[i])
            if k == len(old) - 1:
                out += added
        else:
            out.append(lines[i])
    if not items:
        out += added
    result = "\n".join([*out, *lines[end:]]) + "\n"
    parsed = yaml.safe_load(result).get(section) or []
    if [str(t) for t in parsed] != tokens:
        raise AttuneError(f"could not write the new {section} into the recipe")
    return result


def set_section_keys(text: str, changes: dict[str, Any], *, section: str = "config") -> str:
    """Set each ``section.key`` to its new value, in place when the key is written, else
    added at the top of the section. The result is checked by parsing it back."""
    lines = text.splitlines()
    try:
        start = next(i for i, line in enumerate(lines) if line.rstrip() == f"{section}:")
    except StopIteration:
        raise AttuneError(f"recipe has no '{section}:' section to edit") from None
    for key, value in changes.items():
        pattern = re.compile(rf"^(\s+){re.escape(key)}:(\s*)([^#\n]*?)(\s*#.*)?$")
        for i in range(start + 1, len(lines)):
            line = lines[i]
            if line and not line[0].isspace():
                lines.insert(start + 1, f"  {key}: {_scalar(value)}")
                break  # left the section without finding the key: added at its top
            match = pattern.match(line)
            if match:
                indent, space, old, comment = match.groups()
                new = f"{indent}{key}:{space or ' '}{_scalar(value)}"
                # the old comment described the old value: say what changed instead
                column = len(line) - len(comment.lstrip()) if comment else len(new) + 2
                pad = " " * max(1, column - len(new))
                lines[i] = f"{new}{pad}# attune: was {old.strip()}"
                break
        else:
            lines.insert(start + 1, f"  {key}: {_scalar(value)}")
    result = "\n".join(lines) + "\n"
    parsed = yaml.safe_load(result)
    for key, value in changes.items():
        if parsed.get(section, {}).get(key) != value:
            raise AttuneError(f"could not write {section}.{key} = {value!r} into the recipe")
    return result
