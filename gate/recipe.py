"""Read a recipe file into a ``Recipe``: YAML with a ``framework`` key and a framework body."""

from __future__ import annotations

from pathlib import Path

import yaml

from gate.env_allowlist import EnvRefused
from gate.errors import AttuneError
from gate.models import Recipe
from gate.registry import recipe_allowlist
from gate.text_files import read_utf8


def load_recipe(
    path: Path | str, *, check_env: bool = True, registry_dir: Path | None = None
) -> Recipe:
    """Parse ``path``; a missing or non-UTF-8 file, bad YAML or a missing ``framework`` is an
    AttuneError."""
    p = Path(path)
    return parse_recipe(
        read_utf8(p, "recipe"), path=p, check_env=check_env, registry_dir=registry_dir
    )


def parse_recipe(
    text: str, *, path: Path | str, check_env: bool = True, registry_dir: Path | None = None
) -> Recipe:
    """Parse recipe ``text``; ``path`` names it in errors and gives the default name. Its
    ``env`` is checked against the framework's allow-list (``registry_dir``'s files) unless
    ``check_env`` is False (``gate check``, which turns a refusal into a verdict)."""
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
    recipe = Recipe(framework=framework, name=name, path=str(p), body=data)
    if check_env:
        refuse_env(recipe, registry_dir)
    return recipe


def env_refusal(recipe: Recipe, registry_dir: Path | None = None) -> EnvRefused | None:
    """The refusal of the recipe's ``env`` (every variable its framework's registry does not
    allow, every value that is not one line of bounded text), or None."""
    env = recipe.body.get("env")
    if not env:
        return None
    return recipe_allowlist(recipe.framework, registry_dir).refusal(env, path=recipe.path)


def refuse_env(recipe: Recipe, registry_dir: Path | None = None) -> None:
    """``EnvRefused`` (an AttuneError naming each variable and the allowed list) when the
    recipe's ``env`` is not all on its framework's allow-list."""
    refusal = env_refusal(recipe, registry_dir)
    if refusal is not None:
        raise refusal
