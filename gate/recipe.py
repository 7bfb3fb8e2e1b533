"""Read a recipe file into a ``Recipe``: YAML with a ``framework`` key and a framework body."""

from __future__ import annotations

from pathlib import Path

import yaml

from gate.errors import AttuneError
from gate.models import Recipe


def load_recipe(path: Path | str) -> Recipe:
    """Parse ``path``; a missing file, bad YAML or a missing ``framework`` is an AttuneError."""
    p = Path(path)
    try:
        text = p.read_text()
    except OSError as exc:
        raise AttuneError(f"cannot read recipe ({exc.strerror})", path=str(p)) from exc
    return parse_recipe(text, path=p)


def parse_recipe(text: str, *, path: Path | str) -> Recipe:
    """Parse recipe ``text``; ``path`` names it in errors and gives the default name."""
    p = Path(path)
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or "invalid YAML"
        raise AttuneError(f"malformed YAML{where}: {problem}", path=str(p)) from exc
    if not isinstance(data, dict):
        raise AttuneError("a recipe must be a YAML mapping", path=str(p))
    framework = data.pop("framework", None)
    if not isinstance(framework, str) or not framework:
        raise AttuneError(
            "missing 'framework' (e.g. framework: embedded)", path=str(p), key="framework"
        )
    name = data.pop("name", None) or p.stem
    if not isinstance(name, str):
        raise AttuneError("must be a string", path=str(p), key="name")
    return Recipe(framework=framework, name=name, path=str(p), body=data)
