"""What ``/attune tune`` checks on the pull request before a campaign is opened on it.

The pull request must be into the default branch, may not touch what guards attune, must
change exactly one recipe (by the default branch's ``.github/attune.yml``, never its own) and
nothing GitHub does not list (its list of a pull request's files stops at 3,000), and its head
must not move while it is being screened: the campaign is bound to the head that was screened.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from bot.forges.github import PullContext
from bot.github.client import GitHubError
from bot.github.public_text import for_the_pull_request
from bot.github.repo_config import CONFIG_PATH, read_config
from bot.interfaces import ForgeError
from bot.render import replies
from gate.errors import AttuneError

log = logging.getLogger("attune.github")

GUARDED = ("gate/", "registry/", ".github/")
"""Paths a tuned or candidate pull request may never change (CODEOWNERS guards them)."""


@dataclass(frozen=True)
class Screened:
    """The recipe a campaign tunes, as it is at the screened head."""

    path: str
    head: str
    text: str


def bound_head(ctx: PullContext, named: str | None) -> str | None:
    """The reply refusing a tune whose head is not the one the comment meant, or None.

    With ``sha=`` the head must be that commit. Without it, the head must not have been pushed
    to after the comment was made (GitHub's record of pushes to the branch): a push between the
    comment and the moment a worker takes the command up is not what the commenter asked for.
    """
    head = ctx.head_sha or ctx.client.pull(ctx.number).head_sha
    if named is not None:
        if head.startswith(named):
            return None
        return (
            f"Refused: `sha={named}` is not the head of this pull request ({head[:7]}). "
            "Check what you mean to tune and comment again."
        )
    if ctx.commented_at is None:
        return None
    branch = ctx.client.pull(ctx.number).head_ref
    try:
        pushed = ctx.client.pushed_since(branch, ctx.commented_at)
    except GitHubError as exc:
        if exc.status != 404:
            raise
        return (  # a GitHub without the activity API (an older GitHub Enterprise Server)
            "Refused: this GitHub does not say when the branch was last pushed to, so attune "
            "cannot tell that its head is the one you meant. Name it: "
            f"`/attune tune sha={head[:12]}`."
        )
    if not pushed:
        return None
    return (
        f"Refused: `{branch}` was pushed to after your comment (its head is now {head[:7]}), "
        "so this is not the commit you asked to tune. Comment again, or name the commit with "
        f"`/attune tune sha={head[:12]}`."
    )


def screen_recipe(ctx: PullContext) -> Screened | str:
    """The pull request's one recipe at its screened head, or the reply that refuses it."""
    pull = ctx.client.pull(ctx.number)
    head = ctx.head_sha or pull.head_sha
    if pull.base_ref != ctx.client.default_branch:
        return (
            f"Refused: this pull request is into `{pull.base_ref}`, not the default branch "
            f"`{ctx.client.default_branch}`. attune tunes pull requests into the default branch "
            "only: its configuration, workflows and branch protection are that branch's."
        )
    files = ctx.client.pull_files(ctx.number)
    if pull.changed_files is not None and pull.changed_files > len(files):
        return (
            f"Refused: this pull request changes {pull.changed_files} files, and GitHub lists "
            f"only {len(files)} of them: attune cannot check what it cannot see. Split it."
        )
    guarded = [f.filename for f in files if f.filename.startswith(GUARDED)]
    if guarded:
        return replies.guarded_paths(guarded)
    try:
        config = read_config(ctx.client)  # the default branch's, never this pull request's
    except AttuneError as exc:
        return replies.broken_config(for_the_pull_request(log, "the repository's config", exc))
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
