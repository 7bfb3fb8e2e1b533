"""The GitHub forge: the Forge interface over GitHub's REST API, through PyGithub.

The tuned pull request is the one ``/attune tune`` was commented on; candidates are branches
``attune/<campaign>/<n>`` cut from its head, each with one commit writing the recipe, and pull
requests whose base is the tuned branch. Every write is idempotent (a resumed campaign repeats
its last action): an existing branch, commit, pull request or marked comment is reused.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from github import Auth, Github, GithubException
from github.PullRequest import PullRequest as GhPull
from github.Repository import Repository

from bot.github.settings import Settings
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

BASELINE_GATE_CHECK = "attune/baseline-gate"
"""The campaign's own gate verdict (candidate vs the ORIGINAL baseline). ``attune/gate`` is
the workflow's check (candidate vs its base branch); the two names never collide."""


class GitHubForge:
    """Pull requests, checks, comments and merges of one repository."""

    def __init__(
        self,
        repo: Repository,
        tuned_pr: int,
        *,
        authorize: Callable[[str], None] = lambda _action: None,
    ) -> None:
        self.repo = repo
        self.tuned_pr = tuned_pr
        self.authorize = authorize
        """Called before a merge; raises when the campaign's user may no longer write."""
        self._owner = repo.full_name.split("/", 1)[0]

    # --- reads ---

    def _pull(self, number: int) -> GhPull:
        try:
            return self.repo.get_pull(number)
        except GithubException as exc:
            raise ForgeError(f"no pull request #{number} ({exc.status})") from None

    def _convert(self, pull: GhPull) -> PullRequest:
        state = "merged" if pull.merged else ("closed" if pull.state == "closed" else "open")
        return PullRequest(
            number=pull.number,
            title=pull.title,
            body=pull.body or "",
            base=pull.base.ref,
            head=pull.head.ref,
            state=state,
            labels=[label.name for label in pull.labels],
            checks=self._checks(pull.head.sha),
            head_sha=pull.head.sha,
            merged_sha=pull.merge_commit_sha if pull.merged else None,
        )

    def _checks(self, sha: str) -> list[CheckResult]:
        checks = []
        for run in self.repo.get_commit(sha).get_check_runs():
            if run.conclusion in ("success", "failure", "neutral"):
                summary = (run.output.summary if run.output else None) or ""
                checks.append(
                    CheckResult(name=run.name, conclusion=run.conclusion, summary=summary)
                )
        return checks

    def head_sha(self, branch: str) -> str:
        try:
            return self.repo.get_git_ref(f"heads/{branch}").object.sha
        except GithubException as exc:
            raise ForgeError(f"no branch {branch!r} ({exc.status})") from None

    def get(self, number: int) -> PullRequest:
        return self._convert(self._pull(number))

    def pulls(self) -> list[PullRequest]:
        """The tuned pull request and the candidates based on its branch, by number."""
        tuned = self._pull(self.tuned_pr)
        found = [tuned, *self.repo.get_pulls(state="all", base=tuned.head.ref)]
        return sorted((self._convert(p) for p in found), key=lambda p: p.number)

    def diff(self, number: int) -> str:
        parts = []
        for f in self._pull(number).get_files():
            parts.append(f"--- a/{f.filename}\n+++ b/{f.filename}\n{f.patch or ''}")
        return "\n".join(parts)

    # --- writes ---

    def open_tuned(self, recipe_path: str, recipe_text: str, title: str, body: str) -> PullRequest:
        """The pull request the campaign was started on; its head must hold the recipe."""
        pull = self._pull(self.tuned_pr)
        if self._text(recipe_path, pull.head.sha) is None:
            raise ForgeError(f"{recipe_path} is not in #{self.tuned_pr}'s head {pull.head.sha}")
        return self._convert(pull)

    def _text(self, path: str, ref: str) -> str | None:
        try:
            content = self.repo.get_contents(path, ref=ref)
        except GithubException as exc:
            if exc.status == 404:
                return None
            raise
        if isinstance(content, list):
            raise ForgeError(f"{path} is a directory")
        return content.decoded_content.decode()

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
        existing = list(self.repo.get_pulls(state="all", head=f"{self._owner}:{branch}"))
        if existing:
            return self._convert(existing[0])
        found = self.head_sha(base)
        if found != base_sha:
            raise HeadMoved(f"{base} moved from {base_sha[:7]} to {found[:7]} during the campaign")
        try:
            self.repo.create_git_ref(f"refs/heads/{branch}", base_sha)
        except GithubException as exc:
            if exc.status != 422:  # 422: the branch exists (an earlier, interrupted attempt)
                raise
        current = self.repo.get_contents(recipe_path, ref=branch)
        if isinstance(current, list):
            raise ForgeError(f"{recipe_path} is a directory")
        if current.decoded_content.decode() != recipe_text:
            self.repo.update_file(recipe_path, title, recipe_text, current.sha, branch=branch)
        body += f"\n\nPart of the attune campaign on #{self.tuned_pr}."
        pull = self.repo.create_pull(base=base, head=branch, title=title, body=body)
        if labels:
            pull.add_to_labels(*labels)
        return self._convert(self._pull(pull.number))

    def set_check(self, number: int, check: CheckResult) -> None:
        """A check run on the pull request's head; ``attune/gate`` is the workflow's, so the
        campaign's own verdict is posted as ``attune/baseline-gate``."""
        name = BASELINE_GATE_CHECK if check.name == "attune/gate" else check.name
        sha = self._pull(number).head.sha
        output: dict[str, Any] = {"title": f"{name}: {check.conclusion}", "summary": check.summary}
        for run in self.repo.get_commit(sha).get_check_runs(check_name=name):
            run.edit(status="completed", conclusion=check.conclusion, output=output)
            return
        self.repo.create_check_run(
            name, sha, status="completed", conclusion=check.conclusion, output=output
        )

    def merge(self, number: int, *, expected_base_sha: str, expected_head_sha: str) -> str:
        """The squash merge names the benchmarked head: GitHub answers 409 if it moved."""
        self.authorize("merge")
        pull = self._pull(number)
        if pull.merged:
            return self.head_sha(pull.base.ref)
        if pull.state == "closed":
            raise ForgeError(f"#{number} is closed; it cannot be merged")
        found = self.head_sha(pull.base.ref)
        if found != expected_base_sha:
            raise ForgeError(
                f"base moved: expected {expected_base_sha}, found {found} on {pull.base.ref}"
            )
        try:
            status = pull.merge(
                merge_method="squash",
                sha=expected_head_sha,
                commit_title=pull.title,
                commit_message="",
            )
        except GithubException as exc:
            if exc.status not in (405, 409):
                raise
            message = exc.data.get("message") if isinstance(exc.data, dict) else exc.data
            refused = HeadMoved if exc.status == 409 else ForgeError  # 409: the head moved
            raise refused(
                f"GitHub refused to merge #{number} at {expected_head_sha[:7]} (the benchmarked "
                f"commit): {message}; nothing was merged"
            ) from None
        if not status.merged:
            raise ForgeError(f"#{number} was not merged: {status.message}")
        return str(status.sha)

    def close(self, number: int) -> None:
        pull = self._pull(number)
        if pull.merged:
            raise ForgeError(f"#{number} is merged; it cannot be closed")
        if pull.state != "closed":
            pull.edit(state="closed")

    def comment(self, number: int, body: str, *, marker: str | None = None) -> Comment:
        issue = self.repo.get_issue(number)
        name = marker_name(marker) if marker is not None else None
        text = f"{marker_tag(name)}\n{body}" if name else body
        if name:
            for existing in issue.get_comments():
                if marker_tag(name) in (existing.body or ""):
                    if existing.body != text:
                        existing.edit(text)
                    return Comment(id=existing.id, pr=number, body=body, marker=name)
        created = issue.create_comment(text)
        return Comment(id=created.id, pr=number, body=body, marker=name)

    def comments(self, number: int) -> list[Comment]:
        out = []
        for c in self.repo.get_issue(number).get_comments():
            name, body = split_marker(c.body or "")
            out.append(Comment(id=c.id, pr=number, body=body, marker=name))
        return out


