"""Response bodies for the App side: installation, tokens, permissions, checks and Actions."""

from __future__ import annotations

import hashlib
from datetime import datetime, timedelta
from typing import Any

from .model import Artifact, CheckRun, Repo, Workflow, WorkflowRun, iso
from .render import node_id
from .render_pulls import PullRenderer

APP_PERMISSIONS = {
    "actions": "write",
    "checks": "write",
    "contents": "write",
    "issues": "write",
    "metadata": "read",
    "pull_requests": "write",
}
APP_EVENTS = ["check_run", "issue_comment", "pull_request", "workflow_run"]
ROLE_TO_PERMISSION = {
    "admin": "admin",
    "maintain": "write",
    "write": "write",
    "triage": "read",
    "read": "read",
    "none": "none",
}


class Renderer(PullRenderer):
    """Every response body: repositories (render.py), pulls (render_pulls.py), App side."""

    def actions_app(self) -> dict[str, Any]:
        """The GitHub Actions app, owner of every workflow job's check run."""
        template = self.example("check-run", "app")
        template.update(
            id=15368,
            slug="github-actions",
            node_id=node_id("App", 15368),
            name="GitHub Actions",
            external_url="https://help.github.com/en/actions",
            html_url="https://github.com/apps/github-actions",
        )
        return template

    def app(self) -> dict[str, Any]:
        template = self.example("check-run", "app")
        state = self.state
        template.update(
            id=state.app_id,
            slug=state.app_slug,
            node_id=node_id("App", state.app_id),
            owner=self.user(state.repo().owner),
            name=state.app_slug.capitalize(),
            description="",
            external_url=f"{self.base}/apps/{state.app_slug}",
            html_url=f"{self.base}/apps/{state.app_slug}",
            permissions=dict(APP_PERMISSIONS),
            events=list(APP_EVENTS),
        )
        return template

    def installation(self, installation_id: int, repo: Repo) -> dict[str, Any]:
        body = self.example("installation")
        owner = self.state.user(repo.owner)
        body.update(
            id=installation_id,
            account=self.user(repo.owner),
            repository_selection="all",
            access_tokens_url=f"{self.base}/app/installations/{installation_id}/access_tokens",
            repositories_url=f"{self.base}/installation/repositories",
            html_url=f"{self.base}/settings/installations/{installation_id}",
            app_id=self.state.app_id,
            client_id=f"Iv1.{self.state.app_id:016x}",
            target_id=owner.id,
            target_type="Organization" if owner.type == "Organization" else "User",
            permissions=dict(APP_PERMISSIONS),
            events=list(APP_EVENTS),
            single_file_name=None,
            has_multiple_single_files=False,
            single_file_paths=[],
            app_slug=self.state.app_slug,
            suspended_at=None,
            suspended_by=None,
        )
        return body

    def installation_token(
        self, token: str, expires_at: datetime, permissions: dict[str, str]
    ) -> dict[str, Any]:
        template = self.example("installation-token")
        template.pop("repositories", None)
        template.update(
            token=token,
            expires_at=iso(expires_at),
            permissions=permissions or dict(APP_PERMISSIONS),
            repository_selection="all",
        )
        return template

    def collaborator_permission(self, repo: Repo, login: str) -> dict[str, Any]:
        role = self.state.permission(login, repo.full_name)
        user = self.user(login)
        rank = ["none", "read", "triage", "write", "maintain", "admin"].index(role)
        user["permissions"] = {
            "admin": rank >= 5,
            "maintain": rank >= 4,
            "push": rank >= 3,
            "triage": rank >= 2,
            "pull": rank >= 1,
        }
        user["role_name"] = role
        return {"permission": ROLE_TO_PERMISSION[role], "role_name": role, "user": user}

    # -- checks --------------------------------------------------------------------------------

    def _pull_ref(self, repo: Any, pr: Any) -> dict[str, Any]:
        """The minimal pull-request object check runs and workflow runs carry."""
        return {
            "url": f"{self.repo_api(repo)}/pulls/{pr.number}",
            "id": pr.id,
            "number": pr.number,
            "head": {"ref": pr.head, "sha": pr.head_sha, "repo": self._repo_ref(pr.head_repo)},
            "base": {
                "ref": pr.base,
                "sha": repo.branches.get(pr.base, pr.head_sha),
                "repo": self._repo_ref(repo.full_name),
            },
        }

    def check_run(self, run: CheckRun) -> dict[str, Any]:
        repo = self.state.repo(run.repo)
        url = f"{self.repo_api(repo)}/check-runs/{run.id}"
        html = f"{self.repo_html(repo)}/runs/{run.id}"
        pulls = [
            self._pull_ref(repo, pr)
            for pr in self.state.pulls(repo.full_name)
            if pr.state == "open" and pr.head_sha == run.head_sha and not pr.fork
        ]
        body = self.example("check-run")
        body.update(
            id=run.id,
            head_sha=run.head_sha,
            node_id=node_id("CheckRun", run.id),
            external_id=run.external_id,
            url=url,
            html_url=html,
            details_url=run.details_url or html,
            status=run.status,
            conclusion=run.conclusion,
            started_at=iso(run.started_at),
            completed_at=iso(run.completed_at),
            output={
                "title": run.title,
                "summary": run.summary,
                "text": run.text,
                "annotations_count": 0,
                "annotations_url": f"{url}/annotations",
            },
            name=run.name,
            check_suite={"id": run.check_suite_id or run.id + 7},
            app=self.actions_app() if run.actions else self.app(),
            pull_requests=pulls,
        )
        return body

    def _repo_ref(self, full_name: str) -> dict[str, Any]:
        repo = self.state.repo(full_name)
        return {"id": repo.id, "url": self.repo_api(repo), "name": repo.name}

    # -- actions -------------------------------------------------------------------------------

    def workflow(self, workflow: Workflow) -> dict[str, Any]:
        api = f"{self.repo_api(workflow.repo)}/actions/workflows/{workflow.id}"
        html = f"{self.repo_html(workflow.repo)}/blob/HEAD/{workflow.path}"
        return {
            "id": workflow.id,
            "node_id": node_id("Workflow", workflow.id),
            "name": workflow.name,
            "path": workflow.path,
            "state": "active",
            "created_at": iso(workflow.created_at),
            "updated_at": iso(workflow.created_at),
            "url": api,
            "html_url": html,
            "badge_url": f"{self.repo_html(workflow.repo)}/workflows/{workflow.name}/badge.svg",
        }

    def workflow_run(self, run: WorkflowRun) -> dict[str, Any]:
        repo = self.state.repo(run.repo)
        api = f"{self.repo_api(repo)}/actions/runs/{run.id}"
        commit = self.state.get_commit(run.head_sha)
        person = {"name": commit.author, "email": self.email(commit)}
        pulls = [
            self._pull_ref(repo, pr)
            for pr in self.state.pulls(repo.full_name)
            if pr.state == "open" and pr.head == run.head_branch and not pr.fork
        ]
        body = self.example("workflow-run")
        body.update(
            id=run.id,
            name=run.name,
            node_id=node_id("WorkflowRun", run.id),
            check_suite_id=run.check_suite_id,
            check_suite_node_id=node_id("CheckSuite", run.check_suite_id),
            head_branch=run.head_branch,
            head_sha=run.head_sha,
            path=run.path,
            run_number=run.run_number,
            event=run.event,
            display_title=run.display_title,
            status=run.status,
            conclusion=run.conclusion,
            workflow_id=run.workflow_id,
            url=api,
            html_url=f"{self.repo_html(repo)}/actions/runs/{run.id}",
            pull_requests=pulls,
            created_at=iso(run.created_at),
            updated_at=iso(run.updated_at),
            actor=self.user(run.actor),
            run_attempt=1,
            referenced_workflows=[],
            run_started_at=iso(run.run_started_at or run.created_at),
            triggering_actor=self.user(run.actor),
            jobs_url=f"{api}/jobs",
            logs_url=f"{api}/logs",
            check_suite_url=f"{self.repo_api(repo)}/check-suites/{run.check_suite_id}",
            artifacts_url=f"{api}/artifacts",
            cancel_url=f"{api}/cancel",
            rerun_url=f"{api}/rerun",
            previous_attempt_url=None,
            workflow_url=f"{self.repo_api(repo)}/actions/workflows/{run.workflow_id}",
            head_commit={
                "id": commit.sha,
                "tree_id": commit.tree,
                "message": commit.message,
                "timestamp": iso(commit.date),
                "author": person,
                "committer": dict(person),
            },
            repository=self.repo(repo, "minimal"),
            head_repository=self.repo(repo, "minimal"),
        )
        return body

    def artifact(self, artifact: Artifact, zipped: bytes) -> dict[str, Any]:
        repo = self.state.repo(artifact.repo)
        run = self.state.run(artifact.run_id)
        api = f"{self.repo_api(repo)}/actions/artifacts/{artifact.id}"
        body = self.example("artifact-paginated", "artifacts", 0)
        body.update(
            id=artifact.id,
            node_id=node_id("Artifact", artifact.id),
            name=artifact.name,
            size_in_bytes=artifact.size,
            url=api,
            archive_download_url=f"{api}/zip",
            expired=False,
            created_at=iso(artifact.created_at),
            expires_at=iso(artifact.created_at + timedelta(days=90)),
            updated_at=iso(artifact.created_at),
            digest="sha256:" + hashlib.sha256(zipped).hexdigest(),
            workflow_run={
                "id": run.id,
                "repository_id": repo.id,
                "head_repository_id": repo.id,
                "head_branch": run.head_branch,
                "head_sha": run.head_sha,
            },
        )
        return body
