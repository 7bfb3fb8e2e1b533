"""Where a configuration key is defined: the source line of a class field.

Used to point registry entries (and ``attune registry coverage``) at framework code. Pure
standard library, so the resolve workers can use it without importing anything else.
"""

from __future__ import annotations

import ast
import functools
import inspect
from pathlib import Path


@functools.cache
def _class_fields(path: Path) -> dict[str, dict[str, int]]:
    tree = ast.parse(path.read_text(), filename=str(path))
    fields: dict[str, dict[str, int]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            fields[node.name] = {
                stmt.target.id: stmt.lineno
                for stmt in node.body
                if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)
            }
    return fields


def field_line(cls: type, name: str) -> tuple[str, int] | None:
    """``(file, line)`` of the annotated field ``name`` in ``cls`` or its nearest base class."""
    for klass in cls.__mro__:
        try:
            path = Path(inspect.getfile(klass))
        except TypeError:
            continue  # builtins
        if path.suffix != ".py" or not path.is_file():
            continue
        line = _class_fields(path).get(klass.__name__, {}).get(name)
        if line is not None:
            return str(path), line
    return None


def relative_to_package(file: str, package_dir: Path) -> str:
    """``file`` relative to the directory that holds the top-level package ``package_dir``."""
    return Path(file).resolve().relative_to(package_dir.resolve().parent).as_posix()
