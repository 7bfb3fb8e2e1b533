"""Write a candidate recipe: the incumbent's text with one lever changed, comments kept.

Editing the line in place (instead of re-dumping the YAML) keeps the candidate's diff to the
lines that changed, which is what a reviewer reads.
"""

from __future__ import annotations

import re
from typing import Any

import yaml

from gate.errors import AttuneError


def _scalar(value: Any) -> str:
    text = yaml.safe_dump(value, default_flow_style=True).strip()
    return text.removesuffix("\n...").strip()


def apply_changes(text: str, changes: dict[str, Any], *, section: str = "config") -> str:
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
                break  # left the section
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
