"""What ``/attune tune`` checks on the pull request before a campaign is opened on it.

The pull request may not touch what guards attune, must change exactly one recipe (by the
default branch's ``.github/attune.yml``, never its own), and its head must not move while it
is being screened: the campaign is bound to the head that was screened.
"""

from __future__ import annotations

from dataclasses import dataclass

from bot.forges.github import PullContext
from bot.github.client import GitHubError
from bot.github.repo_config import CONFIG_PATH, read_config
from bot.interfaces import ForgeError
from bot.render import replies
from gate.errors import AttuneError

GUARDED = ("gate/", "registry/", ".github/")
"""Paths a tuned or candidate pull request may never change (CODEOWNERS guards them)."""


@dataclass(frozen=True)
class Screened:
    """The recipe a campaign tunes, as it is at the screened head."""

    path: str
    head: str
    text: str


def screen_recipe(ctx: PullContext) -> Screened | str:
    """The pull request's one recipe at its screened head, or the reply that refuses it."""
    pull = ctx.client.pull(ctx.number)
    head = ctx.head_sha or pull.head_sha
    files = ctx.client.pull_files(ctx.number)
    guarded = [f.filename for f in files if f.filename.startswith(GUARDED)]
    if guarded:
        return replies.guarded_paths(guarded)
    try:
        config = read_config(ctx.client)  # the default branch's, never this pull request's
    except AttuneError as exc:
        return replies.broken_config(str(exc))
    recipes = [f.filename for f in files if config.is_recipe(f.filename) and f.status != "removed"]
    if len(recipes) != 1:
        return replies.not_one_recipe(recipes, config.recipes, CONFIG_PATH)
    path = recipes[0]
    try:
        text = ctx.client.text(path, head)
    except GitHubError:
        raise
    except ForgeError:
        return replies.is_a_directory(path)
    now = ctx.client.pull(ctx.number).head_sha
    if text is None or now != head or pull.head_sha != head:
        return replies.moved_while_screening(head, now)
    return Screened(path=path, head=head, text=text)
