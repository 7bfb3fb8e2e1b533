"""``.github/attune.yml``: which files are recipes, read from the default branch only."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.github.repo_config import RepoConfig, parse_config
from gate.errors import AttuneError
from tests.github_harness import RECIPE_PATH, comment, github_mode, ledger_events, replies, wait_for


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("recipes/ported-gpt.yaml", True),
        ("recipes/llama/8b.yml", True),
        ("recipes/a/b/c.yaml", True),
        ("recipes.yaml", False),
        ("data/recipes/x.yaml", False),
        ("recipes/notes.md", False),
    ],
)
def test_the_default_globs(path: str, expected: bool) -> None:
    assert RepoConfig().is_recipe(path) is expected


def test_single_star_stays_in_one_folder() -> None:
    config = RepoConfig(recipes=["train/*.yaml"])
    assert config.is_recipe("train/a.yaml")
    assert not config.is_recipe("train/sub/a.yaml")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("recipes: [", "not YAML"),
        ("recipes: []", "recipes: List should have at least 1 item"),
        ("recipe: ['x']", "recipe: Extra inputs are not permitted"),
        ("recipes: 3", "recipes: Input should be a valid list"),
    ],
)
def test_a_bad_config_names_the_file_and_key(text: str, message: str) -> None:
    with pytest.raises(AttuneError, match=message) as info:
        parse_config(text, ".github/attune.yml@main")
    assert ".github/attune.yml@main" in str(info.value)


def test_the_default_branch_config_decides_what_is_a_recipe(
    tmp_path: Path,
) -> None:
    with github_mode(tmp_path) as (fake, app, number):
        fake.commit(
            "main", {".github/attune.yml": "recipes: ['models/*.yaml']\n"}, author="maintainer"
        )
        comment(fake, app, number, "maintainer", "/attune tune")
        wait_for(lambda: replies(fake, number), timeout=20, what="the reply")
        (reply,) = replies(fake, number)
        assert "changes 0 recipe files (none)" in reply and "`models/*.yaml`" in reply
        assert ledger_events(app) == []
        assert RECIPE_PATH.startswith("recipes/")  # a recipe only under the default globs
