"""Where a configuration key is defined: the source line of a class field.

Used to point registry entries (and ``attune registry coverage``) at framework code. Pure
standard library, so the resolve workers can use it without importing anything else.
"""

from __future__ import annotations

import ast
import functools
import inspect
import re
import textwrap
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
    """``(file, line)`` of the annotated field ``name`` in ``cls`` or its nearest base class,
    each class looked up by its bare name in its file (see ``qualified_field_line``)."""
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


@functools.cache
def _own_fields(cls: type) -> dict[str, int]:
    """Annotated fields declared in the body of ``cls`` itself and their absolute lines.

    The class is located by ``inspect`` through its qualified name, so that nested classes
    sharing a bare name (torchtitan nests a ``Config`` in nearly every component, several per
    file) are told apart.
    """
    try:
        lines, start = inspect.getsourcelines(cls)
    except (OSError, TypeError):
        return {}
    tree = ast.parse(textwrap.dedent("".join(lines)))
    node = tree.body[0] if tree.body else None
    if not isinstance(node, ast.ClassDef):
        return {}
    return {
        stmt.target.id: start + stmt.lineno - 1
        for stmt in node.body
        if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)
    }


def qualified_field_line(cls: type, name: str) -> tuple[str, int] | None:
    """``(file, line)`` of field ``name`` in ``cls`` or the nearest base class declaring it.

    Like ``field_line``, but each class is found by its qualified name rather than its bare
    name: use it where a file holds several classes of the same name (nested ``Config``s).
    """
    for klass in cls.__mro__:
        line = _own_fields(klass).get(name)
        if line is not None:
            return inspect.getsourcefile(klass) or "", line
    return None


def relative_to_package(file: str, package_dir: Path) -> str:
    """``file`` relative to the directory that holds the top-level package ``package_dir``."""
    return Path(file).resolve().relative_to(package_dir.resolve().parent).as_posix()


_REPO_ROOT = Path(__file__).resolve().parents[1]
_DISTRIBUTIONS = {"megatron": "megatron-core", "torchtitan": "torchtitan", "torch": "torch"}
"""Top-level package -> the distribution whose version ``@version`` sources name."""


def locate_source(source: str) -> tuple[Path, int] | None:
    """The file and line a registry ``source`` (``path:line[@version]``) points at.

    Paths of this repository are relative to its root; others to the directory holding an
    installed framework package. None when that package is missing, or installed at another
    version than the source names (its lines cannot be checked here).
    """
    import importlib.metadata
    import importlib.util

    location, _, version = source.partition("@")
    path, _, line = location.rpartition(":")
    if (_REPO_ROOT / path).is_file():
        return _REPO_ROOT / path, int(line)
    top = path.split("/", 1)[0]
    spec = importlib.util.find_spec(top) if top.isidentifier() else None
    if spec is None or not spec.submodule_search_locations:
        return None
    if version:
        try:
            installed = importlib.metadata.version(_DISTRIBUTIONS.get(top, top))
        except importlib.metadata.PackageNotFoundError:
            return None
        if installed.split("+")[0] != version:
            return None
    package = Path(next(iter(spec.submodule_search_locations)))
    return package.parent / path, int(line)


def _squash(text: str) -> str:
    return "".join(c for c in text.lower() if c.isalnum())


def mentions(text: str, key: str) -> bool:
    """Whether a source line names ``key``'s last dotted part as a whole identifier, ignoring
    case, ``_`` and ``-`` (``--num-layers`` names ``num_layers``). For ``env.`` patterns the
    fixed prefix must start an identifier (``env.NCCL_*`` is named by ``NCCL_PROTO``)."""
    name = key.removeprefix("env.").rsplit(".", 1)[-1]
    prefix, wildcard = name.split("*", 1)[0].split("?", 1)[0], any(c in name for c in "*?[")
    words = [_squash(w) for w in re.findall(r"[A-Za-z0-9_-]+", text)]
    if wildcard:
        return bool(_squash(prefix)) and any(w.startswith(_squash(prefix)) for w in words)
    return _squash(name) in words


def source_problem(key: str, source: str) -> str | None:
    """Why ``source`` does not point at ``key`` (None when it does, or cannot be checked)."""
    located = locate_source(source)
    if located is None:
        return None
    path, line = located
    lines = path.read_text().splitlines()
    if not 1 <= line <= len(lines):
        return f"{key}: {source} is past the end of the file ({len(lines)} lines)"
    text = lines[line - 1]
    if not mentions(text, key):
        return f"{key}: {source} reads {text.strip()!r}"
    return None
