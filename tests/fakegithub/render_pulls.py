"""Response bodies for pull requests, issues, labels, comments and reactions."""

from __future__ import annotations

import urllib.parse
from typing import Any

from .model import Comment, Label, PullRequest, Reaction, Repo, iso
from .render import fit, node_id
from .render_git import GitRenderer


class PullRenderer(GitRenderer):
    """Adds the pull request side to ``GitRenderer``."""

    # -- issues, pulls, comments ---------------------------------------------------------------

    def label(self, repo: Repo, label: Label) -> dict[str, Any]:
        return {
            "id": label.id,
            "node_id": node_id("Label", label.id),
            "url": f"{self.repo_api(repo)}/labels/{urllib.parse.quote(label.name, safe='')}",
            "name": label.name,
            "color": label.color,
            "default": False,
            "description": label.description,
        }

    def association(self, repo: Repo, login: str) -> str:
        if login.lower() == repo.owner.lower():
            return "OWNER"
        if self.state.permission(login, repo.full_name) in ("admin", "maintain", "write"):
            return "COLLABORATOR"
        return "NONE"

    def reaction_rollup(self, url: str, comment_id: int | None) -> dict[str, Any]:
        reactions = self.state.reactions(comment_id) if comment_id is not None else []
        rollup: dict[str, Any] = {"url": url, "total_count": len(reactions)}
        for content in ("+1", "-1", "laugh", "hooray", "confused", "heart", "rocket", "eyes"):
            rollup[content] = sum(1 for r in reactions if r.content == content)
        return rollup

    def comment(self, comment: Comment) -> dict[str, Any]:
        repo = self.state.repo(comment.repo)
        url = f"{self.repo_api(repo)}/issues/comments/{comment.id}"
        issue_html = f"{self.repo_html(repo)}/pull/{comment.issue_number}"
        body = self.example("issue-comment")
        body.update(
            id=comment.id,
            node_id=node_id("IssueComment", comment.id),
            url=url,
            html_url=f"{issue_html}#issuecomment-{comment.id}",
            body=comment.body,
            user=self.user(comment.user),
            created_at=iso(comment.created_at),
            updated_at=iso(comment.updated_at),
            issue_url=f"{self.repo_api(repo)}/issues/{comment.issue_number}",
            author_association=self.association(repo, comment.user),
            reactions=self.reaction_rollup(f"{url}/reactions", comment.id),
        )
        return body

    def reaction(self, reaction: Reaction) -> dict[str, Any]:
        body = self.example("reaction")
        body.update(
            id=reaction.id,
            node_id=node_id("Reaction", reaction.id),
            user=self.user(reaction.user),
            content=reaction.content,
            created_at=iso(reaction.created_at),
        )
        return body

    def pull_urls(self, pr: PullRequest) -> dict[str, str]:
        api, html = self.repo_api(pr.repo), self.repo_html(pr.repo)
        return {
            "url": f"{api}/pulls/{pr.number}",
            "html_url": f"{html}/pull/{pr.number}",
            "diff_url": f"{html}/pull/{pr.number}.diff",
            "patch_url": f"{html}/pull/{pr.number}.patch",
            "issue_url": f"{api}/issues/{pr.number}",
            "commits_url": f"{api}/pulls/{pr.number}/commits",
            "review_comments_url": f"{api}/pulls/{pr.number}/comments",
            "review_comment_url": f"{api}/pulls/comments{{/number}}",
            "comments_url": f"{api}/issues/{pr.number}/comments",
            "statuses_url": f"{api}/statuses/{pr.head_sha}",
        }

    def pull_end(self, repo: Repo, branch: str, sha: str) -> dict[str, Any]:
        return {
            "label": f"{repo.owner}:{branch}",
            "ref": branch,
            "sha": sha,
            "user": self.user(repo.owner),
            "repo": self.repo(repo, "repository"),
        }

    def pull(self, pr: PullRequest, simple: bool = False) -> dict[str, Any]:
        repo = self.state.repo(pr.repo)
        urls = self.pull_urls(pr)
        base_sha = repo.branches.get(pr.base, pr.merge_commit_sha or pr.head_sha)
        links = {
            "self": urls["url"],
            "html": urls["html_url"],
            "issue": urls["issue_url"],
            "comments": urls["comments_url"],
            "review_comments": urls["review_comments_url"],
            "review_comment": urls["review_comment_url"],
            "commits": urls["commits_url"],
            "statuses": urls["statuses_url"],
        }
        values: dict[str, Any] = dict(urls)
        values.update(
            id=pr.id,
            node_id=node_id("PullRequest", pr.id),
            number=pr.number,
            state=pr.state,
            locked=False,
            title=pr.title,
            user=self.user(pr.user),
            body=pr.body or None,
            labels=[self.label(repo, self.state.label(repo, name)) for name in pr.labels],
            milestone=None,
            active_lock_reason=None,
            created_at=iso(pr.created_at),
            updated_at=iso(pr.updated_at),
            closed_at=iso(pr.closed_at),
            merged_at=iso(pr.merged_at),
            merge_commit_sha=pr.merge_commit_sha,
            assignee=None,
            assignees=[],
            requested_reviewers=[],
            requested_teams=[],
            head=self.pull_end(self.state.repo(pr.head_repo), pr.head, pr.head_sha),
            base=self.pull_end(repo, pr.base, base_sha),
            _links={key: {"href": href} for key, href in links.items()},
            author_association=self.association(repo, pr.user),
            auto_merge=None,
            draft=pr.draft,
        )
        if simple:
            return fit(self.example("pull-request-simple-items", 0), values)
        store = self.state.store
        compared = self.state.pull_base_sha(pr)
        merge_base = store.merge_base(pr.head_sha, compared)
        counted = [change.patch() for change in self.state.pull_files(pr)]
        mergeable = self.state.mergeable(pr) if pr.state == "open" else None
        ahead = len(store.ancestors(pr.head_sha))
        ahead -= len(store.ancestors(merge_base)) if merge_base else 0
        values.update(
            merged=pr.merged,
            mergeable=mergeable,
            rebaseable=mergeable,
            mergeable_state="clean" if mergeable else "dirty" if mergeable is False else "unknown",
            merged_by=self.user(pr.merged_by) if pr.merged_by else None,
            comments=len(self.state.comments(pr.number, repo.full_name)),
            review_comments=0,
            maintainer_can_modify=False,
            commits=max(ahead, 0),
            additions=sum(c[1] for c in counted),
            deletions=sum(c[2] for c in counted),
            changed_files=len(counted),
        )
        return fit(self.example("pull-request"), values)

    def issue(self, pr: PullRequest) -> dict[str, Any]:
        """GET issues/{n} of a pull request (the issue half)."""
        repo = self.state.repo(pr.repo)
        urls = self.pull_urls(pr)
        api = f"{self.repo_api(repo)}/issues/{pr.number}"
        return {
            "url": api,
            "repository_url": self.repo_api(repo),
            "labels_url": f"{api}/labels{{/name}}",
            "comments_url": f"{api}/comments",
            "events_url": f"{api}/events",
            "html_url": urls["html_url"],
            "id": pr.id + 1,
            "node_id": node_id("Issue", pr.id + 1),
            "number": pr.number,
            "title": pr.title,
            "user": self.user(pr.user),
            "labels": [self.label(repo, self.state.label(repo, name)) for name in pr.labels],
            "state": pr.state,
            "locked": False,
            "assignee": None,
            "assignees": [],
            "milestone": None,
            "comments": len(self.state.comments(pr.number, repo.full_name)),
            "created_at": iso(pr.created_at),
            "updated_at": iso(pr.updated_at),
            "closed_at": iso(pr.closed_at),
            "author_association": self.association(repo, pr.user),
            "active_lock_reason": None,
            "draft": pr.draft,
            "pull_request": {
                "url": urls["url"],
                "html_url": urls["html_url"],
                "diff_url": urls["diff_url"],
                "patch_url": urls["patch_url"],
                "merged_at": iso(pr.merged_at),
            },
            "body": pr.body or None,
            "reactions": self.reaction_rollup(f"{api}/reactions", None),
            "timeline_url": f"{api}/timeline",
            "performed_via_github_app": None,
            "state_reason": "completed" if pr.merged else None,
        }
