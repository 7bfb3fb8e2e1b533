"""Pull requests, labels, comments, reactions and check runs in the fake's state."""

from __future__ import annotations

from typing import Any

from .core import StateCore
from .gitstore import FileChange
from .model import CheckRun, Comment, Label, PullRequest, Reaction, Repo, now

LABEL_COLORS = ("d73a4a", "0075ca", "cfd3d7", "a2eeef", "7057ff", "008672", "e4e669", "d876e3")


class PullsMixin(StateCore):
    """Pull requests and what hangs off them; mixed into ``FakeState``."""

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.all_comments: dict[int, Comment] = {}
        self.all_reactions: list[Reaction] = []
        self.all_check_runs: dict[int, CheckRun] = {}

    # -- pull requests -------------------------------------------------------------------------

    def open_pull(
        self,
        head: str,
        base: str,
        title: str,
        body: str = "",
        user: str = "octocat",
        fork: bool = False,
        repo: str | None = None,
        head_repo: str | None = None,
    ) -> int:
        """A pull request from branch ``head`` into ``base``. With ``fork=True`` the head
        branch lives in ``user``'s fork (created on demand from this repository's branches),
        or in ``head_repo`` when given."""
        with self.lock:
            target = self.repo(repo)
            if head_repo is not None:
                source = self.repo(head_repo)
            else:
                source = self.fork_repo(user, target.full_name) if fork else target
            if fork and head not in source.branches and head in target.branches:
                source.branches[head] = target.branches[head]
            if head not in source.branches or base not in target.branches:
                raise KeyError(f"unknown branch {head!r} or {base!r}")
            self.user(user)
            number = target.next_number
            target.next_number += 1
            stamp = now()
            self.pull_requests[(target.full_name.lower(), number)] = PullRequest(
                repo=target.full_name,
                number=number,
                id=self.next_id(),
                title=title,
                body=body,
                head=head,
                head_repo=source.full_name,
                base=base,
                user=user,
                head_sha=source.branches[head],
                created_at=stamp,
                updated_at=stamp,
            )
            return number

    def pull(self, number: int, repo: str | None = None) -> PullRequest:
        with self.lock:
            return self.pull_requests[(self.repo(repo).full_name.lower(), number)]

    def find_pull(self, target: Repo, number: int) -> PullRequest | None:
        return self.pull_requests.get((target.full_name.lower(), number))

    def pulls(self, repo: str | None = None) -> list[PullRequest]:
        with self.lock:
            key = self.repo(repo).full_name
            return [pr for pr in self.pull_requests.values() if pr.repo == key]

    def merge_pull(
        self, pr: PullRequest, method: str, title: str, message: str, merged_by: str
    ) -> str | None:
        """Merge ``pr`` (squash/rebase: one commit; merge: a two-parent commit); returns the
        new base head, or ``None`` on a conflict."""
        with self.lock:
            target = self.repo(pr.repo)
            base_sha = target.branches[pr.base]
            merged = self.store.three_way(base_sha, pr.head_sha)
            if merged is None:
                return None
            pr.merged_base = base_sha
            parents = (base_sha, pr.head_sha) if method == "merge" else (base_sha,)
            text = title if not message else f"{title}\n\n{message}"
            made = self.store.make_commit(merged, parents, text, merged_by)
            self.move_branch(target, pr.base, made.sha)
            stamp = now()
            pr.state, pr.merged, pr.merged_at, pr.closed_at = "closed", True, stamp, stamp
            pr.merged_by, pr.merge_commit_sha, pr.updated_at = merged_by, made.sha, stamp
            return made.sha

    def pull_base_sha(self, pr: PullRequest) -> str:
        """The base commit a pull request is compared with (frozen once merged)."""
        with self.lock:
            current = self.repo(pr.repo).branches.get(pr.base)
            return pr.merged_base or current or pr.head_sha

    def pull_files(self, pr: PullRequest) -> list[FileChange]:
        """What the pull request changes: head against its merge base with the base branch."""
        with self.lock:
            return self.store.changes_since_base(self.pull_base_sha(pr), pr.head_sha)

    def mergeable(self, pr: PullRequest) -> bool:
        with self.lock:
            base_sha = self.repo(pr.repo).branches.get(pr.base)
            if pr.state != "open" or base_sha is None:
                return False
            return self.store.three_way(base_sha, pr.head_sha) is not None

    def label(self, target: Repo, name: str) -> Label:
        """The repository label ``name``, created on first use."""
        with self.lock:
            found = target.labels.get(name.lower())
            if found is None:
                color = LABEL_COLORS[sum(name.encode()) % len(LABEL_COLORS)]
                found = Label(self.next_id(), name, color)
                target.labels[name.lower()] = found
            return found

    # -- comments, reactions, checks -----------------------------------------------------------

    def add_comment(
        self, number: int, body: str, user: str = "octocat", repo: str | None = None
    ) -> Comment:
        """A comment on issue/pull request ``number``."""
        with self.lock:
            target = self.repo(repo)
            if self.find_pull(target, number) is None:
                raise KeyError(f"no pull request #{number} in {target.full_name}")
            self.user(user)
            stamp = now()
            made = Comment(self.next_id(), target.full_name, number, body, user, stamp, stamp)
            self.all_comments[made.id] = made
            return made

    def comments(self, number: int, repo: str | None = None) -> list[Comment]:
        with self.lock:
            key = self.repo(repo).full_name
            return [
                c for c in self.all_comments.values() if c.repo == key and c.issue_number == number
            ]

    def comment(self, comment_id: int) -> Comment:
        return self.all_comments[comment_id]

    def add_reaction(self, comment_id: int, content: str, user: str) -> tuple[Reaction, bool]:
        """``user``'s ``content`` reaction on a comment and whether it is new."""
        with self.lock:
            for existing in self.all_reactions:
                if (existing.comment_id, existing.content, existing.user) == (
                    comment_id,
                    content,
                    user,
                ):
                    return existing, False
            made = Reaction(self.next_id(), comment_id, content, user, now())
            self.all_reactions.append(made)
            return made, True

    def reactions(self, comment_id: int) -> list[Reaction]:
        with self.lock:
            return [r for r in self.all_reactions if r.comment_id == comment_id]

    def add_check_run(self, target: Repo, name: str, head_sha: str, **fields: Any) -> CheckRun:
        with self.lock:
            run = CheckRun(self.next_id(), target.full_name, name, head_sha, app_id=self.app_id)
            for key, value in fields.items():
                setattr(run, key, value)
            self.all_check_runs[run.id] = run
            return run

    def check_runs(self, sha_or_number: str | int, repo: str | None = None) -> list[CheckRun]:
        """Check runs on a commit sha, or on a pull request's current head (an ``int``)."""
        with self.lock:
            target = self.repo(repo)
            sha = (
                self.pull(sha_or_number, repo).head_sha
                if isinstance(sha_or_number, int)
                else sha_or_number
            )
            return [
                run
                for run in self.all_check_runs.values()
                if run.repo == target.full_name and run.head_sha == sha
            ]