GithubFactory = Callable[[int], Github]
"""Installation id -> a client authenticated as that installation."""


def installation_client(settings: Settings, **github_kwargs: Any) -> GithubFactory:
    """App auth: a JWT signed with the App's key is exchanged for installation tokens (PyGithub
    refreshes them). ``github_kwargs`` go to ``Github`` (tests turn retries and throttling off)."""
    app_auth = Auth.AppAuth(settings.app_id, settings.private_key())

    def client(installation_id: int) -> Github:
        auth = app_auth.get_installation_auth(installation_id)
        return Github(base_url=settings.github_api_url, auth=auth, **github_kwargs)

    return client


class PullContext:
    """The pull request a command was given on, and an authenticated client for its repo."""

    def __init__(
        self,
        github: Github,
        repo: str,
        number: int,
        user: str,
        installation_id: int,
        comment_id: int | None = None,
    ) -> None:
        self.installation_id = installation_id
        self.repo_name = repo
        self.number = number
        self.user = user
        self.comment_id = comment_id
        """The comment that carried the command: a command is carried out once per comment."""
        self.head_sha: str | None = None
        """The head the command was screened at (fork, permission); a campaign is bound to it."""
        self.repo = github.withLazy(True).get_repo(repo)

    def reply(self, body: str) -> None:
        self.repo.get_issue(self.number).create_comment(body)
