"""Lines of a Python file where a configuration key is read, defined or consumed.

A citation must point at code that handles the key, not at any line whose text contains its
name: a docstring about dropout is no source for an attention move. The sites come from the
file's syntax tree, so comments and docstrings never count:

- an attribute ``cfg.threads`` (read or assigned), a name ``threads``, a parameter
  ``def f(threads)`` or a keyword ``f(threads=...)``;
- a dataclass or pydantic field ``threads: int = 1`` (how the registry's and the resolve
  workers' definition sites, ``runners/source_lines.py``, find keys);
- a string that is exactly the key or its option spelling: ``"--num-layers"`` in
  ``add_argument``, ``getattr(args, "threads")``, ``os.environ["OMP_NUM_THREADS"]``.

Names compare as ``runners.source_lines.mentions`` does: the key's last dotted part, ignoring
case, ``_`` and ``-``; an ``env.`` pattern with a wildcard matches names starting with its
fixed prefix.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

MAX_STRING = 120
"""A string constant longer than this is prose, never a key's spelling."""


def _squash(text: str) -> str:
    return "".join(c for c in text.lower() if c.isalnum())


@functools.lru_cache(maxsize=256)
def _sites(path: Path, mtime_ns: int) -> dict[str, frozenset[int]]:
    """Squashed identifier -> the lines naming it as code."""
    try:
        tree = ast.parse(path.read_text(errors="replace"), filename=str(path))
    except (SyntaxError, ValueError):
        return {}
    found: dict[str, set[int]] = {}

    def add(name: str, line: int | None) -> None:
        if line is not None and name:
            found.setdefault(_squash(name), set()).add(line)

    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            add(node.attr, node.end_lineno)
        elif isinstance(node, ast.Name):
            add(node.id, node.lineno)
        elif isinstance(node, ast.arg | ast.keyword) and node.arg:
            add(node.arg, node.lineno)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            text = node.value.strip()
            if 0 < len(text) <= MAX_STRING and not any(c.isspace() for c in text):
                add(text.lstrip("-"), node.lineno)
    return {k: frozenset(v) for k, v in found.items()}


def is_key_site(path: Path, line: int, key: str) -> bool:
    """Whether line ``line`` of the Python file ``path`` reads, defines or consumes ``key``."""
    if path.suffix != ".py":
        return False
    sites = _sites(path, path.stat().st_mtime_ns)
    name = key.removeprefix("env.").rsplit(".", 1)[-1]
    if any(c in name for c in "*?["):
        prefix = _squash(name.split("*", 1)[0].split("?", 1)[0].split("[", 1)[0])
        return bool(prefix) and any(
            line in lines for ident, lines in sites.items() if ident.startswith(prefix)
        )
    return line in sites.get(_squash(name), frozenset())
