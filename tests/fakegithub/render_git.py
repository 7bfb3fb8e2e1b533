"""Response bodies for git refs, commits, branches, contents and diffs."""

from __future__ import annotations

import base64
import urllib.parse
from typing import Any

from .gitstore import Commit, FileChange, blob_sha, changes
from .model import Repo, iso
from .render import CoreRenderer, node_id, quoted


class GitRenderer(CoreRenderer):
    """Adds the git side to ``CoreRenderer``."""

    # -- git -----------------------------------------------------------------------------------

    def git_ref(self, repo: Repo, branch: str) -> dict[str, Any]:
        sha = repo.branches[branch]
        body = self.example("git-ref")
        body.update(
            ref=f"refs/heads/{branch}",
            node_id=node_id("Ref", int(blob_sha(f"{repo.full_name}:{branch}")[:7], 16)),
            url=f"{self.repo_api(repo)}/git/refs/heads/{quoted(branch)}",
            object={
                "type": "commit",
                "sha": sha,
                "url": f"{self.repo_api(repo)}/git/commits/{sha}",
            },
        )
        return body

    def git_commit(self, repo: Repo, commit: Commit) -> dict[str, Any]:
        """The ``commit`` half of a file-commit (a git commit object)."""
        body = self.example("file-commit-example-for-updating-a-file", "commit")
        person = {"date": iso(commit.date), "name": commit.author, "email": self.email(commit)}
        body.update(
            sha=commit.sha,
            node_id=node_id("Commit", int(commit.sha[:7], 16)),
            url=f"{self.repo_api(repo)}/git/commits/{commit.sha}",
            html_url=f"{self.repo_html(repo)}/commit/{commit.sha}",
            author=person,
            committer=dict(person),
            message=commit.message,
            tree={"url": f"{self.repo_api(repo)}/git/trees/{commit.tree}", "sha": commit.tree},
            parents=[self.parent_ref(repo, sha) for sha in commit.parents],
        )
        return body

    def parent_ref(self, repo: Repo, sha: str) -> dict[str, Any]:
        return {
            "url": f"{self.repo_api(repo)}/commits/{sha}",
            "html_url": f"{self.repo_html(repo)}/commit/{sha}",
            "sha": sha,
        }

    def email(self, commit: Commit) -> str:
        user = self.state.user(commit.author)
        return f"{user.id}+{commit.author}@users.noreply.github.com"

    def commit(self, repo: Repo, commit: Commit) -> dict[str, Any]:
        """GET commits/{ref}: the REST commit with its files against the first parent."""
        git = self.git_commit(repo, commit)
        parent = self.state.get_commit(commit.parents[0]).files if commit.parents else {}
        files = [
            self.diff_entry(repo, change, commit.sha) for change in changes(parent, commit.files)
        ]
        additions = sum(f["additions"] for f in files)
        deletions = sum(f["deletions"] for f in files)
        return {
            "sha": commit.sha,
            "node_id": git["node_id"],
            "commit": {
                "author": git["author"],
                "committer": git["committer"],
                "message": commit.message,
                "tree": git["tree"],
                "url": git["url"],
                "comment_count": 0,
                "verification": git["verification"],
            },
            "url": f"{self.repo_api(repo)}/commits/{commit.sha}",
            "html_url": f"{self.repo_html(repo)}/commit/{commit.sha}",
            "comments_url": f"{self.repo_api(repo)}/commits/{commit.sha}/comments",
            "author": self.user(commit.author),
            "committer": self.user(commit.author),
            "parents": [self.parent_ref(repo, sha) for sha in commit.parents],
            "stats": {
                "total": additions + deletions,
                "additions": additions,
                "deletions": deletions,
            },
            "files": files,
        }

    def branch(self, repo: Repo, name: str) -> dict[str, Any]:
        commit = self.state.get_commit(repo.branches[name])
        url = f"{self.repo_api(repo)}/branches/{quoted(name)}"
        return {
            "name": name,
            "commit": self.commit(repo, commit) | {"files": []},
            "_links": {"self": url, "html": f"{self.repo_html(repo)}/tree/{quoted(name)}"},
            "protected": False,
            "protection": {
                "enabled": False,
                "required_status_checks": {
                    "enforcement_level": "off",
                    "contexts": [],
                    "checks": [],
                },
            },
            "protection_url": f"{url}/protection",
        }

    # -- contents ------------------------------------------------------------------------------

    def content_links(self, repo: Repo, path: str, ref: str, sha: str) -> dict[str, Any]:
        api = f"{self.repo_api(repo)}/contents/{quoted(path)}?ref={urllib.parse.quote(ref)}"
        git = f"{self.repo_api(repo)}/git/blobs/{sha}"
        html = f"{self.repo_html(repo)}/blob/{quoted(ref)}/{quoted(path)}"
        return {
            "url": api,
            "git_url": git,
            "html_url": html,
            "download_url": f"{self.repo_html(repo)}/raw/{quoted(ref)}/{quoted(path)}",
            "_links": {"self": api, "git": git, "html": html},
        }

    def content_file(self, repo: Repo, path: str, text: str, ref: str) -> dict[str, Any]:
        sha = blob_sha(text)
        encoded = base64.b64encode(text.encode("utf-8")).decode()
        wrapped = "".join(encoded[i : i + 60] + "\n" for i in range(0, len(encoded), 60))
        body = self.example("content-file-response-if-content-is-a-file")
        body.update(
            type="file",
            encoding="base64",
            size=len(text.encode("utf-8")),
            name=path.rsplit("/", 1)[-1],
            path=path,
            content=wrapped,
            sha=sha,
            **self.content_links(repo, path, ref, sha),
        )
        return body

    def content_entry(
        self, repo: Repo, path: str, ref: str, files: dict[str, str]
    ) -> dict[str, Any]:
        """A directory listing entry (a file, or a sub-directory when ``path`` is not a file)."""
        template = self.example("content-file-response-if-content-is-a-directory", 0)
        is_file = path in files
        sha = blob_sha(files[path]) if is_file else blob_sha(path)
        template.update(
            type="file" if is_file else "dir",
            size=len(files[path].encode("utf-8")) if is_file else 0,
            name=path.rsplit("/", 1)[-1],
            path=path,
            sha=sha,
            **self.content_links(repo, path, ref, sha),
        )
        if not is_file:
            template["download_url"] = None
        return template

    def file_commit(self, repo: Repo, path: str, commit: Commit, branch: str) -> dict[str, Any]:
        text = commit.files.get(path)
        content = None
        if text is not None:
            content = self.content_file(repo, path, text, branch)
            for key in ("content", "encoding"):
                content.pop(key)
        return {"content": content, "commit": self.git_commit(repo, commit)}

    def diff_entry(self, repo: Repo, change: FileChange, head_sha: str) -> dict[str, Any]:
        patch, additions, deletions = change.patch()
        body = self.example("diff-entry-items", 0)
        path = quoted(change.path)
        body.update(
            sha=blob_sha(change.new if change.new is not None else change.old or ""),
            filename=change.path,
            status=change.status,
            additions=additions,
            deletions=deletions,
            changes=additions + deletions,
            blob_url=f"{self.repo_html(repo)}/blob/{head_sha}/{path}",
            raw_url=f"{self.repo_html(repo)}/raw/{head_sha}/{path}",
            contents_url=f"{self.repo_api(repo)}/contents/{path}?ref={head_sha}",
            patch=patch,
        )
        return body
