"""The GitHub forge: the Forge interface over GitHub's REST API, through PyGithub.

The tuned pull request is the one ``/attune tune`` was commented on; candidates are branches
``attune/<campaign>/<n>`` cut from its head, each with one commit writing the recipe, and pull
requests whose base is the tuned branch. Every write is idempotent (a resumed campaign repeats
its last action): an existing branch, commit, pull request or marked comment is reused.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from bot.github.client import GitHubError, RepoClient
from bot.github.public_text import public
from bot.github.records import Pull
from bot.interfaces import (
    CheckResult,
    Comment,
    ForgeError,
    HeadMoved,
    PullRequest,
    marker_name,
    marker_tag,
    split_marker,
)


class GitHubForge:
    """Pull requests, checks, comments and merges of one repository."""

    def __init__(
        self,
        client: RepoClient,
        tuned_pr: int,
        *,
        authorize: Callable[[str], None] = lambda _action: None,
    ) -> None:
        self.client = client
        self.tuned_pr = tuned_pr
        self.authorize = authorize
        """Called before a merge; raises when the campaign's user may no longer write."""

    # --- reads ---

    def _pull(self, number: int) -> Pull:
        try:
            return self.client.pull(number)
        except GitHubError as exc:
            raise ForgeError(f"no pull request #{number} ({exc.status})") from None

    def _convert(self, pull: Pull) -> PullRequest:
        state = "merged" if pull.merged else ("closed" if pull.state == "closed" else "open")
        return PullRequest(
            number=pull.number,
            title=pull.title,
            body=pull.body,
            base=pull.base_ref,
            head=pull.head_ref,
            state=state,
            labels=pull.labels,
            checks=self._checks(pull.head_sha),
            head_sha=pull.head_sha,
            merged_sha=pull.merge_commit_sha if pull.merged else None,
        )

    def _checks(self, sha: str) -> list[CheckResult]:
        return [
            CheckResult(name=run.name, conclusion=run.conclusion, summary=run.summary)
            for run in self.client.check_runs(sha)
            if run.conclusion in ("success", "failure", "neutral")
        ]

    def head_sha(self, branch: str) -> str:
        try:
            return self.client.branch_sha(branch)
        except GitHubError as exc:
            raise ForgeError(f"no branch {branch!r} ({exc.status})") from None

    def get(self, number: int) -> PullRequest:
        return self._convert(self._pull(number))

    def pulls(self) -> list[PullRequest]:
        """The tuned pull request and the candidates based on its branch, by number."""
        tuned = self._pull(self.tuned_pr)
        found = [tuned, *self.client.pulls(base=tuned.head_ref)]
        return sorted((self._convert(p) for p in found), key=lambda p: p.number)

    def diff(self, number: int) -> str:
        return "\n".join(
            f"--- a/{f.filename}\n+++ b/{f.filename}\n{f.patch}"
            for f in self.client.pull_files(number)
        )

    # --- writes ---

    def open_tuned(self, recipe_path: str, recipe_text: str, title: str, body: str) -> PullRequest:
        """The pull request the campaign was started on; its head must hold the recipe."""
        pull = self._pull(self.tuned_pr)
        if self.client.text(recipe_path, pull.head_sha) is None:
            raise ForgeError(f"{recipe_path} is not in #{self.tuned_pr}'s head {pull.head_sha}")
        return self._convert(pull)

    def open_candidate(
        self,
        *,
        branch: str,
        base: str,
        base_sha: str,
        recipe_path: str,
        recipe_text: str,
        title: str,
        body: str,
        labels: list[str],
    ) -> PullRequest:
        existing = self.client.pulls(head=f"{self.client.owner}:{branch}")
        if existing:
            return self._convert(existing[0])
        found = self.head_sha(base)
        if found != base_sha:
            raise HeadMoved(f"{base} moved from {base_sha[:7]} to {found[:7]} during the campaign")
        self.client.create_branch(branch, base_sha)
        self.client.write_file(recipe_path, recipe_text, message=title, branch=branch)
        body = public(body) + f"\n\nPart of the attune campaign on #{self.tuned_pr}."
        number = self.client.create_pull(base=base, head=branch, title=title, body=body)
        if labels:
            self.client.add_labels(number, labels)
        return self.get(number)

    def set_check(self, number: int, check: CheckResult) -> None:
        """A check run named ``check.name`` on the pull request's head (``bot.checks``)."""
        sha = self._pull(number).head_sha
        summary = public(check.summary)
        self.client.post_check(check.name, sha, conclusion=check.conclusion, summary=summary)

    def merge(self, number: int, *, expected_base_sha: str, expected_head_sha: str) -> str:
        """The squash merge names the benchmarked head: GitHub answers 409 if it moved."""
        self.authorize("merge")
        pull = self._pull(number)
        if pull.merged:
            return self.head_sha(pull.base_ref)
        if pull.state == "closed":
            raise ForgeError(f"#{number} is closed; it cannot be merged")
        found = self.head_sha(pull.base_ref)
        if found != expected_base_sha:
            raise ForgeError(
                f"base moved: expected {expected_base_sha}, found {found} on {pull.base_ref}"
            )
        try:
            merged, sha, message = self.client.squash_merge(
                number, sha=expected_head_sha, title=pull.title
            )
        except GitHubError as exc:
            if exc.status not in (405, 409):
                raise
            refused = HeadMoved if exc.status == 409 else ForgeError  # 409: the head moved
            raise refused(
                f"GitHub refused to merge #{number} at {expected_head_sha[:7]} (the benchmarked "
                f"commit): {exc.reason}; nothing was merged"
            ) from None
        if not merged:
            raise ForgeError(f"#{number} was not merged: {message}")
        return sha

    def close(self, number: int) -> None:
        pull = self._pull(number)
        if pull.merged:
            raise ForgeError(f"#{number} is merged; it cannot be closed")
        if pull.state != "closed":
            self.client.close_pull(number)

    def comment(self, number: int, body: str, *, marker: str | None = None) -> Comment:
        name = marker_name(marker) if marker is not None else None
        body = public(body)  # no addresses or absolute paths of the bot's machines on GitHub
        text = f"{marker_tag(name)}\n{body}" if name else body
        if name:
            for existing in self.client.comments(number):
                if marker_tag(name) in existing.body:
                    if existing.body != text:
                        self.client.edit_comment(existing, text)
                    return Comment(id=existing.id, pr=number, body=body, marker=name)
        created = self.client.comment(number, text)
        return Comment(id=created, pr=number, body=body, marker=name)

    def comments(self, number: int) -> list[Comment]:
        out = []
        for c in self.client.comments(number):
            name, body = split_marker(c.body)
            out.append(Comment(id=c.id, pr=number, body=body, marker=name))
        return out


class PullContext:
    """The pull request a command was given on, and a client of its repository."""

    def __init__(
        self,
        client: RepoClient,
        number: int,
        user: str,
        installation_id: int,
        comment_id: int | None = None,
        commented_at: datetime | None = None,
    ) -> None:
        self.client = client
        self.installation_id = installation_id
        self.repo_name = client.full_name
        self.number = number
        self.user = user
        self.comment_id = comment_id
        """The comment that carried the command: a command is carried out once per comment."""
        self.commented_at = commented_at
        """When that comment was made (GitHub's clock): the head it means is the one then."""
        self.head_sha: str | None = None
        """The head the command was screened at (fork, permission); a campaign is bound to it."""

    def reply(self, body: str) -> None:
        self.client.comment(self.number, public(body))
