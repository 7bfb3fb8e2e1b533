"""A training repository's ``.github/attune.yml``, read from its default branch only.

The file says which paths are recipes. It is read at the default branch's head, never at the
pull request being tuned or a candidate: a pull request cannot widen what attune treats as a
recipe for itself. A repository without the file gets the defaults.
"""

from __future__ import annotations

import re
from functools import lru_cache

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from bot.github.client import GitHubError, RepoClient
from bot.interfaces import ForgeError
from gate.errors import AttuneError

CONFIG_PATH = ".github/attune.yml"


class RepoConfig(BaseModel):
    """The keys of ``.github/attune.yml``; any other key is an error."""

    model_config = ConfigDict(extra="forbid")

    recipes: list[str] = Field(
        default_factory=lambda: ["recipes/**/*.yaml", "recipes/**/*.yml"], min_length=1
    )
    """Glob patterns from the repository root (``**`` spans folders) of the recipe files."""
    attune: str | None = None
    """The attune commit the repository's workflows pin (informative)."""

    def is_recipe(self, path: str) -> bool:
        return any(_glob(pattern).fullmatch(path) for pattern in self.recipes)


@lru_cache(maxsize=64)
def _glob(pattern: str) -> re.Pattern[str]:
    """``**/`` is any number of folders, ``*`` and ``?`` stay inside one path segment."""
    out, i = [], 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out.append("(?:[^/]+/)*")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    return re.compile("".join(out))


def parse_config(text: str, where: str) -> RepoConfig:
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise AttuneError(f"not YAML: {exc}", path=where) from None
    try:
        return RepoConfig.model_validate(data if data is not None else {})
    except ValidationError as exc:
        first = exc.errors()[0]
        key = ".".join(str(p) for p in first["loc"]) or "(top level)"
        raise AttuneError(f"{key}: {first['msg']}", path=where) from None


def read_config(repo: RepoClient) -> RepoConfig:
    """The config at the head of the default branch; the defaults when there is none."""
    branch = repo.default_branch
    where = f"{CONFIG_PATH}@{branch}"
    try:
        text = repo.text(CONFIG_PATH, branch)
    except GitHubError:
        raise  # GitHub's trouble, not the file's
    except ForgeError as exc:  # a directory
        raise AttuneError(str(exc), path=where) from None
    return RepoConfig() if text is None else parse_config(text, where)
